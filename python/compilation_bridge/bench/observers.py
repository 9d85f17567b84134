"""The observers benchmark: what watching the worker costs per call.

Two workers started as Snakepit starts them, one with every observer on and one with none, get the
standard workload (`workload`) interleaved iteration by iteration, the order alternating, so that machine
noise hits both alike. "On" is what an operator and Snakepit switch on, so whatever observers the worker
registers with its hub for them are measured: OpenTelemetry exporting to an OTLP/HTTP collector on
loopback (`SNAKEPIT_OTEL_ENDPOINT`; `testing.otlp_collector`), and Snakepit's telemetry stream, opened
and enabled as Snakepit does on every worker. The collector and the stream's reader each run in a process
of their own (`sidecar`), as they do in production, not in the one making the calls. "Off" has both off,
so no observer watches a call and nothing is built for one. `alone` then measures each observer on by
itself against off, each in a run of its own, so that the figure shows which observer its cost comes
from, and `grpc_message_cpu_us` what gRPC itself costs each message the stream sends, in a bare servicer
(the floor under the stream's cost). Prints figures; asserts nothing. Needs the `otel` extra (the
collector decodes OTLP).
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections.abc import Collection, Iterator
from typing import Any

from compilation_bridge.bench import stream_reader, workload
from compilation_bridge.bench.bare import BareProcess
from compilation_bridge.bench.sidecar import Sidecar
from compilation_bridge.bench.stats import summary
from compilation_bridge.settings import OTEL_CONSOLE_ENV, OTEL_ENDPOINT_ENV
from compilation_bridge.testing.session import SnakeBridgeSession
from compilation_bridge.testing.telemetry_client import toggle
from compilation_bridge.testing.worker_process import WorkerProcess
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb

TARGET_P50_RATIO = 1.03
SIDES = ("on", "off")
OTEL, STREAM = "otel", "stream"
OBSERVERS = {OTEL: "OpenTelemetry", STREAM: "the telemetry stream"}  # what "on" can switch on
OFF_ENV = {OTEL_ENDPOINT_ENV: "", OTEL_CONSOLE_ENV: "0"}  # whatever the bench's own environment says


def telemetry_stream(worker: WorkerProcess) -> Sidecar:
    """Snakepit's telemetry stream to one worker, read in a process of its own as Snakepit reads it
    (`stream_reader`): opened, enabled with a toggle, its events counted until it is closed."""
    reader = Sidecar("compilation_bridge.bench.stream_reader", [str(worker.port)])
    if reader.ready != stream_reader.OPEN:
        reader.close()
        raise RuntimeError(f"the telemetry stream reader said {reader.ready!r}")
    return reader


def _timed(worker: WorkerProcess, session: SnakeBridgeSession, tool: str, payload: Any) -> tuple[float, Any]:
    request = session.request(tool, payload)
    started = time.perf_counter()
    response = worker.stub.ExecuteTool(request, timeout=30)
    elapsed = time.perf_counter() - started
    if not response.success:
        raise RuntimeError(f"{tool} failed: {response.error_message}")
    return elapsed, response


def _workload(session: SnakeBridgeSession, worker: WorkerProcess) -> list[float]:
    """One workload iteration on `worker`: each call's time."""
    elapsed, response = _timed(worker, session, *workload.construct(session.session_id))
    timings = [elapsed]
    for tool, payload in workload.on_ref(session.session_id, json.loads(response.result.value)):
        timings.append(_timed(worker, session, tool, payload)[0])
    return timings


def _cpu_s(pid: int) -> float:
    """A process's CPU time so far, all threads (Linux /proc), in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _sample(
    workers: dict[str, WorkerProcess], iterations: int, warmup: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Each side's call times, and the CPU time each worker spent meanwhile (its threads included: the
    observers' work off the call path shows there)."""
    sessions = {
        side: SnakeBridgeSession(w.stub, w.session_id, session_id="bench") for side, w in workers.items()
    }
    samples: dict[str, list[float]] = {side: [] for side in SIDES}
    cpu: dict[str, float] = {}
    for n in range(warmup + iterations):
        if n == warmup:
            cpu = {side: _cpu_s(workers[side].process.pid) for side in SIDES}
        for side in SIDES if n % 2 else reversed(SIDES):
            timings = _workload(sessions[side], workers[side])
            if n >= warmup:
                samples[side] += timings
    return samples, {side: _cpu_s(workers[side].process.pid) - cpu[side] for side in SIDES}


