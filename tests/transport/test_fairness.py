"""Fair shares and back-pressure: calls in flight are capped per worker and per session; a full share is
refused at once, in-band, with the limit, its current value and its maximum; a greedy session leaves
the control path and the other sessions answered."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest

from compilation_bridge.protocol.admission import SESSION_SETTING, WORKER_SETTING, Admission
from compilation_bridge.protocol.errors import WorkerBusyError, error_payload
from compilation_bridge.testing.session import CallError, SnakeBridgeSession
from compilation_bridge.testing.worker_process import WorkerProcess
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb

# Liveness deadlines, not performance figures: a starved worker never answers at all.
DEADLINE_S = 30.0
SLEEP_S = 20.0  # how long the greedy session's calls hold their shares (they return on their own)


def test_a_full_session_share_is_refused_with_its_numbers_and_other_sessions_enter() -> None:
    admission = Admission(max_calls=8, max_session_calls=2)
    admission.enter_worker()
    admission.enter_session("greedy")
    admission.enter_session("greedy")
    with pytest.raises(WorkerBusyError) as busy:
        admission.enter_session("greedy")
    assert busy.value.context_fields == {
        "limit": "calls in flight for this session",
        "current": "2",
        "max": "2",
    }
    assert SESSION_SETTING in str(busy.value)
    admission.enter_session("other")  # another session still has its share
    admission.leave_session("greedy")
    admission.enter_session("greedy")  # a share given back is taken again


def test_a_full_worker_is_refused_with_its_numbers_and_left_shares_come_back() -> None:
    admission = Admission(max_calls=2, max_session_calls=4)
    assert admission.max_session_calls == 2  # a session's share never exceeds the worker's
    admission.enter_worker()
    admission.enter_worker()
    with pytest.raises(WorkerBusyError, match=WORKER_SETTING) as busy:
        admission.enter_worker()
    assert busy.value.context_fields["current"] == "2"
    admission.leave_worker()
    admission.enter_worker()


def test_the_busy_error_payload_carries_the_limit_in_its_context() -> None:
    busy = WorkerBusyError("worker busy", limit="calls in flight for this session", current=4, maximum=4)
    payload = error_payload(busy, {"tool_name": "snakebridge.call", "session_id": "s"})
    assert payload["type"] == "WorkerBusyError"
    assert payload["context"] == {
        "tool_name": "snakebridge.call",
        "session_id": "s",
        "limit": "calls in flight for this session",
        "current": "4",
        "max": "4",
    }


@pytest.fixture(scope="module")
def worker() -> Iterator[WorkerProcess]:
    process = WorkerProcess.spawn(
        extra_env={
            "COMPILATION_BRIDGE_TEST_HOOKS": "1",
            "COMPILATION_BRIDGE_MAX_CONCURRENT_CALLS": "8",
            "COMPILATION_BRIDGE_MAX_SESSION_CALLS": "3",
        }
    )
    yield process
    code, _seconds = process.terminate()
    assert code == 0


def _session(worker: WorkerProcess, name: str) -> SnakeBridgeSession:
    # SnakeBridge's session (the payload's), which is what a share is counted by
    return SnakeBridgeSession(worker.stub, worker.session_id, f"{name}-{time.monotonic_ns()}")


def _greedy_call(session: SnakeBridgeSession) -> None:
    with contextlib.suppress(CallError):  # a greedy call beyond its share: refused, as expected
        session.call("compilation_bridge.testing", "sleep", [SLEEP_S])


def _refusal(session: SnakeBridgeSession) -> dict[str, str]:
    """Call as the greedy session until its share is full (its sleepers have started); the refusal."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            session.call_class("vllm.config", "CompilationConfig", [None, 3, None])
        except CallError as refused:
            assert refused.error["type"] == "WorkerBusyError", refused.error
            return dict(refused.error["context"])
        time.sleep(0.05)
    raise AssertionError(f"the greedy session's share never filled within {DEADLINE_S} s")


def test_a_greedy_session_is_refused_at_once_while_others_and_the_control_path_answer(
    worker: WorkerProcess,
) -> None:
    greedy = _session(worker, "greedy")
    sleepers = [threading.Thread(target=_greedy_call, args=(greedy,), daemon=True) for _ in range(6)]
    for thread in sleepers:
        thread.start()
    try:
        context = _refusal(greedy)
        assert context["limit"] == "calls in flight for this session"
        assert context["current"] == context["max"] == "3"
        ping = worker.stub.Ping(pb.PingRequest(message="x"), timeout=DEADLINE_S)
        assert ping.message == "Pong from Python: x"
        for n in range(4):  # other sessions: answered, while the greedy one holds its whole share
            other = _session(worker, f"other-{n}")
            ref = other.call_class("vllm.config", "CompilationConfig", [None, 3, None])
            assert other.get_attr(ref, "mode") == 3
    finally:
        for thread in sleepers:
            thread.join(SLEEP_S + DEADLINE_S)
