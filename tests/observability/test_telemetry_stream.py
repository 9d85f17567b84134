"""StreamTelemetry as Snakepit's GrpcStream reads it: the worker's tool events have the names, measurement
keys and kinds and metadata keys that Snakepit's own Python server sends (recordings/snakepit_telemetry.json,
made by scripts/record_snakepit_telemetry.py), the controls act as they act there, events wait, bounded,
while no stream is open, and a stream that ends leaves nothing running."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from compilation_bridge.observability import hub
from compilation_bridge.observability.telemetry_stream import TelemetryEvent, TelemetryStream
from compilation_bridge.observability.tool_telemetry import ToolTelemetry
from compilation_bridge.testing.session import SnakeBridgeSession
from compilation_bridge.testing.telemetry_client import (
    Events,
    TelemetryClient,
    event_filter,
    event_name,
    sampling,
    toggle,
)
from compilation_bridge.testing.worker_process import WorkerProcess
from compilation_bridge.transport import telemetry
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.options import ServeOptions
from compilation_bridge.transport.server import RunningServer, build_server
from compilation_bridge.transport.telemetry import message_of, stream_events

RECORDING = json.loads((Path(__file__).parent / "recordings" / "snakepit_telemetry.json").read_text())
PHASES = {phase["phase"]: phase for phase in RECORDING["phases"]}
OURS = ("tool.execution.start", "tool.execution.stop", "tool.execution.exception")

# Elixir's side (Snakepit 0.13, lib/snakepit/telemetry/): the event names `Naming.from_parts/1` knows (any
# other event is dropped), the measurement keys `Naming.measurement_key/1` accepts (one unknown key drops
# the event), and the metadata keys `SafeMetadata` turns into atoms (others stay strings).
ELIXIR_EVENTS = {
    "python.call.start",
    "python.call.stop",
    "python.call.exception",
    "python.memory.sampled",
    "python.cpu.sampled",
    "python.gc.completed",
    "python.error.occurred",
    "tool.execution.start",
    "tool.execution.stop",
    "tool.execution.exception",
    "tool.result_size",
}
ELIXIR_MEASUREMENTS = {"duration", "system_time", "bytes", "count", "rss_bytes", "vms_bytes", "message_size"}
ELIXIR_METADATA = {"tool", "operation", "error_type", "error_message", "correlation_id", "session_id"}


class Worker:
    """An in-process worker whose tool calls feed its telemetry stream, and a session to call it."""

    def __init__(self, stream: TelemetryStream) -> None:
        self.stream = stream
        self.server: RunningServer = build_server(ServeOptions(), telemetry=stream)
        self.observer = ToolTelemetry(stream)
        hub.add(self.observer)
        self.channel = grpc.insecure_channel(f"localhost:{self.server.port}")
        self.stub = pb_grpc.BridgeServiceStub(self.channel)
        self.session = SnakeBridgeSession(self.stub, "worker-session", "S1")

    def close(self) -> None:
        hub.remove(self.observer)
        self.channel.close()
        self.server.stop(0)

    def open(self, timeout: float | None = None) -> TelemetryClient:
        client = TelemetryClient(self.stub, timeout=timeout)
        assert self.stream.await_readers(1, 10)
        return client

    def call(
        self, correlation: str, fails: bool = False, session: SnakeBridgeSession | None = None
    ) -> pb.ExecuteToolResponse:
        """A SnakeBridge call with this correlation id: a construction, or one the allowlist refuses."""
        session = session or self.session
        if fails:
            payload = session.base("os", "getcwd", [], {})
        else:
            payload = session.base("vllm.config", "__init__", [], {"mode": 3})
            payload.update(call_type="class", **{"class": "CompilationConfig"})
        request = session.request("snakebridge.call", payload)
        request.metadata["correlation_id"] = correlation
        response: pb.ExecuteToolResponse = self.stub.ExecuteTool(request, timeout=30)
        assert response.success is not fails
        return response


@pytest.fixture
def worker() -> Iterator[Worker]:
    serving = Worker(TelemetryStream())
    yield serving
    serving.close()


@pytest.fixture
def small_worker() -> Iterator[Worker]:
    serving = Worker(TelemetryStream(max_events=4))
    yield serving
    serving.close()


def _ended(correlation: str) -> Any:
    """Whether the call with this correlation id has sent its last event."""
    last = {"tool.execution.stop", "tool.execution.exception"}
    return lambda events: any(e.correlation_id == correlation and event_name(e) in last for e in events)


def _of(events: Events, correlation: str) -> Events:
    return [event for event in events if event.correlation_id == correlation]


def _shape(event: pb.TelemetryEvent) -> dict[str, Any]:
    """What the recording keeps of an event: its name and parts, the kinds of its measurements, the keys
    of its metadata, whether it has a timestamp."""
    kinds = {"int_value": "int", "float_value": "float", "string_value": "string"}
    return {
        "event": event_name(event),
        "event_parts": list(event.event_parts),
        "measurements": {k: kinds[str(v.WhichOneof("value"))] for k, v in event.measurements.items()},
        "metadata": sorted(event.metadata),
        "timestamp_ns": "int" if event.timestamp_ns > 0 else "unset",
    }


def _recorded_shapes(phase: str) -> dict[str, dict[str, Any]]:
    """The recording's events of one phase by name, with the metadata reduced to its keys."""
    return {e["event"]: {**e, "metadata": sorted(e["metadata"])} for e in PHASES[phase]["events"]}


