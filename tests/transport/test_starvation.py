"""Nothing starves the control path: whatever long-lived streams and calls the caps admit are open,
Ping, Heartbeat and ExecuteTool still get a thread and an answer."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from compilation_bridge.testing.session import CallError, SnakeBridgeSession
from compilation_bridge.testing.worker_process import WorkerProcess
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb

# A liveness deadline, not a performance figure: a starved server never answers at all.
ANSWERED_WITHIN_S = 5


@pytest.fixture(scope="module")
def worker() -> Iterator[WorkerProcess]:
    process = WorkerProcess.spawn(
        extra_env={
            "COMPILATION_BRIDGE_REFLECTION": "1",
            "COMPILATION_BRIDGE_STREAM_IDLE_SECONDS": "2",
            "COMPILATION_BRIDGE_TEST_HOOKS": "1",
        }
    )
    yield process
    code, _seconds = process.terminate()
    assert code == 0


def _idle_reflection_stream(worker: WorkerProcess, release: threading.Event) -> Any:
    """A reflection stream that asks one question and then stays open, sending nothing."""

    def requests() -> Iterator[reflection_pb2.ServerReflectionRequest]:
        yield reflection_pb2.ServerReflectionRequest(list_services="")
        release.wait(30)

    stub = reflection_pb2_grpc.ServerReflectionStub(worker.channel)
    return stub.ServerReflectionInfo(requests())


def _idle_telemetry_stream(worker: WorkerProcess, release: threading.Event) -> Any:
    def controls() -> Iterator[pb.TelemetryControl]:
        release.wait(30)
        yield from ()

    return worker.stub.StreamTelemetry(controls())


def _control_path_answers(worker: WorkerProcess, tools_at_cap: bool = False) -> None:
    reply = worker.stub.Ping(pb.PingRequest(message="still there"), timeout=ANSWERED_WITHIN_S)
    assert reply.message == "Pong from Python: still there"
    beat = worker.stub.Heartbeat(pb.HeartbeatRequest(session_id="x"), timeout=ANSWERED_WITHIN_S)
    assert beat.session_valid
    session = SnakeBridgeSession(worker.stub, worker.session_id)
    if tools_at_cap:  # an answer all the same: refused at once, in-band
        with pytest.raises(CallError, match="worker busy"):
            session.call_class("vllm.config", "CompilationConfig", [None, 3, None])
        return
    ref = session.call_class("vllm.config", "CompilationConfig", [None, 3, None])
    assert session.get_attr(ref, "mode") == 3


def test_idle_reflection_streams_are_capped_and_leave_the_control_path_free(worker: WorkerProcess) -> None:
    release = threading.Event()
    streams = [_idle_reflection_stream(worker, release) for _ in range(24)]
    try:
        first = next(streams[0])
        assert "snakepit.bridge.BridgeService" in {s.name for s in first.list_services_response.service}
        refused = 0
        for stream in streams[1:]:
            try:
                next(stream)
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                refused += 1
        assert refused >= 24 - 2  # two may be open at once by default
        _control_path_answers(worker)
    finally:
        release.set()
        for stream in streams:
            stream.cancel()


def test_an_idle_reflection_stream_is_cancelled(worker: WorkerProcess) -> None:
    release = threading.Event()
    stream = _open_reflection_stream(worker, release)
    try:
        with pytest.raises(grpc.RpcError) as ended:
            next(stream)  # nothing more is sent: the server ends it after its idle timeout (2 s here)
        assert ended.value.code() == grpc.StatusCode.CANCELLED
    finally:
        release.set()
        stream.cancel()


def _open_reflection_stream(worker: WorkerProcess, release: threading.Event) -> Any:
    """An idle stream past its first answer, once a slot is free (streams of an earlier test may still be
    closing on the server's side)."""
    deadline = time.monotonic() + 10
    while True:
        stream = _idle_reflection_stream(worker, release)
        try:
            next(stream)
            return stream
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_streams_and_calls_at_their_caps_leave_the_control_path_free(worker: WorkerProcess) -> None:
    release = threading.Event()
    telemetry = [_idle_telemetry_stream(worker, release) for _ in range(12)]
    reflection = [_idle_reflection_stream(worker, release) for _ in range(12)]
    sleepers = [
        threading.Thread(target=_sleep_call, args=(worker, 3.0), daemon=True) for _ in range(12)
    ]  # more than the 8 calls the worker admits at once: the rest are refused, not queued
    for thread in sleepers:
        thread.start()
    time.sleep(0.5)  # let the sleepers take every tool slot
    try:
        _control_path_answers(worker, tools_at_cap=True)
    finally:
        release.set()
        for stream in telemetry + reflection:
            stream.cancel()
        for thread in sleepers:
            thread.join(10)


def _sleep_call(worker: WorkerProcess, seconds: float) -> None:
    # one session per sleeper: the worker's cap is what this test fills, not one session's share
    session = SnakeBridgeSession(worker.stub, worker.session_id, f"sleeper-{time.monotonic_ns()}")
    with contextlib.suppress(CallError):  # "worker busy" for the calls beyond the cap: expected
        session.call("compilation_bridge.testing", "sleep", [seconds])
