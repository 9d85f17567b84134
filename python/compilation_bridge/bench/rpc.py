"""The RPC benchmark: what the worker costs per call, compared with a bare grpcio servicer.

Both servers are separate processes started the way Snakepit starts workers; one client thread sends
the standard workload (`workload`) to each, interleaved iteration by iteration so that machine noise
hits both alike. The bare servicer (`bare`) answers every ExecuteTool with a constant, so the ratio is
what our decoding, dispatch, config work and encoding add. Also measured: readiness after spawn,
memory, heartbeat latency while calls run back to back, and SIGTERM exit time (idle and during a long
call). Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from compilation_bridge.bench import workload
from compilation_bridge.bench.bare import BareProcess
from compilation_bridge.bench.stats import median_of_runs, percentile, summary
from compilation_bridge.testing.session import SnakeBridgeSession
from compilation_bridge.testing.worker_process import WorkerProcess
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc

STEPS = workload.STEPS
TARGET_P50_RATIO = 1.3
Samples = dict[str, dict[str, list[float]]]  # side ("ours", "bare") -> step -> seconds


def _timed(stub: pb_grpc.BridgeServiceStub, request: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    response = stub.ExecuteTool(request, timeout=30)
    return time.perf_counter() - started, response


def _ours(stub: pb_grpc.BridgeServiceStub, request: Any, tool: str) -> tuple[float, Any]:
    elapsed, response = _timed(stub, request)
    if not response.success:
        raise RuntimeError(f"{tool} failed: {response.error_message}")
    return elapsed, response


def _iteration(
    session: SnakeBridgeSession, ours: WorkerProcess, bare: BareProcess, samples: Samples | None
) -> None:
    """One workload iteration against our worker, then the very same requests against the bare one."""
    tool, payload = workload.construct(session.session_id)
    construct = session.request(tool, payload)
    elapsed, response = _ours(ours.stub, construct, tool)
    requests, timings = [construct], [elapsed]
    for tool, payload in workload.on_ref(session.session_id, json.loads(response.result.value)):
        request = session.request(tool, payload)
        requests.append(request)
        timings.append(_ours(ours.stub, request, tool)[0])
    bare_timings = [_timed(bare.stub, request)[0] for request in requests]
    if samples is not None:
        for step, ours_s, bare_s in zip(STEPS, timings, bare_timings, strict=True):
            samples["ours"][step].append(ours_s)
            samples["bare"][step].append(bare_s)


def _heartbeats_during(worker: WorkerProcess, stop: threading.Event, latencies: list[float]) -> None:
    while not stop.wait(0.05):
        latency = worker.heartbeat_once(timeout_s=10)
        if latency >= 0:
            latencies.append(latency)


def _sample(
    worker: WorkerProcess, bare: BareProcess, iterations: int, warmup: int
) -> tuple[Samples, list[float]]:
    """The workload's call times on both sides, and heartbeat latencies taken meanwhile."""
    session = SnakeBridgeSession(worker.stub, worker.session_id, session_id="bench")
    for _ in range(warmup):
        _iteration(session, worker, bare, None)
    samples: Samples = {side: {step: [] for step in STEPS} for side in ("ours", "bare")}
    stop, heartbeat_latencies = threading.Event(), list[float]()
    beats = threading.Thread(target=_heartbeats_during, args=(worker, stop, heartbeat_latencies), daemon=True)
    beats.start()
    try:
        for _ in range(iterations):
            _iteration(session, worker, bare, samples)
    finally:
        stop.set()
        beats.join()
    return samples, heartbeat_latencies