def measure(iterations: int, warmup: int, on: Collection[str] = tuple(OBSERVERS)) -> dict[str, Any]:
    """The "on" worker with the observers named in `on` (OBSERVERS' keys) against one with none."""
    collector = Sidecar("compilation_bridge.bench.collector_process") if OTEL in on else None
    workers: dict[str, WorkerProcess] = {}
    stream: Sidecar | None = None
    events = spans = 0
    try:
        on_env = {OTEL_ENDPOINT_ENV: collector.ready} if collector is not None else OFF_ENV
        workers["on"] = WorkerProcess.spawn(heartbeat_interval_s=None, extra_env=on_env)
        workers["off"] = WorkerProcess.spawn(heartbeat_interval_s=None, extra_env=OFF_ENV)
        if STREAM in on:
            stream = telemetry_stream(workers["on"])
        samples, cpu_s = _sample(workers, iterations, warmup)
    finally:
        if stream is not None:
            events = stream.close()
        for worker in workers.values():
            worker.terminate()  # the "on" worker delivers its last spans as it stops
        if collector is not None:
            spans = collector.close()
    result: dict[str, Any] = {side: summary(samples[side]) for side in SIDES}
    result["observers_on"] = [name for name in OBSERVERS if name in on]
    result["p50_ratio"] = result["on"]["p50_us"] / result["off"]["p50_us"]
    result["p99_ratio"] = result["on"]["p99_us"] / result["off"]["p99_us"]
    result["target_ratio"] = TARGET_P50_RATIO
    for side in SIDES:
        result[side]["cpu_us_per_call"] = cpu_s[side] / len(samples[side]) * 1e6
    # Evidence that "on" was on: what the observers delivered.
    result["spans_exported"] = spans
    result["telemetry_events"] = events
    result["calls_per_side"] = len(samples["on"])
    return result


def grpc_message_cpu_us(messages: int = 20_000) -> float:
    """What gRPC itself costs a telemetry message: the CPU, all threads, of a bare servicer
    (`bare.BareServicer`) sending `messages` constant events on StreamTelemetry, in microseconds a
    message. The worker sends two a call; this is the floor under what the stream costs it."""
    server = BareProcess()
    controls_open = threading.Event()
    try:
        events = server.stub.StreamTelemetry(_controls(controls_open), timeout=600)
        next(events)  # the stream is up: what follows is sending alone
        started = _cpu_s(server.process.pid)
        for _ in itertools.islice(events, messages):
            pass
        spent = _cpu_s(server.process.pid) - started
        events.cancel()
    finally:
        controls_open.set()
        server.stop()
    return spent / messages * 1e6


def _controls(until: threading.Event) -> Iterator[pb.TelemetryControl]:
    """Snakepit's opening toggle, then a request stream left open, as Snakepit leaves it."""
    yield toggle(True)
    until.wait()


def alone(iterations: int, warmup: int) -> dict[str, dict[str, Any]]:
    """Each observer on by itself against none, a run each."""
    return {name: measure(iterations, warmup, on=(name,)) for name in OBSERVERS}


def report(result: dict[str, Any]) -> None:
    on, off = result["on"], result["off"]
    named = " and ".join(OBSERVERS[name] for name in result["observers_on"])
    print(f"observers on ({named}) vs off ({result['calls_per_side']} calls each, interleaved)")
    print(
        f"per call p50: on {on['p50_us']:.0f}us, off {off['p50_us']:.0f}us, "
        f"ratio {result['p50_ratio']:.3f}x (target <= {result['target_ratio']}x)"
    )
    print(
        f"per call p99: on {on['p99_us']:.0f}us, off {off['p99_us']:.0f}us, ratio {result['p99_ratio']:.3f}x"
    )
    print(
        f"worker CPU per call (all its threads): on {on['cpu_us_per_call']:.0f}us, "
        f"off {off['cpu_us_per_call']:.0f}us"
    )
    print(
        f"delivered while on: {result['spans_exported']} spans to the loopback OTLP collector, "
        f"{result['telemetry_events']} events on the telemetry stream"
    )


def report_floor(cpu_us: float) -> None:
    print(
        f"gRPC itself, a bare servicer sending telemetry events: {cpu_us:.0f}us of CPU a message "
        f"({2 * cpu_us:.0f}us a call at two events)"
    )


def report_alone(results: dict[str, dict[str, Any]]) -> None:
    print("each observer alone vs off (a run each):")
    for name, result in results.items():
        on, off = result["on"], result["off"]
        print(
            f"  {OBSERVERS[name]}: per call p50 ratio {result['p50_ratio']:.3f}x "
            f"(on {on['p50_us']:.0f}us, off {off['p50_us']:.0f}us), worker CPU per call "
            f"{on['cpu_us_per_call']:.0f}us against {off['cpu_us_per_call']:.0f}us"
        )
