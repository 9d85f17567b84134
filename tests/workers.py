"""Fixtures for the worker tests: a dispatcher in-process, and real workers spawned as Snakepit does."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.testing.session import SnakeBridgeSession, snakebridge_payload
from compilation_bridge.testing.worker_process import WorkerProcess

_sessions = itertools.count(1)


def payload(session: str = "S", **fields: Any) -> dict[str, Any]:
    """A SnakeBridge `snakebridge.call` payload for vllm.config (SB runtime/payload.ex)."""
    return {**snakebridge_payload(session), **fields}


def construct(dispatcher: Dispatcher, session: str = "S", *args: Any, **kwargs: Any) -> dict[str, Any]:
    reply = dispatcher.execute(
        "snakebridge.call",
        payload(
            session,
            call_type="class",
            function="__init__",
            args=list(args),
            kwargs=kwargs,
            **{"class": "CompilationConfig"},
        ),
        "worker-session",
    )
    assert reply.success, reply.error
    return reply.result


@pytest.fixture
def dispatcher() -> Dispatcher:
    return Dispatcher()


@pytest.fixture(scope="module")
def worker() -> Iterator[WorkerProcess]:
    process = WorkerProcess.spawn()
    yield process
    code, _seconds = process.terminate()
    assert code == 0
    assert not process.heartbeats.failures, process.heartbeats.failures


@pytest.fixture
def session(worker: WorkerProcess) -> SnakeBridgeSession:
    return SnakeBridgeSession(worker.stub, worker.session_id, session_id=f"auto_<0.{next(_sessions)}.0>_1")
