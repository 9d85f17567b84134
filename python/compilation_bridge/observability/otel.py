"""OpenTelemetry's view of the worker, as a hub observer: a span per tool call, a child span per compile
phase.

A call's span is built after the call by the recorder (`otel_recorder`), off the call's thread, which only
notes the call when it ends. Its ids are drawn by the recorder, or here when a phase of the call needs
them first as its parent (the hub's `current()` call, which a streamed compile's thread inherits).

Phases are the `<x>_start` / `<x>_end` pairs of `compile.progress`, which nest on the thread doing the
work; they are rare, so their spans are built here, as they happen. A phase span starts at its start
event's time and lasts exactly the `seconds` its end event reports. Other progress events
(`dynamo_traced`, `graph_split`, ...) become events of the innermost open phase, else of the call's span.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, Status, StatusCode, TraceFlags, Tracer
from opentelemetry.util.types import AttributeValue

from compilation_bridge.observability import hub
from compilation_bridge.observability.otel_recorder import CallRecorder
from compilation_bridge.observability.otel_spans import draw_ids

PHASE_PREFIX = "compile/"  # compile/trace, compile/compile, compile/warm_start, compile/run
EVENT_PREFIX = "compile."  # attributes of phase spans and events: compile.piece, compile.range, ...
MAX_TEXT_CHARS = hub.MAX_NAME_CHARS


class OtelObserver:
    """A hub observer (see `hub.Observer`): call spans through `recorder`, phase spans from `tracer`."""

    def __init__(self, tracer: Tracer, recorder: CallRecorder) -> None:
        self.tracer = tracer
        self.recorder = recorder
        self._phases = threading.local()  # each thread's open phase spans, innermost last

    def watching(self) -> bool:
        return True  # every call counts in the metrics, sampled or not

    def started(self, call: hub.Call) -> None:
        """Nothing to do yet: a call is noted when it ends."""

    def ended(self, call: hub.Call, started: object) -> None:
        self.recorder.note(call)

    def compile_event(self, event: Mapping[str, Any]) -> None:
        name = str(event.get("event", ""))
        if name.endswith("_start"):
            self._open(name.removesuffix("_start"), event)
        elif name.endswith("_end"):
            self._close(name.removesuffix("_end"), event)
        else:
            self._point(name, event)

    def _open_phases(self) -> list[tuple[str, Span, int]]:
        phases: list[tuple[str, Span, int]] | None = getattr(self._phases, "open", None)
        if phases is None:
            phases = self._phases.open = []
        return phases

    def _open(self, phase: str, event: Mapping[str, Any]) -> None:
        phases = self._open_phases()
        if phases:
            parent: Context | None = trace.set_span_in_context(phases[-1][1])
        else:
            call = hub.current()
            parent = self._context_of(call) if call is not None else None  # None: whatever is current
        started_ns = _event_ns(event)
        span = self.tracer.start_span(
            PHASE_PREFIX + phase, context=parent, start_time=started_ns, attributes=_attributes(event)
        )
        phases.append((phase, span, started_ns))

    def _close(self, phase: str, event: Mapping[str, Any]) -> None:
        phases = self._open_phases()
        at = next((i for i in range(len(phases) - 1, -1, -1) if phases[i][0] == phase), None)
        if at is None:
            return  # its start came before this observer did
        for _, span, started_ns in reversed(phases[at:]):  # an inner phase left open ends with it
            span.set_attributes(_attributes(event))
            if event.get("ok") is False:
                span.set_status(Status(StatusCode.ERROR, f"{phase} failed"))
            span.end(end_time=_phase_end_ns(event, started_ns))
        del phases[at:]

    def _point(self, name: str, event: Mapping[str, Any]) -> None:
        phases = self._open_phases()
        if phases:
            phases[-1][1].add_event(EVENT_PREFIX + name, _attributes(event), timestamp=_event_ns(event))
            return
        call = hub.current()
        if call is not None:
            call.events = call.events or []
            call.events.append((EVENT_PREFIX + name, _attributes(event), _event_ns(event)))

    def _context_of(self, call: hub.Call) -> Context:
        """An OpenTelemetry context whose current span is the call's (not built yet: its ids only,
        flagged as the sampler will decide for it, so that its phases are kept or dropped with it)."""
        draw_ids(call)
        sampled = self.recorder.sampled(call.trace_id)
        flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
        ids = SpanContext(call.trace_id, call.span_id, is_remote=False, trace_flags=flags)
        return trace.set_span_in_context(NonRecordingSpan(ids))


def _event_ns(event: Mapping[str, Any]) -> int:
    at = event.get("time")
    return int(at * 1e9) if isinstance(at, int | float) else time.time_ns()


def _phase_end_ns(event: Mapping[str, Any], started_ns: int) -> int:
    seconds = event.get("seconds")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        return started_ns + int(seconds * 1e9)
    return _event_ns(event)


def _attributes(event: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """An event's fields as attributes (`compile.<field>`), in the types OpenTelemetry takes."""
    found: dict[str, AttributeValue] = {}
    for key, value in event.items():
        if key not in ("event", "time") and value is not None:
            found[EVENT_PREFIX + key] = _attribute(value)
    return found


def _attribute(value: Any) -> AttributeValue:
    if isinstance(value, bool | int | float | str):
        return value[:MAX_TEXT_CHARS] if isinstance(value, str) else value
    if isinstance(value, list | tuple) and value and all(isinstance(v, int) for v in value):
        return [int(v) for v in value]  # a range, [start, end]
    return str(value)[:MAX_TEXT_CHARS]
