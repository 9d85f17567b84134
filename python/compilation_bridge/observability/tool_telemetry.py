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

import uuid
from collections.abc import Mapping
from typing import Any

from compilation_bridge.observability.hub import Call
from compilation_bridge.observability.telemetry_stream import TelemetryEvent, TelemetryStream

# The transport's correlation id when a request carried none (transport/logcontext.py).
NO_CORRELATION = frozenset({"", "-"})
START, STOP, EXCEPTION = "tool.execution.start", "tool.execution.stop", "tool.execution.exception"


class ToolTelemetry:
    """The hub's observer that feeds the telemetry stream: a call queues its start event when it starts
    and its end event when it ends, each a `ToolEvent` (the call and a time)."""

    def __init__(self, stream: TelemetryStream) -> None:
        self.stream = stream

    def watching(self) -> bool:
        # With telemetry off, or no room (no stream has been open for a while), a call costs this check.
        return not self.stream.turns_away(2)

    def started(self, call: Call) -> str:
        correlation = call.correlation_id
        # Snakepit sends one with every call; a request without one gets a uuid4, as in the reference.
        if correlation in NO_CORRELATION:
            correlation = uuid.uuid4().hex
        self.stream.put(ToolEvent(START, call, call.started_ns, correlation))
        return correlation

    def ended(self, call: Call, started: object) -> None:
        name = STOP if call.error_type is None else EXCEPTION
        self.stream.put(ToolEvent(name, call, call.ended_ns, str(started)))

    def compile_event(self, event: Mapping[str, Any]) -> None:
        """Not sent: Elixir's catalog has no name for compile phases."""


class ToolEvent:
    """A queued tool event: the call it is about and when it happened; the event's measurements and
    metadata are built from them when it is sent (`resolved`), once the call can no longer change."""

    __slots__ = ("_call", "_correlation", "at_ns", "name")

    def __init__(self, name: str, call: Call, at_ns: int, correlation: str) -> None:
        self.name = name
        self._call = call
        self.at_ns = at_ns
        self._correlation = correlation

    def resolved(self) -> TelemetryEvent:
        call = self._call
        metadata = {"tool": call.tool, "operation": call.operation}
        if self.name == START:
            measurements = {"system_time": call.started_ns}
        else:
            measurements = {"duration": self.at_ns - call.started_ns}
        if self.name == EXCEPTION:
            metadata["error_type"] = call.error_type or ""
            metadata["error_message"] = call.error_message or ""
        return TelemetryEvent(self.name, measurements, metadata, self._correlation, self.at_ns)
