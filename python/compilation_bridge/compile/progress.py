"""Progress events of compile work, delivered to callbacks on the calling thread.

`with collect(callback): ...` makes every compile step inside the block call `callback(event)`, where
`event` is a plain JSON-able dict such as ``{"event": "compile_end", "range": [1, 8], "piece": 0,
"seconds": 1.2}``. The worker streams these; the CLI draws them. Callbacks nest: an outer collector
still sees the events of an inner block. The worker's observers (`observability.hub`) see every event.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from compilation_bridge.observability import hub

logger = logging.getLogger(__name__)

Event = dict[str, Any]
Callback = Callable[[Event], None]

_local = threading.local()


def _callbacks() -> list[Callback]:
    stack: list[Callback] | None = getattr(_local, "callbacks", None)
    if stack is None:
        stack = []
        _local.callbacks = stack
    return stack


@contextmanager
def collect(callback: Callback) -> Iterator[None]:
    """Deliver the progress events of compile work done inside the block (on this thread) to `callback`."""
    stack = _callbacks()
    stack.append(callback)
    try:
        yield
    finally:
        stack.remove(callback)


def emit(event: str, **fields: Any) -> None:
    """Send one event to every active callback and observer; a failing one is logged, never fatal."""
    payload: Event = {"event": event, "time": time.time(), **fields}
    if hub.active():
        hub.compile_event(payload)
    for callback in list(_callbacks()):
        try:
            callback(dict(payload))
        except Exception:
            logger.warning("progress callback failed", exc_info=True)


@contextmanager
def step(event: str, **fields: Any) -> Iterator[Event]:
    """Emit `<event>_start`, run the block, then `<event>_end` with `seconds` (and `ok`)."""
    emit(f"{event}_start", **fields)
    start = time.perf_counter()
    extra: Event = {}
    ok = False
    try:
        yield extra
        ok = True
    finally:
        emit(f"{event}_end", **fields, **extra, seconds=round(time.perf_counter() - start, 6), ok=ok)
