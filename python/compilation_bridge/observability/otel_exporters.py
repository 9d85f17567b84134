"""Where OpenTelemetry's spans and metrics are sent, from the settings.

OTLP over HTTP, as Snakepit (its Python server and its Elixir side) exports: `SNAKEPIT_OTEL_ENDPOINT` is
the collector, either its base URL (`http://host:4318`) or Snakepit's form, the traces URL itself
(`.../v1/traces`); metrics go to the same collector's `/v1/metrics`. With `SNAKEPIT_OTEL_CONSOLE` they are
also printed, to the stream given (never stdout: a port worker's frames travel there).
"""

from __future__ import annotations

from typing import TextIO

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricExporter
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter

from compilation_bridge.settings import OtelSettings

SIGNAL_PATHS = ("/v1/traces", "/v1/metrics")


def signal_urls(endpoint: str) -> tuple[str, str]:
    """The traces and metrics URLs of the collector `endpoint` names (see the module's doc)."""
    base = endpoint.strip().rstrip("/")
    if "://" not in base:
        base = "http://" + base  # `host:4318`: OTLP/HTTP is plain HTTP unless the URL says https
    for path in SIGNAL_PATHS:
        base = base.removesuffix(path)
    traces, metrics = (base + path for path in SIGNAL_PATHS)
    return traces, metrics


def span_exporters(wanted: OtelSettings, out: TextIO) -> list[SpanExporter]:
    exporters: list[SpanExporter] = []
    if wanted.endpoint:
        exporters.append(OTLPSpanExporter(endpoint=signal_urls(wanted.endpoint)[0]))
    if wanted.console:
        exporters.append(ConsoleSpanExporter(out=out))
    return exporters


def metric_exporters(wanted: OtelSettings, out: TextIO) -> list[MetricExporter]:
    exporters: list[MetricExporter] = []
    if wanted.endpoint:
        exporters.append(OTLPMetricExporter(endpoint=signal_urls(wanted.endpoint)[1]))
    if wanted.console:
        exporters.append(ConsoleMetricExporter(out=out))
    return exporters
