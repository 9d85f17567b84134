"""Wrapping a gRPC method's handler: what every server interceptor of the worker does the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

Behavior = Callable[..., Any]
HANDLER_KINDS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")


def wrapped_handler(handler: grpc.RpcMethodHandler, wrap: Callable[[str, Behavior], Behavior]) -> Any:
    """`handler` with each of its behaviors replaced by `wrap(kind, behavior)`."""
    behaviors = {kind: getattr(handler, kind) for kind in HANDLER_KINDS if getattr(handler, kind)}
    return handler._replace(**{kind: _keeping_flags(wrap(kind, old), old) for kind, old in behaviors.items()})


class WrappedHandlers:
    """Each method's wrapped handler, made once: a method's handler is the same object on every call, and
    wrapping it anew per call costs closures and a namedtuple on the RPC path. Bounded by the service's
    methods (a method name grpc has no handler for never gets here)."""

    def __init__(self, wrap: Callable[[str, Behavior], Behavior]) -> None:
        self._wrap = wrap
        self._made: dict[str, tuple[grpc.RpcMethodHandler, Any]] = {}

    def of(self, method: str, handler: grpc.RpcMethodHandler) -> Any:
        known = self._made.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = wrapped_handler(handler, self._wrap)
        self._made[method] = (handler, wrapped)
        return wrapped


def _keeping_flags(new: Behavior, old: Behavior) -> Behavior:
    # grpc reads these off the behavior: the health service's Watch answers from callbacks.
    for name in ("experimental_non_blocking", "experimental_thread_pool"):
        if hasattr(old, name):
            setattr(new, name, getattr(old, name))
    return new