def _expect_shapes(events: Events, phase: str) -> None:
    recorded = _recorded_shapes(phase)
    for event in events:
        expected = {key: recorded[event_name(event)][key] for key in _shape(event)}
        assert _shape(event) == expected


def test_a_call_sends_the_start_and_stop_that_snakepit_sends(worker: Worker) -> None:
    stream = worker.open()
    worker.call("c-ok")
    events = _of(stream.wait_for(_ended("c-ok")), "c-ok")
    assert [event_name(e) for e in events] == ["tool.execution.start", "tool.execution.stop"]
    _expect_shapes(events, "a tool that succeeds")
    assert all(e.metadata["tool"] == "snakebridge.call" for e in events)
    assert all(e.metadata["operation"] == "class:CompilationConfig.__init__" for e in events)
    assert events[1].measurements["duration"].int_value > 0
    stream.close()


def test_a_failed_call_sends_the_exception_that_snakepit_sends(worker: Worker) -> None:
    stream = worker.open()
    worker.call("c-fail", fails=True)
    events = _of(stream.wait_for(_ended("c-fail")), "c-fail")
    assert [event_name(e) for e in events] == ["tool.execution.start", "tool.execution.exception"]
    _expect_shapes(events, "a tool that raises inside its span")
    assert events[1].metadata["error_type"] == "ImportError"
    assert "os" in events[1].metadata["error_message"]
    stream.close()


def test_every_name_and_key_is_one_elixir_keeps(worker: Worker) -> None:
    stream = worker.open()
    worker.call("c-1")
    worker.call("c-2", fails=True)
    events = stream.wait_for(_ended("c-2"))
    assert {event_name(e) for e in events} <= ELIXIR_EVENTS
    assert {key for e in events for key in e.measurements} <= ELIXIR_MEASUREMENTS
    assert {key for e in events for key in e.metadata} <= ELIXIR_METADATA
    stream.close()


def test_a_request_without_correlation_id_gets_one_for_its_events(worker: Worker) -> None:
    stream = worker.open()
    payload = worker.session.base("vllm.config", "__init__", [], {})
    payload.update(call_type="class", **{"class": "CompilationConfig"})
    request = worker.session.request("snakebridge.call", payload)
    del request.metadata["correlation_id"]
    worker.stub.ExecuteTool(request, timeout=30)
    start, stop = stream.wait_for(lambda events: len(events) == 2)
    assert start.correlation_id == stop.correlation_id and len(start.correlation_id) == 32  # a uuid4's hex
    assert (
        PHASES["no correlation id in the request"]["events"][0]["correlation_id"] == "<generated uuid4 hex>"
    )
    stream.close()


CONTROLLED = [phase for phase in RECORDING["phases"] if phase.get("controls")]


def _control(recorded: dict[str, Any]) -> pb.TelemetryControl:
    if "toggle" in recorded:
        return toggle(recorded["toggle"])
    if "sampling" in recorded:
        return sampling(recorded["sampling"], recorded["patterns"])
    return event_filter(recorded["allow"], recorded["deny"])


@pytest.mark.parametrize("phase", CONTROLLED, ids=[phase["phase"] for phase in CONTROLLED])
def test_controls_let_through_what_they_let_through_in_snakepit(
    worker: Worker, phase: dict[str, Any]
) -> None:
    """The same controls, then a call; then every control reset and a fence call, whose events close the
    phase. The tool events the reference sent under the controls are the ones the worker sends."""
    stream = worker.open()
    controls = [_control(recorded) for recorded in phase["controls"]]
    for control in controls:
        stream.send(control)
    assert worker.stream.controls.await_applied(1 + len(controls), 10)
    worker.call("c-phase")
    for control in (toggle(True), sampling(1.0), event_filter()):
        stream.send(control)
    assert worker.stream.controls.await_applied(4 + len(controls), 10)
    worker.call("c-fence")
    events = stream.wait_for(_ended("c-fence"))
    sent = {event_name(e) for e in _of(events, "c-phase")}
    recorded = {event["event"] for event in phase["events"]} & set(OURS)
    assert sent == recorded
    stream.close()


