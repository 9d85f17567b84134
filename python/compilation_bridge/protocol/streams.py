"""Streaming results for `snakebridge.stream` (ExecuteStreamingTool).

A function with a progress hook (compile_model) runs on a helper thread inside the hook, so that its
progress events reach the caller while it works; anything else is called, then its result iterated.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

ProgressHook = Callable[[Callable[[dict[str, Any]], None]], AbstractContextManager[Any]]
# Bounded so a caller that reads slowly slows the producer down instead of growing memory.
MAX_PENDING_EVENTS = 1024


def iterate_result(result: Any) -> Iterator[Any]:
    """Items of an iterable result (not str/bytes/dict, which are one item), or the result itself."""
    if isinstance(result, str | bytes | bytearray | dict) or not hasattr(result, "__iter__"):
        yield result
        return
    yield from result


def with_progress(work: Callable[[], Any], hook: ProgressHook) -> Iterator[tuple[str, Any]]:
    """Yields ("event", event) while `work` runs under `hook`, then ("result", value); re-raises errors."""
    events: queue.Queue[tuple[str, Any]] = queue.Queue(MAX_PENDING_EVENTS)
    cancelled = threading.Event()

    def publish(kind: str, value: Any) -> None:
        while not cancelled.is_set():
            try:
                events.put((kind, value), timeout=0.1)
                return
            except queue.Full:
                continue

    def run() -> None:
        try:
            with hook(lambda event: publish("event", event)):
                value = work()
        except BaseException as exc:  # handed to the consumer, which re-raises it in its own thread
            publish("error", exc)
        else:
            publish("result", value)

    # The call's context (its correlation id, an observer's current span) goes with the work.
    context = contextvars.copy_context()
    worker = threading.Thread(target=context.run, args=(run,), name="snakebridge-stream", daemon=True)
    worker.start()
    try:
        while True:
            kind, value = events.get()
            if kind == "error":
                raise value
            yield kind, value
            if kind == "result":
                return
    finally:
        # If the caller went away, stop queueing events. The work itself cannot be interrupted: wait for
        # it, so that the call keeps its slot (the worker's bound on concurrent calls) until it is over.
        cancelled.set()
        worker.join()
