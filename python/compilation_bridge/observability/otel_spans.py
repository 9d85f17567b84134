"""A finished tool call as OpenTelemetry's span, and as the record that carries it to where the span is
built (`span_export_process`).

Span names and attributes follow Snakepit's own Python server (`BridgeService/ExecuteTool`,
`snakepit.tool`, `snakepit.session_id`, `snakepit.correlation_id`), so a trace search by the correlation id
Snakepit sends finds the call on either kind of worker. A call is over when its span is built: nothing can
change it, so the span is built finished (`ReadableSpan`), with the call's ids (the phase spans made
while the call ran name it as their parent; `draw_ids` draws them when first needed).

A record is a list of plain values (msgpack's kinds): the call's fields, its ids (the 128-bit trace id as
16 bytes, beyond msgpack's integers), its times and the progress events that had no phase to go to.
"""

from __future__ import annotations

import random
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as SpanEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from compilation_bridge.observability import hub

CALL_SPANS = {False: "BridgeService/ExecuteTool", True: "BridgeService/ExecuteStreamingTool"}
TOOL, ERROR_TYPE = "snakepit.tool", "error.type"
NO_CORRELATION = "-"  # what the transport records when a request carried no correlation id
SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def draw_ids(call: hub.Call) -> None:
    """Gives the call its span's ids, unless it has them."""
    if not call.trace_id:
        call.trace_id = random.getrandbits(128) or 1  # 0 is no id at all
        call.span_id = random.getrandbits(64) or 1


def call_span(call: hub.Call, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    attributes = call_attributes(call)
    status = Status()  # unset: a call that answered
    if call.error_type:
        attributes[ERROR_TYPE] = call.error_type
        status = Status(StatusCode.ERROR, call.error_type)
    return ReadableSpan(
        name=CALL_SPANS[call.streaming],
        context=SpanContext(call.trace_id, call.span_id, is_remote=False, trace_flags=SAMPLED),
        parent=None,  # a root: Snakepit propagates no trace context, only its correlation id
        resource=resource,
        attributes=attributes,
        events=[SpanEvent(name, attrs, timestamp=at) for name, attrs, at in call.events or ()],
        kind=SpanKind.SERVER,
        status=status,
        start_time=call.started_ns,
        end_time=call.ended_ns,
        instrumentation_scope=scope,
    )


def call_attributes(call: hub.Call) -> dict[str, Any]:
    attributes = {
        TOOL: call.tool,
        "snakepit.session_id": call.session_id,
        "snakebridge.operation": call.operation,
    }
    if call.correlation_id != NO_CORRELATION:
        attributes["snakepit.correlation_id"] = call.correlation_id
    return attributes


def to_record(call: hub.Call) -> list[Any]:
    return [
        call.tool,
        call.operation,
        call.session_id,
        call.correlation_id,
        call.streaming,
        call.error_type,
        call.started_ns,
        call.trace_id.to_bytes(16, "big"),
        call.span_id,
        call.ended_ns,
        call.events,  # (name, attributes, time) tuples: msgpack packs them as lists
    ]


def from_record(record: list[Any]) -> hub.Call:
    """The call a record carries; TypeError or ValueError when it is not one `to_record` made."""
    tool, operation, session, correlation, streaming, error_type, started, trace, span, ended, events = record
    call = hub.Call(str(tool), str(operation), str(session), str(correlation), streaming=bool(streaming))
    call.started_ns, call.ended_ns = int(started), int(ended)
    call.error_type = None if error_type is None else str(error_type)
    call.trace_id, call.span_id = int.from_bytes(trace, "big"), int(span)
    call.events = [(str(name), dict(attrs), int(at)) for name, attrs, at in events] if events else None
    return call
