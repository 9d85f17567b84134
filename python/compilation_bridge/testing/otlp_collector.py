"""An OTLP/HTTP collector on loopback, for the tests and the observers benchmark: it answers what
OpenTelemetry's exporters send (protobuf, POST /v1/traces and /v1/metrics) as a real collector does, and
keeps every request decoded. Needs the `otel` extra (the `opentelemetry-proto` messages).
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import Message
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span

# What each path accepts and answers.
SERVICES: dict[str, tuple[type[Message], type[Message]]] = {
    "/v1/traces": (trace_service_pb2.ExportTraceServiceRequest, trace_service_pb2.ExportTraceServiceResponse),
    "/v1/metrics": (
        metrics_service_pb2.ExportMetricsServiceRequest,
        metrics_service_pb2.ExportMetricsServiceResponse,
    ),
}


class Collector:
    """Serves on 127.0.0.1 (a free port) from a thread until `close`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.received: dict[str, list[Any]] = {path: [] for path in SERVICES}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-collector", daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def keep(self, path: str, request: Any) -> None:
        with self._lock:
            self.received[path].append(request)

    def spans(self) -> list[Span]:
        with self._lock:
            requests = list(self.received["/v1/traces"])
        return [
            span for r in requests for rs in r.resource_spans for ss in rs.scope_spans for span in ss.spans
        ]

    def metrics(self) -> Iterator[Metric]:
        with self._lock:
            requests = list(self.received["/v1/metrics"])
        for request in requests:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    yield from sm.metrics

    def resource_attributes(self) -> dict[str, Any]:
        """The attributes of the first resource that sent spans."""
        with self._lock:
            first = self.received["/v1/traces"][0].resource_spans[0]
        return attributes(first.resource.attributes)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def attributes(pairs: Any) -> dict[str, Any]:
    """OTLP key-values as a plain dict."""
    found: dict[str, Any] = {}
    for pair in pairs:
        assert isinstance(pair, KeyValue)
        found[pair.key] = value_of(pair.value)
    return found


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _handler(collector: Collector) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            kinds = SERVICES.get(self.path)
            if kinds is None:
                self.send_error(404)
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = kinds[0]()
            request.ParseFromString(body)
            collector.keep(self.path, request)
            answer = kinds[1]().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a request per export: not worth a line on the test's stderr

    return Handler
