"""OpenTelemetry's pipeline in the worker: providers, exporters (`otel_exporters`) and the hub observer,
from the settings.

Call spans are built and exported by the span export process (`span_export_process`), phase spans here
(they are few); both leave in batches and metrics at intervals, from OpenTelemetry's own threads, never
from a call's. The providers are the worker's own, not OpenTelemetry's global ones, so that a test (or a
library in the process) cannot be confused with the worker's pipeline.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import TextIO

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

import compilation_bridge
from compilation_bridge.observability import hub
from compilation_bridge.observability.otel import OtelObserver
from compilation_bridge.observability.otel_exporters import metric_exporters, span_exporters
from compilation_bridge.observability.otel_recorder import BuiltHere, CallRecorder
from compilation_bridge.observability.readings import Readings
from compilation_bridge.observability.span_export_process import ShippedSpans
from compilation_bridge.settings import OtelSettings

log = logging.getLogger("compilation_bridge.observability")

SCOPE = "compilation_bridge"


def resource(wanted: OtelSettings) -> Resource:
    """Who the spans and metrics come from: Snakepit's names, so its dashboards find this worker too."""
    return Resource.create(
        {
            "service.name": wanted.service_name,
            "service.namespace": "snakepit",
            "service.instance.id": wanted.instance_id or uuid.uuid4().hex,
            "service.version": compilation_bridge.__version__,
            "process.pid": os.getpid(),
        }
    )


class OtelExport:
    """The running pipeline: its observer is registered with the hub until `stop`."""

    def __init__(self, tracers: TracerProvider, meters: MeterProvider, observer: OtelObserver) -> None:
        self.tracers = tracers
        self.meters = meters
        self.observer = observer

    def stop(self, timeout_s: float) -> None:
        """Stop observing, then deliver the spans still queued and a last reading of the metrics, within
        `timeout_s` (a collector that does not answer must not hold a stopping worker past Snakepit's
        patience)."""
        hub.remove(self.observer)
        flushing = threading.Thread(target=self._shut_down, args=(timeout_s,), name="otel-stop", daemon=True)
        flushing.start()
        flushing.join(timeout_s)
        if flushing.is_alive():
            log.warning("OpenTelemetry's last spans and metrics were not delivered within %.1f s", timeout_s)

    def _shut_down(self, timeout_s: float) -> None:
        recorder = self.observer.recorder
        recorder.stop()  # the calls noted so far are counted, and the sampled ones sent
        recorder.spans.close(timeout_s)  # the span export process exports what it holds
        self.tracers.shutdown()  # the phase spans queued are exported
        self.meters.shutdown()  # a last reading of every metric is exported


def start(wanted: OtelSettings, readings: Readings, console: TextIO | None = None) -> OtelExport:
    """Build the pipeline `wanted` asks for and register its observer with the hub."""
    out = console or sys.stderr  # never stdout: the port's frames travel there
    who = resource(wanted)
    processors = SynchronousMultiSpanProcessor()  # phase spans through the tracer, call spans directly
    for exporter in span_exporters(wanted, out):
        processors.add_span_processor(BatchSpanProcessor(exporter))
    # Not at exit: `stop` shuts them down within the worker's time, and a second shutdown only warns.
    tracers = TracerProvider(resource=who, active_span_processor=processors, shutdown_on_exit=False)
    readers: list[MetricReader] = [PeriodicExportingMetricReader(e) for e in metric_exporters(wanted, out)]
    meters = MeterProvider(resource=who, metric_readers=readers, shutdown_on_exit=False)
    version = compilation_bridge.__version__
    tracer, meter = tracers.get_tracer(SCOPE, version), meters.get_meter(SCOPE, version)
    _gauges(meter, readings)
    scope = InstrumentationScope(SCOPE, version)
    hello = {"resource": dict(who.attributes), "schema_url": who.schema_url, "scope": [SCOPE, version]}
    spans = ShippedSpans(hello, fallback=BuiltHere(processors, who, scope))
    observer = OtelObserver(tracer, CallRecorder(spans, tracers.sampler, meter))
    hub.add(observer)
    log.info("OpenTelemetry: spans and metrics to %s", wanted.endpoint or "stderr")
    return OtelExport(tracers, meters, observer)


def _gauges(meter: Meter, readings: Readings) -> None:
    """The worker's state, read when metrics are exported (not on any call)."""
    meter.create_observable_gauge(
        "compilation_bridge.refs",
        callbacks=[_reading(readings.refs_held)],
        unit="{ref}",
        description="refs the worker's table holds (with a shared store: the application's)",
    )
    meter.create_observable_gauge(
        "compilation_bridge.memory.resident",
        callbacks=[_reading(readings.resident_bytes)],
        unit="By",
        description="the worker's resident set size",
    )


def _reading(read: Callable[[], int]) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        try:
            return [Observation(read())]
        except Exception:  # a store that is away, a table already closed: no reading this time
            return []

    return observe
