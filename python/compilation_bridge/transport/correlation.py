"""The correlation id of each tool call, set around the call for every log line it makes: the one that
SnakeBridge puts in the request's metadata, else Snakepit's `x-snakepit-correlation-id` header, else `-`.
A server interceptor, so the servicer's methods carry no bookkeeping of their own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc

from compilation_bridge.transport.interception import Behavior, WrappedHandlers
from compilation_bridge.transport.logcontext import correlation_id

CORRELATION_HEADER = "x-snakepit-correlation-id"
MAX_CORRELATION_CHARS = 256  # it is printed in every log line of the call
TOOL_METHODS = frozenset(
    f"/snakepit.bridge.BridgeService/{name}" for name in ("ExecuteTool", "ExecuteStreamingTool")
)


class CorrelationInterceptor(grpc.ServerInterceptor):
    def __init__(self) -> None:
        self._wrapped = WrappedHandlers(_with_correlation)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or handler_call_details.method not in TOOL_METHODS:
            return handler
        return self._wrapped.of(handler_call_details.method, handler)


def _with_correlation(kind: str, behavior: Behavior) -> Behavior:
    if kind == "unary_stream":

        def streaming(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            token = correlation_id.set(correlation_of(request, context))
            try:
                yield from behavior(request, context)
            finally:
                correlation_id.reset(token)

        return streaming

    def unary(request: Any, context: grpc.ServicerContext) -> Any:
        token = correlation_id.set(correlation_of(request, context))
        try:
            return behavior(request, context)
        finally:
            correlation_id.reset(token)

    return unary


def correlation_of(request: Any, context: grpc.ServicerContext) -> str:
    value = request.metadata.get("correlation_id")
    if value:
        return str(value)[:MAX_CORRELATION_CHARS]
    for key, header in context.invocation_metadata() or ():
        if key == CORRELATION_HEADER:
            return str(header)[:MAX_CORRELATION_CHARS]
    return "-"
