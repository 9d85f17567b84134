"""The observers of the worker's calls and compile phases.

A transport asks `watchers()` who wants a tool call and, when anyone does, wraps the call in
`observed(call, watchers)`; compile work reports its phases through `compile_event(event)` (the events
of `compile.progress`). Each observer turns them into what it serves: Snakepit's telemetry events,
OpenTelemetry spans and metrics. An observer that fails is logged and never fails the call it watches.
A call no observer wants (none registered, or the telemetry stream off or full) builds nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

log = logging.getLogger(__name__)

MAX_NAME_CHARS = 256  # names travel in every event; a caller chooses them
MAX_MESSAGE_CHARS = 1024  # an error's message travels in an event too; the full one is in the reply


@dataclass(slots=True)
class Call:
    """One tool call as observers see it. The transport sets `error_type` and `error_message` before the
    call ends."""

    tool: str  # the RPC's tool, e.g. "snakebridge.call"
    operation: str  # what it does, e.g. "method:CompilationConfig.compute_hash" (`operation_of`)
    session_id: str
    correlation_id: str
    streaming: bool = False
    error_type: str | None = None  # the error's Python type when the call failed, in band or not
    error_message: str | None = None  # its message, cut at MAX_MESSAGE_CHARS
    started_ns: int = field(default_factory=time.time_ns)


class Observer(Protocol):
    def watching(self) -> bool:
        """Whether it wants the next call; asked before anything is built for the call."""
        ...

    def call(self, call: Call) -> AbstractContextManager[Any]:
        """Entered when the call starts, left when it ends (`call.error_type` then says how)."""
        ...

    def compile_event(self, event: Mapping[str, Any]) -> None:
        """One progress event of compile work (`compile.progress`), on the thread doing it."""
        ...


_observers: tuple[Observer, ...] = ()


def add(observer: Observer) -> None:
    global _observers
    _observers = (*_observers, observer)


def remove(observer: Observer) -> None:
    global _observers
    _observers = tuple(o for o in _observers if o is not observer)


def active() -> bool:
    return bool(_observers)


def watchers() -> tuple[Observer, ...]:
    """The observers that want the next call, each asked once; none: the call is not observed."""
    return tuple(observer for observer in _observers if _watching(observer)) if _observers else ()


def _watching(observer: Observer) -> bool:
    try:
        return observer.watching()
    except Exception:
        log.warning("observer %s failed to say whether it watches", type(observer).__name__, exc_info=True)
        return False


def observed(call: Call, watchers: tuple[Observer, ...]) -> Observed:
    """The `call` context of each of `watchers` around a block: `with hub.observed(call, watchers): ...`."""
    return Observed(call, watchers)


class Observed:
    """Enters each observer's context for a call so that neither its start nor its end can fail the
    call, and sets `error_type` when an exception escapes the block. A class, not a generator around an
    ExitStack: it runs on every call, and that was a third of the work."""

    __slots__ = ("_call", "_entered", "_watchers")

    def __init__(self, call: Call, watchers: tuple[Observer, ...]) -> None:
        self._call = call
        self._watchers = watchers
        self._entered: list[tuple[Observer, AbstractContextManager[Any]]] = []

    def __enter__(self) -> Call:
        for observer in self._watchers:
            try:
                manager = observer.call(self._call)
                manager.__enter__()
            except Exception:
                log.warning("observer %s failed to start a call", type(observer).__name__, exc_info=True)
                continue
            self._entered.append((observer, manager))
        return self._call

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        call = self._call
        if exc is not None and call.error_type is None:
            call.error_type = type(exc).__name__
            call.error_message = str(exc)[:MAX_MESSAGE_CHARS]
        for observer, manager in reversed(self._entered):
            try:
                manager.__exit__(kind, exc, trace)
            except Exception:
                log.warning("observer %s failed to end a call", type(observer).__name__, exc_info=True)
        # returns None: the call's own exception, if any, goes on


def compile_event(event: Mapping[str, Any]) -> None:
    for observer in _observers:
        try:
            observer.compile_event(event)
        except Exception:
            log.warning("observer %s failed on a compile event", type(observer).__name__, exc_info=True)


def operation_of(payload: Mapping[str, Any]) -> str:
    """A short name for what a SnakeBridge payload asks: `<call_type>:<class or module>.<name>`, e.g.
    `class:CompilationConfig.__init__` or `method:vllm.config.compute_hash` (a wire ref has no type)."""
    call_type = payload.get("call_type") or "function"
    owner = payload.get("class") or payload.get("python_module") or payload.get("module_path") or ""
    name = payload.get("function") or payload.get("attr") or ""
    # a payload that names nothing (release_ref, release_session) has no operation beyond its tool
    text = f"{call_type}:{owner}.{name}" if owner or name else str(payload.get("call_type") or "-")
    return text[:MAX_NAME_CHARS]
