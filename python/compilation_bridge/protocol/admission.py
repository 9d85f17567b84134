"""Admission of tool calls: at most so many in flight per worker, and per session within that.

A call that finds its worker's or its session's share full is refused at once with a `WorkerBusyError`
that names the limit, its current value and its maximum (erlang_python's `{overloaded, Current, Max}`):
never queued, never a timeout, so that one greedy session cannot take every slot from the others, and
Ping, Heartbeat and the session RPCs (which do not pass through here) always find a thread.
"""

from __future__ import annotations

import threading
from collections import Counter

from compilation_bridge.protocol.errors import WorkerBusyError
from compilation_bridge.settings import MAX_CONCURRENT_CALLS_ENV, MAX_SESSION_CALLS_ENV

WORKER_SETTING = MAX_CONCURRENT_CALLS_ENV
SESSION_SETTING = MAX_SESSION_CALLS_ENV


class Admission:
    """Counts calls in flight; `enter_*` either takes a share or raises at once, `leave_*` gives it back."""

    def __init__(self, max_calls: int, max_session_calls: int) -> None:
        self.max_calls = max_calls
        self.max_session_calls = min(max_session_calls, max_calls)
        self._calls = 0
        self._by_session: Counter[str] = Counter()
        self._lock = threading.Lock()

    def enter_worker(self) -> None:
        with self._lock:
            if self._calls >= self.max_calls:
                raise _busy("calls in flight on this worker", self._calls, self.max_calls, WORKER_SETTING)
            self._calls += 1

    def leave_worker(self) -> None:
        with self._lock:
            self._calls -= 1

    def enter_session(self, session: str) -> None:
        with self._lock:
            current = self._by_session[session]
            if current >= self.max_session_calls:
                what = "calls in flight for this session"
                raise _busy(what, current, self.max_session_calls, SESSION_SETTING)
            self._by_session[session] = current + 1

    def leave_session(self, session: str) -> None:
        with self._lock:
            left = self._by_session[session] - 1
            if left > 0:
                self._by_session[session] = left
            else:
                del self._by_session[session]  # the table holds only sessions with calls in flight


def _busy(limit: str, current: int, maximum: int, setting: str) -> WorkerBusyError:
    return WorkerBusyError(
        f"worker busy: {current} of {maximum} {limit} ({setting}); retry later",
        limit=limit,
        current=current,
        maximum=maximum,
    )
