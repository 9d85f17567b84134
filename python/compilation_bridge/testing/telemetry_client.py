"""Snakepit's side of `StreamTelemetry`, as its `Snakepit.Telemetry.GrpcStream` drives it.

The stream opens with a deadline when one is given (Snakepit 0.13 passes its 5 s open timeout), the first
control is `toggle(true)` as Snakepit sends it, and events are collected on a thread of their own so a
test or the recording script can wait for them with a deadline. Controls are sent in order on the one
request stream, as Snakepit sends them.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator

import grpc

from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc

Events = list[pb.TelemetryEvent]


def toggle(enabled: bool) -> pb.TelemetryControl:
    return pb.TelemetryControl(toggle=pb.TelemetryToggle(enabled=enabled))


def sampling(rate: float, patterns: Iterable[str] = ()) -> pb.TelemetryControl:
    update = pb.TelemetrySamplingUpdate(sampling_rate=rate, event_patterns=list(patterns))
    return pb.TelemetryControl(sampling=update)


def event_filter(allow: Iterable[str] = (), deny: Iterable[str] = ()) -> pb.TelemetryControl:
    return pb.TelemetryControl(filter=pb.TelemetryEventFilter(allow=list(allow), deny=list(deny)))


def event_name(event: pb.TelemetryEvent) -> str:
    return ".".join(event.event_parts)


class TelemetryClient:
    """One open `StreamTelemetry` call: `send` controls, read `events`, `close` when done."""

    def __init__(self, stub: pb_grpc.BridgeServiceStub, timeout: float | None = None) -> None:
        self._controls: queue.Queue[pb.TelemetryControl | None] = queue.Queue()
        self._changed = threading.Condition()
        self._events: Events = []
        self.code: grpc.StatusCode | None = None  # how the stream ended, once it has
        self._controls.put(toggle(True))
        self._call = stub.StreamTelemetry(self._requests(), timeout=timeout)
        self._reader = threading.Thread(target=self._read, name="telemetry-client", daemon=True)
        self._reader.start()

    def send(self, control: pb.TelemetryControl) -> None:
        self._controls.put(control)

    @property
    def events(self) -> Events:
        with self._changed:
            return list(self._events)

    def wait_for(self, done: Callable[[Events], bool], timeout: float = 10.0) -> Events:
        """The events so far, once `done(events)` holds; AssertionError after `timeout` seconds."""
        with self._changed:
            if not self._changed.wait_for(lambda: done(self._events) or self.code is not None, timeout):
                raise AssertionError(f"telemetry: still waiting after {timeout} s; got {self._names()}")
            if not done(self._events):
                raise AssertionError(f"telemetry stream ended ({self.code}); got {self._names()}")
            return list(self._events)

    def wait_ended(self, timeout: float = 10.0) -> grpc.StatusCode:
        with self._changed:
            if not self._changed.wait_for(lambda: self.code is not None, timeout):
                raise AssertionError(f"telemetry stream still open after {timeout} s")
            assert self.code is not None
            return self.code

    def close(self) -> None:
        self._call.cancel()
        self._controls.put(None)
        self._reader.join(10)

    def _names(self) -> list[str]:
        return [event_name(event) for event in self._events]

    def _requests(self) -> Iterator[pb.TelemetryControl]:
        while (control := self._controls.get()) is not None:
            yield control

    def _read(self) -> None:
        code = grpc.StatusCode.OK
        try:
            for event in self._call:
                with self._changed:
                    self._events.append(event)
                    self._changed.notify_all()
        except grpc.RpcError as error:
            code = error.code()
        self._controls.put(None)  # the request thread of the channel ends with the call
        with self._changed:
            self.code = code
            self._changed.notify_all()
