"""Finished tool calls become OpenTelemetry spans and metrics here, on a thread of its own.

On the call's thread the observer (`otel`) only notes what the call was: its `hub.Call`, the ids chosen
for its span when it started, its end time and the progress events that had no phase to go to. Building
a span and recording its measurements costs tens of microseconds of Python, a few percent of a call,
and the budget for everything that watches the worker is 3% of a call (docs/observability.md, Cost).
So the recorder drains the notes a few times a second and builds each span with the ids chosen at the
start of its call (`PinnedIds`): the phase spans made while the call ran name it as their parent.

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

from opentelemetry import context
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from compilation_bridge.observability import hub

CALL_SPANS = {False: "BridgeService/ExecuteTool", True: "BridgeService/ExecuteStreamingTool"}
TOOL, ERROR_TYPE, OUTCOME = "snakepit.tool", "error.type", "outcome"
NO_CORRELATION = "-"  # what the transport records when a request carried no correlation id
DRAIN_EVERY_S = 0.2
YIELD_EVERY = 16  # calls recorded between two yields of the interpreter (about 0.5 ms of work)
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


class PinnedIds(IdGenerator):
    """Random ids, except for the next span the recorder's thread builds, whose ids were chosen when its
    call started."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self._pinned = threading.local()

    def pin(self, trace_id: int, span_id: int) -> None:
        self._pinned.ids = (trace_id, span_id)

    def generate_trace_id(self) -> int:
        ids = getattr(self._pinned, "ids", None)
        return ids[0] if ids else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        ids = getattr(self._pinned, "ids", None)
        if not ids:
            return self._random.generate_span_id()
        self._pinned.ids = None  # a span takes its ids once: the next is its own
        return int(ids[1])

    def is_trace_id_random(self) -> bool:
        return True


class CallRecorder:
    """Turns noted calls into spans and call metrics on its own thread, until `stop`."""

    def __init__(self, tracer: Tracer, ids: PinnedIds, meter: Meter) -> None:
        self._tracer = tracer
        self._ids = ids
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
        self._ids.pin(finished.trace_id, finished.span_id)
        span = self._tracer.start_span(
            CALL_SPANS[call.streaming],
            context=context.Context(),  # a root: Snakepit propagates no trace context, only its id
            kind=SpanKind.SERVER,
            attributes=call_attributes(call),
            start_time=call.started_ns,
        )
        for name, attributes, at in finished.events or ():
            span.add_event(name, attributes, timestamp=at)
        outcome = "error" if call.error_type else "ok"
        if call.error_type:
            span.set_attribute(ERROR_TYPE, call.error_type)
            span.set_status(Status(StatusCode.ERROR, call.error_type))
            self._errors.add(call.tool, call.error_type)
        span.end(end_time=finished.ended_ns)
        self._calls.add(call.tool, outcome)
        self._duration.record(
            (finished.ended_ns - call.started_ns) / 1e9, {TOOL: call.tool, OUTCOME: outcome}
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
