"""OpenTelemetry where the operator asks for it: a real worker with SNAKEPIT_OTEL_ENDPOINT pointing at an
OTLP/HTTP collector on loopback (`testing.otlp_collector`) sends a span per call and per compile phase,
linked by Snakepit's correlation id, and its metrics. Without the variable nothing of OpenTelemetry is
imported; with it but without the packages, the worker warns once and serves.

The tests that need the `otel` extra skip only where it is not installed (scripts/test.sh installs it).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest

from compilation_bridge.refs.local import LocalRefTable
from compilation_bridge.settings import INSTANCE_ID_ENV, OTEL_CONSOLE_ENV, OTEL_ENDPOINT_ENV
from compilation_bridge.testing.session import CallError, SnakeBridgeSession, wire_ref
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.options import ServeOptions
from compilation_bridge.transport.server import RunningServer, build_server
from compilation_bridge.worker import Worker

if TYPE_CHECKING:
    from compilation_bridge.testing.otlp_collector import Collector

HAS_OTEL = find_spec("opentelemetry") is not None and all(
    find_spec(name) is not None
    for name in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http", "opentelemetry.proto")
)
needs_otel = pytest.mark.skipif(not HAS_OTEL, reason="the `otel` extra is not installed")
SPAN_KIND_SERVER = 2  # opentelemetry.proto.trace.v1.Span.SpanKind
STATUS_UNSET, STATUS_ERROR = 0, 2


@dataclass
class Served:
    worker: Worker
    server: RunningServer
    session: SnakeBridgeSession
    stub: pb_grpc.BridgeServiceStub
    spans: Any  # where call spans go: the span export process, once started

    def stop(self) -> None:
        """Stop as `serve` does at SIGTERM: the server, then the worker (which delivers the last spans).
        The worker waits for that delivery 1 s at most, as Snakepit's patience requires, and lets it go on
        beyond (the span export process ends once it has delivered them); a loaded machine can take
        longer, so the test waits for it to end."""
        self.server.stop(0)
        self.worker.stop()
        for thread in threading.enumerate():
            if thread.name == "otel-stop":
                thread.join(120)
        if self.spans.process is not None:
            self.spans.process.wait(120)


@pytest.fixture
def collector() -> Iterator[Collector]:
    from compilation_bridge.testing.otlp_collector import Collector

    running = Collector()
    yield running
    running.close()


@pytest.fixture
def served(
    collector: Collector, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Served]:
    """A worker exporting to `collector`; indirect parameters name OpenTelemetry's sampler."""
    monkeypatch.setenv(OTEL_ENDPOINT_ENV, collector.endpoint + "/v1/traces")  # Snakepit's form of it
    monkeypatch.setenv(INSTANCE_ID_ENV, "worker-7")
    if getattr(request, "param", None):
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", request.param)
    worker = Worker(refs=LocalRefTable())
    worker.start()
    server = build_server(ServeOptions(), worker.dispatcher)
    channel = grpc.insecure_channel(f"localhost:{server.port}")
    stub = pb_grpc.BridgeServiceStub(channel)
    session = SnakeBridgeSession(stub, "worker-session", "S1")
    yield Served(worker, server, session, stub, shipped_spans())
    channel.close()
    server.stop(0)
    worker.stop()  # a second stop does nothing


def call_with_correlation(served: Served, correlation: str, payload: dict[str, Any]) -> Any:
    request = served.session.request("snakebridge.call", payload)
    request.metadata["correlation_id"] = correlation
    return served.stub.ExecuteTool(request)


def construct_payload(session: SnakeBridgeSession, *args: Any, **kwargs: Any) -> dict[str, Any]:
    payload = session.base("vllm.config", "__init__", list(args), kwargs)
    payload.update(call_type="class", **{"class": "CompilationConfig"})
    return payload


def span_attributes(span: Any) -> dict[str, Any]:
    from compilation_bridge.testing.otlp_collector import attributes

    return attributes(span.attributes)


def by_correlation(collector: Collector, correlation: str) -> Any:
    (span,) = [
        s for s in collector.spans() if span_attributes(s).get("snakepit.correlation_id") == correlation
    ]
    return span


def points(collector: Collector, name: str) -> list[tuple[dict[str, Any], Any]]:
    """(attributes, data point) of every point of metric `name` in the last export that has it."""
    from compilation_bridge.testing.otlp_collector import attributes

    found = [m for m in collector.metrics() if m.name == name]
    assert found, f"no {name} among {sorted({m.name for m in collector.metrics()})}"
    data = getattr(found[-1], found[-1].WhichOneof("data"))
    return [(attributes(p.attributes), p) for p in data.data_points]


