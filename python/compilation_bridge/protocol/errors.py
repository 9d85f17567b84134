"""Error payloads (Snakepit's `error_message` JSON) and the protocol's own exception types.

Elixir maps `type` to `Snakepit.Error.<Type>` and keeps `message`, `stacktrace`, `traceback` and
`context`; exceptions therefore travel in-band with `success=false`, never as gRPC status codes.
"""

from __future__ import annotations

import traceback
from typing import Any

from compilation_bridge.busy import BusyError
from compilation_bridge.protocol.sessionids import shown_session_id

# Argument keys copied into the error context when the caller sent them (as the reference does).
CONTEXT_KEYS = ("library", "python_module", "function", "call_type")
# A pathological exception (huge message, deep recursion) must not produce an unbounded reply.
MAX_MESSAGE_CHARS = 64 * 1024
MAX_FRAMES = 64


class SnakeBridgeProtocolError(Exception):
    """The caller speaks a SnakeBridge protocol version this worker does not."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}


class SnakeBridgeHelperNotFoundError(Exception):
    """`call_helper` asked for a helper; this worker has no helper pack (SnakeBridge reacts to the name)."""


class WorkerBusyError(BusyError):
    """A share of the worker is full; refused instead of queued so that heartbeats keep a thread."""


def _bounded(text: str) -> str:
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + f"... [{len(text) - MAX_MESSAGE_CHARS} more characters]"
    return _encodable(text)


def _encodable(text: str) -> str:
    """`text` with lone surrogates (JSON escapes can carry them) spelled out, so that the error payload
    always encodes as UTF-8: the reply that reports a failure must not fail itself."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _text(value: Any) -> str:
    """str(value) for an error context; a value whose str() fails (or is too deep) is described instead."""
    try:
        return _bounded(str(value))
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def error_context(tool_name: str, session_id: str, payload: Any) -> dict[str, str]:
    context = {"tool_name": _bounded(tool_name), "session_id": shown_session_id(session_id)}
    if isinstance(payload, dict):
        for key in CONTEXT_KEYS:
            value = payload.get(key)
            if value is not None:
                context[key] = _text(value)
        if "protocol_version" in payload:
            context["payload_version"] = _text(payload["protocol_version"])
    return context


def error_payload(exc: BaseException, context: dict[str, str]) -> dict[str, Any]:
    """The JSON object Snakepit's `PythonTranslation.from_error_message` expects."""
    message = _text(exc)  # an exception whose __str__ fails still has to be reported
    fields = getattr(exc, "context_fields", None)  # what a back-pressure error says of its limit
    if isinstance(fields, dict):
        context = {**context, **{_text(k): _text(v) for k, v in fields.items()}}
    stacktrace = [_bounded(line) for line in _frames(exc)]
    return {
        "type": _bounded(type(exc).__name__),
        "message": message,
        "stacktrace": stacktrace,
        "traceback": _bounded("".join(stacktrace)),
        "context": context,
    }


def _frames(exc: BaseException) -> list[str]:
    try:
        return traceback.format_exception(type(exc), exc, exc.__traceback__, limit=MAX_FRAMES)
    except Exception:  # e.g. RecursionError on a pathological chain of causes
        return traceback.format_exception_only(type(exc), exc)


def fallback_payload(exc: BaseException) -> dict[str, Any]:
    """The least error payload, for when building the full one failed: still in-band, still valid JSON."""
    name = _encodable(type(exc).__name__)
    message = f"{name} (the error could not be described further)"
    return {"type": name, "message": message, "stacktrace": [], "traceback": "", "context": {}}
