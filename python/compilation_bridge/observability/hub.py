"""The observers of the worker's calls and compile phases.

A transport asks `watchers()` who wants a tool call and, when anyone does, wraps the call in
`observed(call, watchers)`, which tells each of them of its start and end and makes it the `current()`
call of the context serving it (where the transport names its operation, once the request is decoded,
and OpenTelemetry finds the parent of a compile phase); compile work reports its phases through
`compile_event(event)` (the events of `compile.progress`). Each observer turns them into what it
serves: Snakepit's telemetry events, OpenTelemetry spans and metrics. An observer that fails is logged
and never fails the call it watches. A call no observer wants (none registered, or the telemetry stream
off or full) builds nothing.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Protocol

log = logging.getLogger(__name__)

MAX_NAME_CHARS = 256  # names travel in every event; a caller chooses them
MAX_MESSAGE_CHARS = 1024  # an error's message travels in an event too; the full one is in the reply
Event = tuple[str, dict[str, Any], int]  # a progress event kept for the call's span: name, attributes, ns


class Call:
    """One tool call as observers see it. The transport sets `error_type` and `error_message` before the
    call ends, the hub `ended_ns` when it ends.

    The call's thread does as little as it can here (docs/observability.md, Cost): what the call does
    (`operation`) comes from the request the transport decodes anyway (`described`); until then
    `describe` can find it, on whichever thread asks first. Tracing ids are drawn only when a tracing
    observer needs them."""

    __slots__ = (
        "_describe",
        "_operation",
        "correlation_id",
        "ended_ns",
        "error_message",
        "error_type",
        "events",
        "session_id",
        "span_id",
        "started_ns",
        "streaming",
        "tool",
        "trace_id",
    )

    def __init__(
        self,
        tool: str,  # the RPC's tool, e.g. "snakebridge.call"
        operation: str | None = None,  # e.g. "method:CompilationConfig.compute_hash" (`operation_of`)
        session_id: str = "",
        correlation_id: str = "",
        *,
        streaming: bool = False,
        describe: Callable[[], str] | None = None,  # finds the operation while it is None
    ) -> None:
        self.tool = tool
        self.session_id = session_id
        self.correlation_id = correlation_id
        self.streaming = streaming
        self.started_ns = time.time_ns()
        self.ended_ns = 0
        self.error_type: str | None = None  # the error's Python type when the call failed
        self.error_message: str | None = None  # its message, cut at MAX_MESSAGE_CHARS
        self.trace_id = 0  # the call's span ids, 0 until a tracing observer draws them
        self.span_id = 0
        self.events: list[Event] | None = None  # progress events that had no phase span to go to
        self._operation = operation
        self._describe = describe

    @property
    def operation(self) -> str:
        operation = self._operation
        if operation is None:  # two threads may both describe the call: they find the same
            describe = self._describe
            operation = self._operation = describe() if describe is not None else operation_of({})
        return operation

    def described(self, operation: str) -> None:
        """What the call does, known now: `describe`, and the request it may hold, are let go. A call
        described already (or settled at its end) keeps what it was told first."""
        if self._describe is not None:
            self._operation = operation
            self._describe = None

    def settle(self) -> None:
        """At the call's end: a call that was never `described` (refused before its request was decoded)
        is described now, so that no call an observer holds keeps its request alive."""
        if self._describe is not None:
            self.described(self.operation)


class Observer(Protocol):
    def watching(self) -> bool:
        """Whether it wants the next call; asked before anything is built for the call."""
        ...

    def started(self, call: Call) -> object:
        """The call starts; what this returns is handed back to `ended`."""
        ...

    def ended(self, call: Call, started: object) -> None:
        """The call ended (`call.error_type` says how)."""
        ...

    def compile_event(self, event: Mapping[str, Any]) -> None:
        """One progress event of compile work (`compile.progress`), on the thread doing it."""
        ...


_observers: tuple[Observer, ...] = ()
_current: contextvars.ContextVar[Call | None] = contextvars.ContextVar("observed_call", default=None)


def add(observer: Observer) -> None:
    global _observers
    _observers = (*_observers, observer)


def remove(observer: Observer) -> None:
    global _observers
    _observers = tuple(o for o in _observers if o is not observer)


def active() -> bool:
    return bool(_observers)


def current() -> Call | None:
    """The observed call this context serves (a streamed compile's thread inherits it), if any."""
    return _current.get()


def watchers() -> tuple[Observer, ...]:
    """The observers that want the next call, each asked once; none: the call is not observed."""
    if not _observers:
        return ()
    found: tuple[Observer, ...] = ()
    for observer in _observers:
        try:
            if observer.watching():
                found += (observer,)
        except Exception:
            log.warning(
                "observer %s failed to say whether it watches", type(observer).__name__, exc_info=True
            )
    return found


def observed(call: Call, watchers: tuple[Observer, ...]) -> Observed:
    """Each of `watchers` told of `call` around a block: `with hub.observed(call, watchers): ...`."""
    return Observed(call, watchers)


class Observed:
    """Tells each observer that the call started and ended so that neither can fail the call, sets
    `error_type` when an exception escapes the block, and makes the call `current()` meanwhile. A class,
    not a generator around an ExitStack: it runs on every call."""

    __slots__ = ("_call", "_started", "_token", "_watchers")

    def __init__(self, call: Call, watchers: tuple[Observer, ...]) -> None:
        self._call = call
        self._watchers = watchers

    def __enter__(self) -> Call:
        call = self._call
        self._token = _current.set(call)
        started: list[tuple[Observer, object]] = []
        for observer in self._watchers:
            try:
                started.append((observer, observer.started(call)))
            except Exception:
                log.warning("observer %s failed to start a call", type(observer).__name__, exc_info=True)
        self._started = started
        return call

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        call = self._call
        call.ended_ns = time.time_ns()
        call.settle()
        if exc is not None and call.error_type is None:
            call.error_type = type(exc).__name__
            call.error_message = str(exc)[:MAX_MESSAGE_CHARS]
        for observer, started in reversed(self._started):
            try:
                observer.ended(call, started)
            except Exception:
                log.warning("observer %s failed to end a call", type(observer).__name__, exc_info=True)
        # try, not contextlib.suppress: this runs on every observed call
        try:  # noqa: SIM105
            _current.reset(self._token)
        except ValueError:
            pass  # a streamed call's generator finalized in another context: nothing to restore there
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