@needs_otel
def test_a_span_per_call_with_snakepit_names_and_the_correlation_id(
    served: Served, collector: Collector
) -> None:
    ok = call_with_correlation(served, "corr-ok", construct_payload(served.session, mode=3))
    failed = call_with_correlation(
        served, "corr-failed", construct_payload(served.session, None, None, mode=3)
    )
    assert ok.success and not failed.success
    served.stop()

    good, bad = by_correlation(collector, "corr-ok"), by_correlation(collector, "corr-failed")
    assert good.name == bad.name == "BridgeService/ExecuteTool"
    assert good.kind == SPAN_KIND_SERVER and good.trace_id != bad.trace_id
    assert span_attributes(good) == {
        "snakepit.tool": "snakebridge.call",
        "snakepit.session_id": "worker-session",
        "snakepit.correlation_id": "corr-ok",
        "snakebridge.operation": "class:CompilationConfig.__init__",
    }
    assert good.status.code == STATUS_UNSET
    assert bad.status.code == STATUS_ERROR and bad.status.message == "ValidationError"
    assert span_attributes(bad)["error.type"] == "ValidationError"
    resource = collector.resource_attributes()
    assert (
        resource["service.name"] == "snakepit.python.bridge" and resource["service.namespace"] == "snakepit"
    )
    assert resource["service.instance.id"] == "worker-7" and resource["process.pid"] == os.getpid()


@needs_otel
def test_a_failed_stream_is_an_error_span(served: Served, collector: Collector) -> None:
    with pytest.raises(grpc.RpcError):
        served.session.stream(served.session.base("os", "getcwd", [], {}))
    served.stop()
    (span,) = collector.spans()
    assert span.name == "BridgeService/ExecuteStreamingTool" and span.status.code == STATUS_ERROR
    assert span_attributes(span)["error.type"] == "ImportError"


def shipped_spans() -> Any:
    """The call spans' destination of the OpenTelemetry observer registered now."""
    from compilation_bridge.observability import hub
    from compilation_bridge.observability.otel import OtelObserver

    (observer,) = [o for o in hub._observers if isinstance(o, OtelObserver)]
    return observer.recorder.spans


@needs_otel
def test_call_spans_are_built_and_exported_by_a_process_of_their_own(
    served: Served, collector: Collector
) -> None:
    spans = served.spans
    assert call_with_correlation(served, "corr-shipped", construct_payload(served.session)).success
    served.stop()
    assert by_correlation(collector, "corr-shipped").name == "BridgeService/ExecuteTool"
    assert not spans.failed and spans.process.pid != os.getpid()
    assert spans.process.wait(60) == 0  # it ended once the worker closed its stdin, all delivered