def run_once(iterations: int, warmup: int) -> dict[str, Any]:
    worker = WorkerProcess.spawn(heartbeat_interval_s=None)
    bare = BareProcess()
    try:
        ready_s, rss_idle_kib = worker.ready_after_s, worker.rss_kib()
        samples, heartbeat_latencies = _sample(worker, bare, iterations, warmup)
        rss_busy_kib = worker.rss_kib()
    finally:
        worker.terminate()
        bare.stop()
    result: dict[str, Any] = {
        "ready_s": ready_s,
        "rss_idle_mib": rss_idle_kib / 1024,
        "rss_mib": rss_busy_kib / 1024,
    }
    for side in ("ours", "bare"):
        every = [v for step in STEPS for v in samples[side][step]]
        result[side] = {"all": summary(every), **{step: summary(samples[side][step]) for step in STEPS}}
    result["p50_ratio"] = result["ours"]["all"]["p50_us"] / result["bare"]["all"]["p50_us"]
    result["p99_ratio"] = result["ours"]["all"]["p99_us"] / result["bare"]["all"]["p99_us"]
    result["throughput_ratio"] = result["ours"]["all"]["calls_per_s"] / result["bare"]["all"]["calls_per_s"]
    result["heartbeat_p99_ms"] = percentile(heartbeat_latencies, 0.99) * 1e3 if heartbeat_latencies else None
    result.update(_sigterm_times())
    return result


def _sigterm_times() -> dict[str, float]:
    """SIGTERM -> exit, idle and while a 30 s call runs (uses the test-only spin hook)."""
    times = {}
    for busy in (False, True):
        worker = WorkerProcess.spawn(
            heartbeat_interval_s=None, extra_env={"COMPILATION_BRIDGE_TEST_HOOKS": "1"}
        )
        session = SnakeBridgeSession(worker.stub, worker.session_id, session_id="term")
        if busy:
            request = session.request(
                "snakebridge.call", session.base("compilation_bridge.testing", "spin", [30], {})
            )
            in_flight = worker.stub.ExecuteTool.future(request)  # keep it: a dropped future cancels the call
            time.sleep(0.3)
        code, elapsed = worker.terminate()
        if busy and not in_flight.done():
            in_flight.cancel()
        times["sigterm_busy_s" if busy else "sigterm_idle_s"] = elapsed if code == 0 else float("nan")
    return times


def measure(iterations: int, warmup: int, repeat: int = 1) -> dict[str, Any]:
    """`repeat` runs; every figure is the median across runs, and `runs` lists each run's p50 ratio."""
    results = []
    for n in range(max(1, repeat)):
        results.append(run_once(iterations, warmup))
        if repeat > 1:
            print(f"run {n + 1}: p50 ratio {results[-1]['p50_ratio']:.2f}x", file=sys.stderr)
    figures = median_of_runs(results)
    figures["runs"] = [r["p50_ratio"] for r in results]
    return figures


def report(result: dict[str, Any]) -> None:
    print(f"compilation-bridge bench ({len(result['runs'])} run(s); medians across runs)")
    header = ("step", "ours p50", "bare p50", "ratio", "ours p99", "bare p99", "ratio")
    print(f"{header[0]:<14}" + "".join(f"{h:>10}" for h in header[1:]))
    for step in ("all", *STEPS):
        ours, bare = result["ours"][step], result["bare"][step]
        cells = []
        for key in ("p50_us", "p99_us"):
            cells += [f"{ours[key]:.0f}us", f"{bare[key]:.0f}us", f"{ours[key] / bare[key]:.2f}x"]
        print(f"{step:<14}" + "".join(f"{c:>10}" for c in cells))
    ours_tp, bare_tp = result["ours"]["all"]["calls_per_s"], result["bare"]["all"]["calls_per_s"]
    ratio = result["throughput_ratio"]
    print(f"throughput (one client): ours {ours_tp:.0f}/s, bare {bare_tp:.0f}/s, ratio {ratio:.2f}x")
    p50, p99 = result["p50_ratio"], result["p99_ratio"]
    print(f"p50 ratio {p50:.2f}x (target <= {TARGET_P50_RATIO}x), p99 ratio {p99:.2f}x")
    print(
        f"ready after spawn {result['ready_s'] * 1000:.0f} ms; RSS idle {result['rss_idle_mib']:.0f} MiB, "
        f"after the run {result['rss_mib']:.0f} MiB"
    )
    if result["heartbeat_p99_ms"] is not None:
        print(f"heartbeat p99 while calls run back to back: {result['heartbeat_p99_ms']:.1f} ms")
    print(
        f"SIGTERM -> exit 0: idle {result['sigterm_idle_s'] * 1000:.0f} ms, "
        f"during a long call {result['sigterm_busy_s'] * 1000:.0f} ms"
    )
