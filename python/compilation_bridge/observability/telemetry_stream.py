"""The events waiting for Snakepit's telemetry stream: emitted on any thread, sent by whichever stream
is open, kept while none is.

Snakepit 0.13 opens the stream with its open timeout as the call's deadline, so the stream ends about
five seconds after it opened and is not reopened. What is emitted after that waits here, bounded: past
`MAX_EVENTS` (the reference's buffer, 1024) new events are dropped and counted, and emitting one costs
a length check and that count. What a call queues is as little as it can be (`Pending`: the tool
observer queues its `hub.Call` and a time); the event's fields are filled in, and the protobuf message
built, on the stream's own thread, so a call that emits never pays for that.

Events go out in batches: an emit does not wake the stream (each wake-up of its thread, and each
message sent, takes the interpreter lock from the calls being answered), the stream collects what came
in the last `BATCH_S` and sends it in order. Only a queue a quarter full wakes it early, so that
a burst is not dropped. Telemetry then arrives up to `BATCH_S` later than it happened; its timestamps
say when.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import NamedTuple, Protocol

from compilation_bridge.observability.telemetry_controls import TelemetryControls

MAX_EVENTS = 1024
BATCH_S = 0.05  # how long a stream collects events before sending them

Measurement = int | float | str


class TelemetryEvent(NamedTuple):  # a tuple: the stream's thread builds one per event sent
    name: str  # dotted, e.g. "tool.execution.stop"; the wire splits it into event_parts
    measurements: Mapping[str, Measurement]
    metadata: Mapping[str, str]
    correlation_id: str
    timestamp_ns: int

    def resolved(self) -> TelemetryEvent:
        return self


class Pending(Protocol):
    """An event as queued: its name (the controls need it at once), the rest when it is sent."""

    @property
    def name(self) -> str: ...

    def resolved(self) -> TelemetryEvent:
        """The whole event; called on the stream's thread."""
        ...


class TelemetryStream:
    """A bounded queue of events with the controls that decide what enters it."""

    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        self.controls = TelemetryControls()
        self.max_events = max_events
        self.wake_at = max(max_events // 4, 1)  # queued events that wake a stream before its batch time
        self._events: deque[Pending] = deque()
        self._lock = threading.Lock()  # a plain lock: queueing takes it on every call
        self._changed = threading.Condition(self._lock)
        self._dropped = 0
        self.readers = 0  # streams open now

    @property
    def dropped(self) -> int:
        """Events refused because the queue was full, since the worker started."""
        return self._dropped

    def __len__(self) -> int:
        return len(self._events)

    def emit(
        self,
        name: str,
        measurements: Mapping[str, Measurement],
        metadata: Mapping[str, str],
        correlation_id: str = "",
    ) -> None:
        self.put(TelemetryEvent(name, measurements, metadata, correlation_id, time.time_ns()))

    def put(self, event: Pending) -> None:
        """Queues `event` if the controls admit it and there is room (else it is dropped and counted)."""
        if self.turns_away(1) or not self.controls.admits(event.name):
            return
        with self._lock:
            if len(self._events) >= self.max_events:
                self._dropped += 1
                return
            self._events.append(event)
            if len(self._events) == self.wake_at:
                self._changed.notify()

    def turns_away(self, events: int) -> bool:
        """Whether the next `events` events would all be refused: telemetry is off, or the queue is full
        (then they count as dropped). A caller told so builds nothing: this is all a call pays then."""
        if not self.controls.enabled:
            return True
        if len(self._events) < self.max_events:
            return False
        with self._lock:
            self._dropped += events
        return True

    def take_batch(self, wait_s: float) -> list[TelemetryEvent]:
        """Every queued event, oldest first, after waiting `wait_s` seconds for more to come (less when
        the queue reaches `wake_at` or `wake` is called)."""
        with self._changed:
            if len(self._events) < self.wake_at:
                self._changed.wait(wait_s)
            batch = list(self._events)
            self._events.clear()
        return [event.resolved() for event in batch]

    def put_back(self, events: list[TelemetryEvent]) -> None:
        """Returns events a stream took but could not send, first in line for the next stream; as
        everywhere, the newest are dropped and counted when there is no room for them all."""
        with self._changed:
            queued: list[Pending] = [*events, *self._events]
            self._dropped += max(len(queued) - self.max_events, 0)
            self._events = deque(queued[: self.max_events])
            self._changed.notify()

    @contextmanager
    def attached(self) -> Iterator[None]:
        """Counts one open stream for the block."""
        with self._changed:
            self.readers += 1
            self._changed.notify_all()
        try:
            yield
        finally:
            with self._changed:
                self.readers -= 1
                self._changed.notify_all()

    def await_readers(self, count: int, timeout: float) -> bool:
        """Whether `count` streams are open, waiting up to `timeout` seconds for that."""
        with self._changed:
            return self._changed.wait_for(lambda: self.readers == count, timeout)

    def wake(self) -> None:
        """Wakes every stream waiting in `take`, so that one whose call has ended can return."""
        with self._changed:
            self._changed.notify_all()