@needs_otel
def test_without_the_export_process_the_worker_builds_the_spans_itself(
    served: Served, collector: Collector, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from compilation_bridge.observability import span_export_process

    monkeypatch.setattr(span_export_process, "COMMAND", [sys.executable, "-c", "raise SystemExit(3)"])
    with caplog.at_level(logging.WARNING, "compilation_bridge.observability"):
        assert call_with_correlation(served, "corr-here", construct_payload(served.session)).success
        served.stop()
    assert by_correlation(collector, "corr-here").name == "BridgeService/ExecuteTool"
    assert "call spans are built in the worker from now on" in caplog.text


@needs_otel
def test_the_export_process_imports_nothing_from_the_working_directory(tmp_path: Path) -> None:
    from compilation_bridge.observability import span_export_process

    planted = tmp_path / "msgpack"
    planted.mkdir()
    (planted / "__init__.py").write_text("open(__file__ + '.ran', 'w').close()\n")
    done = subprocess.run(span_export_process.COMMAND, cwd=tmp_path, input=b"", timeout=120)
    assert done.returncode == 1  # no hello: it ends at once
    assert not (planted / "__init__.py.ran").exists()


@needs_otel
def test_an_export_process_that_dies_leaves_the_later_spans_to_the_worker(
    served: Served, collector: Collector
) -> None:
    spans = served.spans
    assert call_with_correlation(served, "corr-before", construct_payload(served.session)).success
    deadline = time.monotonic() + 60
    while spans.process is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the recorder starts it with its first batch
    spans.process.kill()
    spans.process.wait()
    assert call_with_correlation(served, "corr-after", construct_payload(served.session)).success
    served.stop()
    assert spans.failed
    assert by_correlation(collector, "corr-after").name == "BridgeService/ExecuteTool"


@needs_otel
def test_the_worker_metrics_count_calls_errors_refs_and_memory(served: Served, collector: Collector) -> None:
    session = served.session
    ref = session.call_class("vllm.config", "CompilationConfig", mode=3)
    session.call_method(ref, "compute_hash")
    with pytest.raises(CallError):
        session.call_class("vllm.config", "CompilationConfig", [None, None, None], mode=3)
    served.stop()  # the last reading is exported at stop

    calls = {a["outcome"]: p.as_int for a, p in points(collector, "compilation_bridge.calls")}
    assert calls == {"ok": 2, "error": 1}
    ((errors, error_point),) = points(collector, "compilation_bridge.errors")
    assert errors == {"snakepit.tool": "snakebridge.call", "error.type": "ValidationError"}
    assert error_point.as_int == 1
    durations = points(collector, "compilation_bridge.call.duration")
    assert sum(p.count for _, p in durations) == 3
    ((_, refs),) = points(collector, "compilation_bridge.refs")
    assert refs.as_int == 1  # the config; compute_hash's answer is a plain string
    ((_, resident),) = points(collector, "compilation_bridge.memory.resident")
    assert resident.as_int > 0


@needs_otel
# parentbased: a phase follows its parent, so phases are dropped only if the call's context says so
@pytest.mark.parametrize("served", ["parentbased_always_off"], indirect=True)
def test_an_unsampled_call_has_no_spans_nor_phases_but_counts(served: Served, collector: Collector) -> None:
    from compilation_bridge.compile import progress
    from compilation_bridge.observability import hub

    served.session.call_class("vllm.config", "CompilationConfig", mode=3)
    call = hub.Call("snakebridge.call", "function:m.f", "S1", "corr-unsampled")
    with hub.observed(call, hub.watchers()), progress.step("trace", num_tokens=8):  # as in a call
        progress.emit("graph_split", num_pieces=1)
    served.stop()
    assert collector.spans() == []
    calls = {a["outcome"]: p.as_int for a, p in points(collector, "compilation_bridge.calls")}
    assert calls == {"ok": 2}


def children(collector: Collector, parent: Any, name: str) -> list[Any]:
    return [s for s in collector.spans() if s.parent_span_id == parent.span_id and s.name == name]


@needs_otel
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_compile_phases_are_child_spans_of_their_call(served: Served, collector: Collector) -> None:
    session = served.session
    config = session.call_class(
        "vllm.config", "CompilationConfig", mode=3, backend="eager", splitting_ops=["silly::attention"]
    )
    kwargs = {"model": "simple-piecewise", "max_num_tokens": 4}
    compile_model = session.base("compilation_bridge.compile", "compile_model", [wire_ref(config)], kwargs)
    request = session.request("snakebridge.stream", compile_model)
    request.metadata["correlation_id"] = "corr-compile"
    chunks = list(served.stub.ExecuteStreamingTool(request))  # traced on the stream's helper thread
    model = json.loads(chunks[-2].data)["result"]
    run = {**session.for_ref(model, "run", [2], {}), "call_type": "method"}
    assert call_with_correlation(served, "corr-run", run).success  # its first run compiles the pieces
    served.stop()

    streamed = by_correlation(collector, "corr-compile")
    (trace,) = children(collector, streamed, "compile/trace")
    assert trace.trace_id == streamed.trace_id
    assert {e.name for e in trace.events} >= {"compile.dynamo_traced", "compile.graph_split"}
    assert span_attributes(trace)["compile.ok"] is True

    (run_phase,) = children(collector, by_correlation(collector, "corr-run"), "compile/run")
    pieces = children(collector, run_phase, "compile/compile")
    assert sorted(span_attributes(s)["compile.piece"] for s in pieces) == [0, 1, 2]
    for piece in pieces:
        attributes = span_attributes(piece)
        assert attributes["compile.range"] == [1, 4] and attributes["compile.ok"] is True
        # The span lasts exactly what the compile step measured.
        lasted = piece.end_time_unix_nano - piece.start_time_unix_nano
        assert lasted == int(attributes["compile.seconds"] * 1e9)


@needs_otel
def test_phases_nest_carry_point_events_and_say_when_they_failed() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import StatusCode

    from compilation_bridge.compile import progress
    from compilation_bridge.observability import hub
    from compilation_bridge.observability.otel import OtelObserver
    from compilation_bridge.observability.otel_recorder import BuiltHere, CallRecorder

    spans = InMemorySpanExporter()
    tracers = TracerProvider()
    processor = SimpleSpanProcessor(spans)
    tracers.add_span_processor(processor)
    tracer = tracers.get_tracer("test")
    built = BuiltHere(processor, tracers.resource, InstrumentationScope("test"))
    recorder = CallRecorder(built, tracers.sampler, MeterProvider().get_meter("test"))
    observer = OtelObserver(tracer, recorder)
    hub.add(observer)
    try:
        progress.emit("run_end", seconds=1.0)  # its start came before the observer: nothing
        with progress.step("trace", num_tokens=8):
            progress.emit("graph_split", num_pieces=3)
            with pytest.raises(RuntimeError), progress.step("compile", piece=0, range=[1, 8]):
                raise RuntimeError("inductor failed")
    finally:
        hub.remove(observer)
        recorder.stop()
    failed, trace = spans.get_finished_spans()
    assert (trace.name, failed.name) == ("compile/trace", "compile/compile")
    assert failed.parent is not None and failed.parent.span_id == trace.context.span_id
    assert failed.status.status_code == StatusCode.ERROR and failed.attributes["compile.ok"] is False
    assert failed.attributes["compile.range"] == (1, 8)
    assert trace.status.status_code == StatusCode.UNSET and trace.parent is None
    assert [(e.name, e.attributes["compile.num_pieces"]) for e in trace.events] == [
        ("compile.graph_split", 3)
    ]


@needs_otel
def test_callers_cannot_grow_the_counters_without_bound() -> None:
    from compilation_bridge.observability.otel_recorder import MAX_SERIES, OTHER, Tally

    tally = Tally(("snakepit.tool", "outcome"))
    for n in range(MAX_SERIES + 5):
        tally.add(f"tool-{n}", "ok")
    observed = tally.observe(None)  # type: ignore[arg-type]  # no options: it reads none
    assert len(observed) == MAX_SERIES + 1
    assert observed[-1].value == 5 and observed[-1].attributes == {"snakepit.tool": OTHER, "outcome": OTHER}


# ------------------------------------------------------------------------------ in a process of its own
# A worker with one call made, then what the process imported and whether any observer is registered.
ONE_CALL = """
import json, sys
import grpc
from compilation_bridge.observability import hub
from compilation_bridge.refs.local import LocalRefTable
from compilation_bridge.testing.session import SnakeBridgeSession
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.logs import configure_logging
from compilation_bridge.transport.options import ServeOptions
from compilation_bridge.transport.server import build_server
from compilation_bridge.worker import Worker

configure_logging()
worker = Worker(refs=LocalRefTable())
worker.start()
server = build_server(ServeOptions(), worker.dispatcher)
stub = pb_grpc.BridgeServiceStub(grpc.insecure_channel(f"localhost:{server.port}"))
SnakeBridgeSession(stub, "w", "S").call_class("vllm.config", "CompilationConfig", mode=3)
active = hub.active()
server.stop(0)
worker.stop()
imported = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
print("REPORT", json.dumps({"active": active, "imported": imported}), file=sys.stderr)
"""


def one_call_in_a_process(env: dict[str, str], prelude: str = "") -> tuple[dict[str, Any], str, str]:
    """Run ONE_CALL after `prelude`: (its report, its stdout, its stderr)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SNAKEPIT_OTEL", "SNAKEPIT_SERVICE"))}
    done = subprocess.run(
        [sys.executable, "-c", prelude + ONE_CALL],
        env={**base, "SNAKEPIT_LOG_LEVEL": "warning", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # Found by its mark: grpc may log a line of its own as the process ends.
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("REPORT ")]
    report = json.loads(line.removeprefix("REPORT "))
    return report, done.stdout, done.stderr


def test_without_the_setting_nothing_of_opentelemetry_is_imported_or_observed() -> None:
    report, _, _ = one_call_in_a_process({})
    assert report == {"active": False, "imported": []}


def test_set_without_the_packages_the_worker_warns_once_and_serves() -> None:
    hide = "import sys\nsys.modules['opentelemetry'] = None  # as if the extra were not installed\n"
    report, _, stderr = one_call_in_a_process({OTEL_ENDPOINT_ENV: "http://127.0.0.1:9"}, prelude=hide)
    assert report["active"] is False
    assert stderr.count("OpenTelemetry is not installed") == 1, stderr


@needs_otel
def test_console_spans_go_to_stderr_never_stdout() -> None:
    report, stdout, stderr = one_call_in_a_process({OTEL_CONSOLE_ENV: "1"})
    assert report["active"] is True
    assert stdout == ""
    assert '"name": "BridgeService/ExecuteTool"' in stderr and "compilation_bridge.calls" in stderr


@needs_otel
def test_the_endpoint_names_the_collector_in_either_form() -> None:
    from compilation_bridge.observability.otel_exporters import signal_urls

    urls = ("http://c:4318/v1/traces", "http://c:4318/v1/metrics")
    assert signal_urls("http://c:4318") == urls
    assert signal_urls("http://c:4318/v1/traces") == urls  # Snakepit's form
    assert signal_urls(" c:4318/ ") == urls
    assert signal_urls("https://c/otlp")[1] == "https://c/otlp/v1/metrics"
