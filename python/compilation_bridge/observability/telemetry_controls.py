"""The controls Elixir sends on Snakepit's telemetry stream, and which events they let through.

As Snakepit's own Python side (`snakepit_bridge.telemetry.stream`) applies them: a toggle, a sampling rate
clamped to [0, 1] and drawn per event (the update's event patterns are not used), and allow/deny lists of
fnmatch patterns over the dotted event name, deny first, an empty allow list allowing every name. The
controls belong to the worker, not to one stream: they stay in force when a stream ends and another opens.
"""

from __future__ import annotations

import fnmatch
import random
import threading
from collections.abc import Iterable

MAX_PATTERNS = 256  # a filter is matched against every event: keep what one control may ask bounded


class TelemetryControls:
    """Written by the stream that reads the controls, read by every thread that emits. Each control
    replaces whole values, so a reader sees either the old setting or the new one, never a mixture."""

    def __init__(self) -> None:
        self.enabled = True
        self.sampling_rate = 1.0
        self._filter: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # (allow, deny)
        self._everything = True  # no sampling, no filter: what every event asks first, and at once
        self.applied = 0  # controls applied so far: nothing answers a control, so this tells
        self._applied = threading.Condition()

    def toggle(self, enabled: bool) -> None:
        self.enabled = enabled
        self._count()

    def sample(self, rate: float) -> None:
        self.sampling_rate = max(0.0, min(rate, 1.0))  # NaN comes out 0.0, as in the reference
        self._settled()

    def filter(self, allow: Iterable[str], deny: Iterable[str]) -> None:
        self._filter = (tuple(allow)[:MAX_PATTERNS], tuple(deny)[:MAX_PATTERNS])
        self._settled()

    def _settled(self) -> None:
        self._everything = self.sampling_rate >= 1.0 and self._filter == ((), ())
        self._count()

    def await_applied(self, count: int, timeout: float) -> bool:
        """Whether `count` controls have been applied, waiting up to `timeout` seconds for them."""
        with self._applied:
            return self._applied.wait_for(lambda: self.applied >= count, timeout)

    def _count(self) -> None:
        with self._applied:
            self.applied += 1
            self._applied.notify_all()

    def admits(self, name: str) -> bool:
        """Whether an event of this name is sent: the sampling draw, then the filters."""
        if self._everything:
            return True
        if self.sampling_rate < 1.0 and random.random() > self.sampling_rate:
            return False
        allow, deny = self._filter
        if any(fnmatch.fnmatch(name, pattern) for pattern in deny):
            return False
        return not allow or any(fnmatch.fnmatch(name, pattern) for pattern in allow)
