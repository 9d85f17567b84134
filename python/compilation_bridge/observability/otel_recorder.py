"""Finished tool calls become OpenTelemetry spans and metrics here, on a thread of its own.

On the call's thread the observer (`otel`) only notes the ended call (its `hub.Call`: its times, outcome
and the progress events that had no phase to go to; its span's ids, when a phase drew them). The
budget for everything that watches the worker is 3% of a call (docs/observability.md, Cost), and
OpenTelemetry's Python SDK spends tens of microseconds on a span, so the recorder drains the notes a few
times a second, off the call's thread, counts each call in the metrics, and sends the sampled ones, a
batch at a time, to where their spans are built (`CallSpans`): the span export process
(`span_export_process`), or this process's span processors (`BuiltHere`).

Every call counts in the metrics; spans follow OpenTelemetry's sampler (`OTEL_TRACES_SAMPLER`, every
call by default), asked once per call with the call's trace id, so a call's phases are kept or dropped
with it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Protocol

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.sampling import Sampler
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind

from compilation_bridge.observability import hub
from compilation_bridge.observability.otel_spans import CALL_SPANS, ERROR_TYPE, TOOL, call_span, draw_ids

OUTCOME = "outcome"
DRAIN_EVERY_S = 0.2
YIELD_EVERY = 16  # calls recorded between two yields of the interpreter (well under a millisecond)
MAX_BATCH = 1024  # calls sent at once: bounds a message to the span export process
MAX_SERIES = 1000
OTHER = "other"
# Calls noted and not yet recorded: beyond it the oldest are dropped, so a recorder that cannot keep up
# costs a bounded amount of memory (about 300 bytes a call).
MAX_PENDING_CALLS = 65_536


class CallSpans(Protocol):
    """Where the sampled calls go to become spans."""

    def send(self, calls: list[hub.Call]) -> None:
        """On the recorder's thread: a batch of ended calls, their ids drawn."""
        ...

    def close(self, timeout_s: float) -> None:
        """After the last batch: deliver what is held, within `timeout_s`."""
        ...


class BuiltHere:
    """Call spans built in this process and handed to its span processors, as whom `resource` and
    `scope` say (the tracer provider's, and the phase spans' tracer's)."""

    def __init__(self, processor: SpanProcessor, resource: Resource, scope: InstrumentationScope) -> None:
        self._processor = processor
        self._resource = resource
        self._scope = scope

    def send(self, calls: list[hub.Call]) -> None:
        for call in calls:
            self._processor.on_end(call_span(call, self._resource, self._scope))

    def close(self, timeout_s: float) -> None:
        """Nothing held here: the tracer provider's shutdown flushes its processors."""


class CallRecorder:
    """Counts noted calls in the metrics and sends the sampled ones to `spans`, on its own thread, until
    `stop`."""

    def __init__(self, spans: CallSpans, sampler: Sampler, meter: Meter) -> None:
        self.spans = spans
        self._sampler = sampler
        self._calls, self._errors = Tally((TOOL, OUTCOME)), Tally((TOOL, ERROR_TYPE))
        meter.create_observable_counter(
            "compilation_bridge.calls",
            callbacks=[self._calls.observe],
            unit="{call}",
            description="tool calls answered, by tool and outcome",
        )
        meter.create_observable_counter(
            "compilation_bridge.errors",
            callbacks=[self._errors.observe],
            unit="{call}",
            description="failed tool calls, by tool and error type",
        )
        self._duration = meter.create_histogram(
            "compilation_bridge.call.duration",
            unit="s",
            description="tool call duration, by tool and outcome",
        )
        self._pending: deque[hub.Call] = deque(maxlen=MAX_PENDING_CALLS)  # appends are atomic: no lock
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="otel-calls", daemon=True)
        self._thread.start()

    def note(self, call: hub.Call) -> None:
        """On the call's thread: a deque append, nothing more."""
        self._pending.append(call)

    def sampled(self, trace_id: int) -> bool:
        """Whether the sampler keeps the call span of `trace_id` (and so its phases)."""
        result = self._sampler.should_sample(None, trace_id, CALL_SPANS[False], SpanKind.SERVER)
        return result.decision.is_sampled()

    def stop(self) -> None:
        """Record what is noted, then end the thread."""
        self._stopping.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopping.wait(DRAIN_EVERY_S):
            self._drain()
        self._drain()

    def _drain(self) -> None:
        sampled: list[hub.Call] = []
        recorded = 0
        while self._pending:
            call = self._pending.popleft()
            if self._record(call):
                sampled.append(call)
            if len(sampled) == MAX_BATCH:
                self.spans.send(sampled)
                sampled = []
            recorded += 1
            if recorded % YIELD_EVERY == 0:
                time.sleep(0)  # a call waiting for the interpreter goes first: recording is never urgent
        if sampled:
            self.spans.send(sampled)

    def _record(self, call: hub.Call) -> bool:
        """Counts the call; whether its span is kept."""
        outcome = "error" if call.error_type else "ok"
        self._calls.add(call.tool, outcome)
        if call.error_type:
            self._errors.add(call.tool, call.error_type)
        self._duration.record((call.ended_ns - call.started_ns) / 1e9, {TOOL: call.tool, OUTCOME: outcome})
        draw_ids(call)
        return self.sampled(call.trace_id)


class Tally:
    """Counts by attribute values, kept by the recorder's thread and read by the metric reader's as an
    observable counter: a dict update instead of an SDK measurement (several microseconds) per call.
    Callers choose tool names, so at most MAX_SERIES distinct value sets are kept, the rest as `other`."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self._keys = keys
        self._counts: dict[tuple[str, ...], int] = {}  # written by one thread only

    def add(self, *values: str) -> None:
        if values not in self._counts and len(self._counts) >= MAX_SERIES:
            values = (OTHER,) * len(values)
        self._counts[values] = self._counts.get(values, 0) + 1

    def observe(self, options: CallbackOptions) -> list[Observation]:
        counts = list(self._counts.items())  # one copy under the interpreter lock: safe while it grows
        return [Observation(count, dict(zip(self._keys, values, strict=True))) for values, count in counts]
