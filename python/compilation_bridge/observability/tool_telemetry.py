"""Snakepit's tool events for every tool call the worker serves.

What Snakepit's own Python side emits around a tool with `telemetry.span("tool.execution", {"tool": ...,
"operation": ...}, correlation_id)`: `tool.execution.start` (measurement `system_time`, ns since the
epoch), then `tool.execution.stop` (`duration`, ns) or, when the tool failed, `tool.execution.exception`
(`duration`, and the metadata's `error_type` and `error_message`). Metadata values are strings; every
event of a call carries the call's correlation id, or, when the request had none, one made up for the
call (as the reference does), so that Elixir can pair a start with its end.

Only names of Elixir's catalog (`Snakepit.Telemetry.Naming`) are worth sending: Elixir drops any other.
Compile phases have no name there, so they are not sent.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import Any

from compilation_bridge.observability.hub import Call
from compilation_bridge.observability.telemetry_stream import TelemetryStream

# The transport's correlation id when a request carried none (transport/logcontext.py).
NO_CORRELATION = frozenset({"", "-"})
NOTHING = nullcontext()


class ToolTelemetry:
    """The hub's observer that feeds the telemetry stream."""

    def __init__(self, stream: TelemetryStream) -> None:
        self.stream = stream

    def call(self, call: Call) -> AbstractContextManager[Any]:
        # With telemetry off, or no room (no stream has been open for a while), a call costs one check.
        return NOTHING if self.stream.turns_away(2) else ToolSpan(self.stream, call)

    def compile_event(self, event: Mapping[str, Any]) -> None:
        """Not sent: Elixir's catalog has no name for compile phases."""


class ToolSpan:
    """One call's events: the start when entered, the stop or the exception when left."""

    __slots__ = ("_call", "_correlation", "_metadata", "_stream")

    def __init__(self, stream: TelemetryStream, call: Call) -> None:
        self._stream = stream
        self._call = call
        self._metadata = {"tool": call.tool, "operation": call.operation}
        correlation = call.correlation_id
        self._correlation = uuid.uuid4().hex if correlation in NO_CORRELATION else correlation

    def __enter__(self) -> ToolSpan:
        start = {"system_time": self._call.started_ns}
        self._stream.emit("tool.execution.start", start, self._metadata, self._correlation)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        call = self._call
        ended = {"duration": time.time_ns() - call.started_ns}
        if call.error_type is None:
            self._stream.emit("tool.execution.stop", ended, self._metadata, self._correlation)
            return
        failed = {**self._metadata, "error_type": call.error_type, "error_message": call.error_message or ""}
        self._stream.emit("tool.execution.exception", ended, failed, self._correlation)
