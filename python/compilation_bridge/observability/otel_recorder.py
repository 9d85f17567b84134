"""Finished tool calls become OpenTelemetry spans and metrics here, on a thread of its own.

On the call's thread the observer (`otel`) only notes what the call was: its `hub.Call`, the ids chosen
for its span when it started, its end time and the progress events that had no phase to go to. The
budget for everything that watches the worker is 3% of a call (docs/observability.md, Cost), and
OpenTelemetry's Python SDK spends tens of microseconds on a span, so the recorder drains the notes a few
times a second, off the call's thread. A call is over when its span is built: nothing can change it, so
the recorder builds it finished (`ReadableSpan`), with the ids chosen at the call's start (the phase
spans made while the call ran name it as their parent), and hands it to the span processors, rather than
starting and ending a live span through a tracer (about four times the work).

Every call counts in the metrics; spans follow OpenTelemetry's sampler (`OTEL_TRACES_SAMPLER`, every
call by default), asked once per call with the call's trace id, so a call's phases are kept or dropped
with it.

Span names and attributes follow Snakepit's own Python server (`BridgeService/ExecuteTool`,
`snakepit.tool`, `snakepit.session_id`, `snakepit.correlation_id`), so a trace search by the correlation id
Snakepit sends finds the call on either kind of worker.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as SpanEvent
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.sampling import Sampler
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue

from compilation_bridge.observability import hub

CALL_SPANS = {False: "BridgeService/ExecuteTool", True: "BridgeService/ExecuteStreamingTool"}
TOOL, ERROR_TYPE, OUTCOME = "snakepit.tool", "error.type", "outcome"
NO_CORRELATION = "-"  # what the transport records when a request carried no correlation id
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
DRAIN_EVERY_S = 0.2
YIELD_EVERY = 16  # calls recorded between two yields of the interpreter (well under a millisecond)
MAX_SERIES = 1000
OTHER = "other"
# Calls noted and not yet recorded: beyond it the oldest are dropped, so a recorder that cannot keep up
# costs a bounded amount of memory (about 300 bytes a call).
MAX_PENDING_CALLS = 65_536
Event = tuple[str, dict[str, AttributeValue], int]  # name, attributes, time (ns since the epoch)


@dataclass(slots=True)
class Finished:
    call: hub.Call
    trace_id: int
    span_id: int
    ended_ns: int
    events: list[Event] | None  # progress events seen while no phase was open


@dataclass(frozen=True)
class SpanSink:
    """Where finished call spans go, and as whom: the tracer provider's processors, resource and
    sampler, and the instrumentation scope of the phase spans' tracer."""

    processor: SpanProcessor
    resource: Resource
    sampler: Sampler
    scope: InstrumentationScope


class CallRecorder:
    """Turns noted calls into spans and call metrics on its own thread, until `stop`."""

    def __init__(self, sink: SpanSink, meter: Meter) -> None:
        self._sink = sink
        self._calls, self._errors = Tally((TOOL, OUTCOME)), Tally((TOOL, ERROR_TYPE))
        meter.create_observable_counter(
            "compilation_bridge.calls",
            callbacks=[self._calls.observe],
            unit="{call}",
            description="tool calls answered, by tool and outcome",
        )
        meter.create_observable_counter(
            "compilation_bridge.errors",
            callbacks=[self._errors.observe],
            unit="{call}",
            description="failed tool calls, by tool and error type",
        )
        self._duration = meter.create_histogram(
            "compilation_bridge.call.duration",
            unit="s",
            description="tool call duration, by tool and outcome",
        )
        self._pending: deque[Finished] = deque(maxlen=MAX_PENDING_CALLS)  # appends are atomic: no lock
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="otel-calls", daemon=True)
        self._thread.start()

    def note(self, finished: Finished) -> None:
        """On the call's thread: a deque append, nothing more."""
        self._pending.append(finished)

    def sampled(self, trace_id: int) -> bool:
        """Whether the sampler keeps the call span of `trace_id` (and so its phases)."""
        result = self._sink.sampler.should_sample(None, trace_id, CALL_SPANS[False], SpanKind.SERVER)
        return result.decision.is_sampled()

    def stop(self) -> None:
        """Record what is noted, then end the thread."""
        self._stopping.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopping.wait(DRAIN_EVERY_S):
            self._drain()
        self._drain()

    def _drain(self) -> None:
        recorded = 0
        while self._pending:
            self._record(self._pending.popleft())
            recorded += 1
            if recorded % YIELD_EVERY == 0:
                time.sleep(0)  # a call waiting for the interpreter goes first: recording is never urgent

    def _record(self, finished: Finished) -> None:
        call = finished.call
        outcome = "error" if call.error_type else "ok"
        self._calls.add(call.tool, outcome)
        if call.error_type:
            self._errors.add(call.tool, call.error_type)
        self._duration.record(
            (finished.ended_ns - call.started_ns) / 1e9, {TOOL: call.tool, OUTCOME: outcome}
        )
        if self.sampled(finished.trace_id):
            self._sink.processor.on_end(self._span(finished))

    def _span(self, finished: Finished) -> ReadableSpan:
        call = finished.call
        attributes = call_attributes(call)
        status = Status()  # unset: a call that answered
        if call.error_type:
            attributes[ERROR_TYPE] = call.error_type
            status = Status(StatusCode.ERROR, call.error_type)
        return ReadableSpan(
            name=CALL_SPANS[call.streaming],
            context=SpanContext(finished.trace_id, finished.span_id, is_remote=False, trace_flags=SAMPLED),
            parent=None,  # a root: Snakepit propagates no trace context, only its correlation id
            resource=self._sink.resource,
            attributes=attributes,
            events=[SpanEvent(name, attrs, timestamp=at) for name, attrs, at in finished.events or ()],
            kind=SpanKind.SERVER,
            status=status,
            start_time=call.started_ns,
            end_time=finished.ended_ns,
            instrumentation_scope=self._sink.scope,
        )


class Tally:
    """Counts by attribute values, kept by the recorder's thread and read by the metric reader's as an
    observable counter: a dict update instead of an SDK measurement (several microseconds) per call.
    Callers choose tool names, so at most MAX_SERIES distinct value sets are kept, the rest as `other`."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self._keys = keys
        self._counts: dict[tuple[str, ...], int] = {}  # written by one thread only

    def add(self, *values: str) -> None:
        if values not in self._counts and len(self._counts) >= MAX_SERIES:
            values = (OTHER,) * len(values)
        self._counts[values] = self._counts.get(values, 0) + 1

    def observe(self, options: CallbackOptions) -> list[Observation]:
        counts = list(self._counts.items())  # one copy under the interpreter lock: safe while it grows
        return [Observation(count, dict(zip(self._keys, values, strict=True))) for values, count in counts]


def call_attributes(call: hub.Call) -> dict[str, Any]:
    attributes = {
        TOOL: call.tool,
        "snakepit.session_id": call.session_id,
        "snakebridge.operation": call.operation,
    }
    if call.correlation_id != NO_CORRELATION:
        attributes["snakepit.correlation_id"] = call.correlation_id
    return attributes