def test_events_of_calls_before_the_stream_opened_come_first(worker: Worker) -> None:
    worker.call("c-early")
    assert PHASES["emitted before the stream opened"]["events"]  # the reference keeps them too
    stream = worker.open()
    worker.call("c-late")
    events = stream.wait_for(_ended("c-late"))
    assert [e.correlation_id for e in events] == ["c-early", "c-early", "c-late", "c-late"]
    stream.close()


def test_the_events_kept_while_no_stream_is_open_are_bounded_and_the_rest_counted(
    small_worker: Worker,
) -> None:
    for index in range(3):
        small_worker.call(f"c-{index}")
    assert len(small_worker.stream) == 4 and small_worker.stream.dropped == 2  # the newest are dropped
    recorded = PHASES["many events while no stream is open"]
    assert recorded["events_delivered"] < recorded["events_emitted"]  # the reference drops the newest too
    stream = small_worker.open()
    # The kept events leave the queue as they are sent: wait for them, or the fence call's events could
    # find the queue still full and be dropped in turn (as they should be).
    stream.wait_for(_ended("c-1"))
    small_worker.call("c-fence")
    events = stream.wait_for(_ended("c-fence"))
    assert [e.correlation_id for e in events] == ["c-0", "c-0", "c-1", "c-1", "c-fence", "c-fence"]
    stream.close()


def test_a_stream_ended_by_its_deadline_leaves_later_events_to_the_next(worker: Worker) -> None:
    """Snakepit 0.13 opens the stream with its 5 s open timeout as the deadline; so does the reference's
    recording with 1 s: the stream ends, and what comes later waits for another."""
    recorded = PHASES["emitted after a stream opened with a 1 s deadline ended"]
    assert recorded["stream_ended_with"] == "DEADLINE_EXCEEDED" and recorded["events"]
    first = TelemetryClient(worker.stub, timeout=0.5)
    assert first.wait_ended() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert worker.stream.await_readers(0, 10)
    worker.call("c-after")
    assert len(worker.stream) == 2
    second = worker.open()
    events = second.wait_for(_ended("c-after"))
    assert [event_name(e) for e in events] == ["tool.execution.start", "tool.execution.stop"]
    second.close()


def _control_readers() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "telemetry-controls"]


def test_a_closed_stream_leaves_no_thread_behind(worker: Worker) -> None:
    for _ in range(3):  # more streams, one after the other, than may be open at once
        stream = worker.open()
        worker.call("c-open")
        stream.wait_for(_ended("c-open"))
        readers = _control_readers()
        assert readers
        stream.close()
        assert worker.stream.await_readers(0, 10)
        for reader in readers:
            reader.join(10)
            assert not reader.is_alive()


