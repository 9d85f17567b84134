"""Observers see every tool call (its tool, operation, session, correlation id and outcome) and every
compile progress event; a failing observer never fails the call; with none, nothing is observed."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from compilation_bridge.compile import progress
from compilation_bridge.observability import hub
from compilation_bridge.testing.session import CallError, SnakeBridgeSession
from compilation_bridge.transport import servicer
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.options import ServeOptions
from compilation_bridge.transport.server import build_server


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, hub.Call]] = []
        self.events: list[Mapping[str, Any]] = []

    def watching(self) -> bool:
        return True

    def started(self, call: hub.Call) -> object:
        self.calls.append(("start", call))
        return ("started", call)

    def ended(self, call: hub.Call, started: object) -> None:
        assert started == ("started", call)  # what `started` returned comes back
        self.calls.append(("end", call))

    def compile_event(self, event: Mapping[str, Any]) -> None:
        self.events.append(event)


class Broken:
    def watching(self) -> bool:
        return True

    def started(self, call: hub.Call) -> object:
        raise RuntimeError("observer down")

    def ended(self, call: hub.Call, started: object) -> None:
        raise RuntimeError("observer down")

    def compile_event(self, event: Mapping[str, Any]) -> None:
        raise RuntimeError("observer down")


@pytest.fixture
def session() -> Iterator[SnakeBridgeSession]:
    server = build_server(ServeOptions())
    channel = grpc.insecure_channel(f"localhost:{server.port}")
    yield SnakeBridgeSession(pb_grpc.BridgeServiceStub(channel), "worker-session", "S1")
    channel.close()
    server.stop(0)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    observer = Recorder()
    hub.add(observer)
    yield observer
    hub.remove(observer)


def test_a_call_is_seen_with_its_operation_session_correlation_and_success(
    session: SnakeBridgeSession, recorder: Recorder
) -> None:
    ref = session.call_class("vllm.config", "CompilationConfig", mode=3)
    assert [kind for kind, _ in recorder.calls] == ["start", "end"]
    call = recorder.calls[0][1]
    assert call.tool == "snakebridge.call"
    assert call.operation == "class:CompilationConfig.__init__"
    assert call.session_id == "worker-session"
    assert len(call.correlation_id) == 32  # the request's metadata (SnakeBridgeSession sets a uuid)
    assert call.error_type is None and not call.streaming
    session.call_method(ref, "compute_hash")
    assert recorder.calls[-1][1].operation == "method:vllm.config.compute_hash"


def test_an_in_band_error_is_seen_with_its_python_type(
    session: SnakeBridgeSession, recorder: Recorder
) -> None:
    with pytest.raises(CallError):
        session.call_class("vllm.config", "CompilationConfig", [None, None, None], mode=3)
    assert recorder.calls[-1][1].error_type == "ValidationError"


def test_a_failed_stream_is_seen_with_its_python_type(
    session: SnakeBridgeSession, recorder: Recorder
) -> None:
    payload = session.base("os", "getcwd", [], {})
    with pytest.raises(grpc.RpcError):
        session.stream(payload)
    call = recorder.calls[-1][1]
    assert call.streaming and call.tool == "snakebridge.stream" and call.error_type == "ImportError"


def test_a_call_refused_before_its_request_is_decoded_is_still_named_and_holds_no_request(
    session: SnakeBridgeSession, recorder: Recorder
) -> None:
    payload = {**session.base("vllm.config", "compute_hash", [], {}), "call_type": "class"}
    payload.update({"class": "CompilationConfig", "function": "__init__"})
    request = session.request("snakebridge.call", payload)
    request.parameters["kwargs"].value = b"{not json"  # the request as a whole cannot be decoded
    response = session.stub.ExecuteTool(request, timeout=30)
    assert not response.success and "'kwargs' is not valid JSON" in response.error_message
    call = recorder.calls[-1][1]
    assert call.operation == "class:CompilationConfig.__init__" and call.error_type == "ValueError"
    # An observer may queue the call for a while: once it ended, what described it is let go.
    assert call._describe is None


def test_a_call_is_named_from_its_decoded_request_not_decoded_again(
    session: SnakeBridgeSession, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded_again: list[Any] = []
    monkeypatch.setattr(servicer, "_operation_in", lambda parameters: decoded_again.append(parameters))
    session.call_class("vllm.config", "CompilationConfig", mode=3)
    start, end = recorder.calls[-2][1], recorder.calls[-1][1]
    assert start is end and end.operation == "class:CompilationConfig.__init__"
    assert decoded_again == [] and end._describe is None
    assert end.started_ns <= end.ended_ns


def test_concurrent_calls_are_each_named_by_their_own_request(
    session: SnakeBridgeSession, recorder: Recorder
) -> None:
    # The transport names a call through the hub's current call: each call's context must hold its own.
    def own_session(worker_session: str) -> SnakeBridgeSession:
        return SnakeBridgeSession(session.stub, worker_session, f"S-{worker_session}")  # a share each

    def construct(worker_session: str) -> None:
        own = own_session(worker_session)
        for _ in range(10):
            own.call_class("vllm.config", "CompilationConfig", mode=2)

    def hash_(worker_session: str) -> None:
        own = own_session(worker_session)
        ref = own.call_class("vllm.config", "CompilationConfig", mode=2)
        for _ in range(10):
            own.call_method(ref, "compute_hash")

    with ThreadPoolExecutor(6) as pool:
        runs = [pool.submit(construct, f"construct-{n}") for n in range(3)]
        runs += [pool.submit(hash_, f"hash-{n}") for n in range(3)]
        for run in runs:
            run.result(timeout=60)
    seen = Counter((call.session_id, call.operation) for kind, call in recorder.calls if kind == "end")
    construct_op, hash_op = "class:CompilationConfig.__init__", "method:vllm.config.compute_hash"
    expected = {(f"construct-{n}", construct_op): 10 for n in range(3)}
    expected |= {(f"hash-{n}", construct_op): 1 for n in range(3)}
    expected |= {(f"hash-{n}", hash_op): 10 for n in range(3)}
    assert seen == expected


def test_a_broken_observer_is_logged_and_the_call_still_answers(
    session: SnakeBridgeSession, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    broken = Broken()
    hub.add(broken)
    try:
        with caplog.at_level(logging.WARNING, "compilation_bridge.observability"):
            ref = session.call_class("vllm.config", "CompilationConfig", mode=2)
            assert session.call_method(ref, "compute_hash")
            progress.emit("trace_start", num_tokens=8)
    finally:
        hub.remove(broken)
    assert "observer Broken failed to start a call" in caplog.text
    assert "observer Broken failed on a compile event" in caplog.text
    assert len(recorder.calls) == 4 and recorder.events[-1]["event"] == "trace_start"


def test_compile_progress_reaches_observers_without_a_collector(recorder: Recorder) -> None:
    with progress.step("trace", num_tokens=8):
        pass
    assert [e["event"] for e in recorder.events] == ["trace_start", "trace_end"]
    assert recorder.events[-1]["ok"] is True and "seconds" in recorder.events[-1]


def test_without_observers_nothing_is_observed(session: SnakeBridgeSession) -> None:
    assert not hub.active()
    seen = Recorder()
    session.call_class("vllm.config", "CompilationConfig")
    hub.add(seen)
    hub.remove(seen)
    session.call_class("vllm.config", "CompilationConfig")
    assert seen.calls == [] and not hub.active()


class Unwatching(Recorder):
    def watching(self) -> bool:
        return False  # as the telemetry stream's observer says while telemetry is off or its queue full


def test_a_call_no_observer_wants_builds_nothing(
    session: SnakeBridgeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[Any] = []
    monkeypatch.setattr(hub, "Call", lambda *args, **kwargs: built.append(args))
    unwatching = Unwatching()
    hub.add(unwatching)
    try:
        ref = session.call_class("vllm.config", "CompilationConfig", mode=2)
        assert session.call_method(ref, "compute_hash")
    finally:
        hub.remove(unwatching)
    assert built == [] and unwatching.calls == []


def test_operation_names_are_short_and_never_fail() -> None:
    assert hub.operation_of({}) == "-"
    assert hub.operation_of({"call_type": "stream_next"}) == "stream_next"
    attribute = {"call_type": "get_attr", "python_module": "m", "attr": "mode"}
    assert hub.operation_of(attribute) == "get_attr:m.mode"
    assert len(hub.operation_of({"function": "x" * 10_000})) == hub.MAX_NAME_CHARS


def test_a_call_is_described_once_and_lets_what_described_it_go() -> None:
    asked: list[str] = []

    def describe() -> str:
        asked.append("asked")
        return "class:FromRequest.__init__"

    told = hub.Call("snakebridge.call", describe=describe)
    told.described("method:FromPayload.compute_hash")
    told.described("method:Later.ignored")  # what a call was told first stands
    told.settle()
    assert told.operation == "method:FromPayload.compute_hash" and asked == []

    refused = hub.Call("snakebridge.call", describe=describe)
    refused.settle()  # never described: its request is read now, once
    assert refused.operation == "class:FromRequest.__init__" and asked == ["asked"]
    assert refused._describe is None
    assert hub.Call("snakebridge.call").operation == "-"  # nothing to describe it with
