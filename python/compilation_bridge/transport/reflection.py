"""gRPC server reflection, off unless the operator enables it, and bounded when on.

Each reflection call is a bidirectional stream that holds one server thread for as long as the client keeps
it open, so a few dozen idle ones would leave no thread for Ping, Heartbeat or ExecuteTool. When enabled,
at most `max_streams` are open at once (more are refused with RESOURCE_EXHAUSTED) and a stream that sends
nothing for `idle_s` seconds is cancelled.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

import grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc


class IdleTimer:
    """Calls `on_idle` once `idle_s` seconds pass without a `touch()`."""

    def __init__(self, idle_s: float, on_idle: Any) -> None:
        self._idle_s = idle_s
        self._on_idle = on_idle
        self._timer: threading.Timer | None = None
        self.touch()

    def touch(self) -> None:
        self.stop()
        self._timer = threading.Timer(self._idle_s, self._on_idle)
        self._timer.daemon = True
        self._timer.start()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class BoundedReflectionServicer(reflection.ReflectionServicer):
    def __init__(self, service_names: Iterable[str], max_streams: int, idle_s: float) -> None:
        super().__init__(tuple(service_names))
        self._slots = threading.BoundedSemaphore(max_streams)
        self._idle_s = idle_s

    def ServerReflectionInfo(self, request_iterator: Iterator[Any], context: grpc.ServicerContext) -> Any:
        if not self._slots.acquire(blocking=False):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many open reflection streams")
        timer = IdleTimer(self._idle_s, context.cancel)
        try:
            yield from super().ServerReflectionInfo(_touching(request_iterator, timer), context)
        finally:
            timer.stop()
            self._slots.release()


def _touching(requests: Iterator[Any], timer: IdleTimer) -> Iterator[Any]:
    for request in requests:
        timer.touch()
        yield request


def add_reflection(
    server: grpc.Server, service_names: Iterable[str], max_streams: int, idle_s: float
) -> None:
    names = (*service_names, reflection.SERVICE_NAME)
    servicer = BoundedReflectionServicer(names, max_streams, idle_s)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