def test_concurrent_calls_each_send_their_start_then_their_end(worker: Worker) -> None:
    stream = worker.open()
    correlations = [f"c-{thread}-{index}" for thread in range(4) for index in range(5)]

    def caller(thread: int) -> None:
        session = SnakeBridgeSession(worker.stub, "worker-session", f"S-{thread}")  # a share of its own
        for correlation in correlations[thread * 5 : thread * 5 + 5]:
            worker.call(correlation, session=session)

    threads = [threading.Thread(target=caller, args=(thread,)) for thread in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    events = stream.wait_for(lambda got: all(_ended(c)(got) for c in correlations))
    for correlation in correlations:
        assert [event_name(e) for e in _of(events, correlation)] == [
            "tool.execution.start",
            "tool.execution.stop",
        ]
    assert len(events) == 2 * len(correlations)
    stream.close()


def test_a_worker_process_sends_its_tool_events() -> None:
    """The worker Snakepit starts registers the stream's observer itself."""
    process = WorkerProcess.spawn()
    try:
        stream = TelemetryClient(process.stub, timeout=30)
        session = SnakeBridgeSession(process.stub, process.session_id, "S-process")
        session.call_class("vllm.config", "CompilationConfig", mode=3)
        events = stream.wait_for(lambda got: any(event_name(e) == "tool.execution.stop" for e in got))
        assert events[-1].metadata["operation"] == "class:CompilationConfig.__init__"
        stream.close()
    finally:
        code, _seconds = process.terminate()
    assert code == 0


# ---------------------------------------------------------------- batches, without a transport
def _queued(stream: TelemetryStream, count: int) -> None:
    for n in range(count):
        stream.emit("tool.execution.stop", {"duration": n}, {"tool": "t"}, f"c{n}")


def test_a_batch_is_every_queued_event_in_order() -> None:
    stream = TelemetryStream(max_events=8)
    _queued(stream, 3)
    batch = stream.take_batch(0.0)
    assert [event.correlation_id for event in batch] == ["c0", "c1", "c2"]
    assert len(stream) == 0


def test_a_quarter_full_queue_wakes_a_waiting_stream_before_its_batch_time() -> None:
    stream = TelemetryStream(max_events=8)  # wakes at 2 queued events
    taken: list[int] = []
    taker = threading.Thread(target=lambda: taken.append(len(stream.take_batch(60.0))))
    taker.start()
    _queued(stream, 1)
    taker.join(0.2)
    assert taker.is_alive(), "one event is not enough to wake it"
    _queued(stream, 1)
    taker.join(30.0)  # a generous deadline: only the wake-up ends the wait before 60 s
    assert not taker.is_alive() and taken == [2]


def test_events_put_back_go_first_and_what_finds_no_room_is_counted() -> None:
    stream = TelemetryStream(max_events=4)
    _queued(stream, 3)
    unsent = stream.take_batch(0.0)
    _queued(stream, 2)  # new events while the stream failed to send
    stream.put_back(unsent)
    kept = [event.correlation_id for event in stream.take_batch(0.0)]
    assert kept == ["c0", "c1", "c2", "c0"]  # the unsent first, then what came meanwhile, less the newest
    assert stream.dropped == 1


class _OpenCall:
    """Stands in for gRPC's servicer context of an open StreamTelemetry call."""

    def is_active(self) -> bool:
        return True

    def add_callback(self, callback: object) -> bool:
        return True


def test_a_stream_that_grpc_lets_go_mid_batch_puts_back_what_it_did_not_send() -> None:
    """gRPC stops taking messages once the call has ended and lets the generator go (closes it): the
    message it was handed last, and the rest of the batch, go back first in line for the next stream."""
    stream = TelemetryStream(max_events=8)
    _queued(stream, 4)
    messages = stream_events(stream, iter(()), _OpenCall())  # type: ignore[arg-type]
    first, second = next(messages), next(messages)
    assert [first.correlation_id, second.correlation_id] == ["c0", "c1"]
    messages.close()  # as gRPC's server does when the send of "c1" found the call ended
    assert [event.correlation_id for event in stream.take_batch(0.0)] == ["c1", "c2", "c3"]


def test_messages_sharing_a_template_are_each_their_own_and_the_templates_are_bounded() -> None:
    stop = TelemetryEvent("tool.execution.stop", {"duration": 7}, {"tool": "t", "operation": "o"}, "c1", 5)
    other = stop._replace(measurements={"duration": 8, "queue": 1.5}, correlation_id="c2", timestamp_ns=6)
    first, second = message_of(stop), message_of(other)
    assert first == pb.TelemetryEvent(
        event_parts=["tool", "execution", "stop"],
        metadata={"tool": "t", "operation": "o"},
        measurements={"duration": pb.TelemetryValue(int_value=7)},
        timestamp_ns=5,
        correlation_id="c1",
    )
    assert dict(second.measurements) == {
        "duration": pb.TelemetryValue(int_value=8),
        "queue": pb.TelemetryValue(float_value=1.5),
    }
    assert (second.correlation_id, second.timestamp_ns) == ("c2", 6)
    for n in range(telemetry.MAX_TEMPLATES + 10):  # callers choose tool and operation names
        message_of(stop._replace(metadata={"tool": f"t{n}"}))
    assert len(telemetry._templates) <= telemetry.MAX_TEMPLATES


def test_events_queued_by_many_threads_while_a_stream_takes_are_each_taken_once_in_order() -> None:
    """A stream takes while threads queue: no event is lost or taken twice, and each thread's events
    come out in the order it queued them."""
    stream = TelemetryStream(max_events=100_000)
    threads, per_thread = 4, 3000
    taken: list[TelemetryEvent] = []
    done = threading.Event()

    def take() -> None:
        while not done.is_set() or len(stream):
            taken.extend(stream.take_batch(0.0))

    def queue(thread: int) -> None:
        for n in range(per_thread):
            stream.emit("tool.execution.stop", {"duration": n}, {"tool": "t"}, f"{thread}")

    switch_s = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between any two steps, not every 5 ms
    try:
        taker = threading.Thread(target=take)
        taker.start()
        queuers = [threading.Thread(target=queue, args=(t,)) for t in range(threads)]
        for thread in queuers:
            thread.start()
        for thread in queuers:
            thread.join()
        done.set()
        taker.join(60.0)
    finally:
        sys.setswitchinterval(switch_s)
    for thread in range(threads):
        mine = [event.measurements["duration"] for event in taken if event.correlation_id == f"{thread}"]
        assert mine == list(range(per_thread))
    assert len(taken) == threads * per_thread and stream.dropped == 0
