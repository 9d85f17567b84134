"""`compilation-bridge bench`: every benchmark in one run, each as a ratio against its baseline.

RPC (below), the Erlang port against gRPC (`bench_port`), compile: ours against plain torch.compile,
cold and warm, compiled against eager, heartbeats during a compile (`bench_compile`), and the ref
store (`bench_store`: per call on and off, a pool against one worker, a cold start from Redis' remote
caches); `--markdown PATH` writes the table of ratios (`bench_table`).

The RPC benchmark: what the worker costs per call, compared with a bare grpcio servicer.

Both servers are separate processes started the way Snakepit starts workers; one client thread sends
the same fixed workload (construct -> get_attr -> compute_hash -> release_ref, SnakeBridge payloads) to
each, interleaved iteration by iteration so that machine noise hits both alike. The bare servicer
answers every ExecuteTool with a constant, so the ratio is what our decoding, dispatch, config work and
encoding add. Also measured: readiness after spawn, memory, heartbeat latency while calls run back to
back, and SIGTERM exit time (idle and during a long call). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

NAME = "bench"
HELP = (
    "every benchmark in one run (RPC vs bare grpcio, port vs gRPC, compile: ours vs plain torch.compile "
    "cold and warm, compiled vs eager, heartbeats; ref store on/off, pool, remote caches)"
)
STEPS = ("construct", "get_attr", "compute_hash", "release_ref")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--iterations", type=int, default=2000, help="workload iterations per run")
    parser.add_argument("--warmup", type=int, default=200, help="iterations before measuring")
    parser.add_argument("--repeat", type=int, default=1, help="runs; the summary gives the median of runs")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument(
        "--only",
        choices=("rpc", "port", "compile", "store"),
        action="append",
        help="run only these benchmarks (repeatable; default: all four)",
    )
    parser.add_argument("--markdown", metavar="PATH", help="also write the table of ratios to PATH")
    parser.add_argument(
        "--compile-threads",
        type=int,
        default=1,
        help="OMP_NUM_THREADS for the compile benchmark (1 gives comparable figures on a shared machine)",
    )


# ---------------------------------------------------------------------------------------- bare servicer


def serve_bare(ready_file: str) -> None:
    """A BridgeService that answers every call with a constant: the baseline (runs in its own process)."""
    import grpc

    from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
    from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
    from compilation_bridge.transport.readyfile import write_ready_file

    class Bare(pb_grpc.BridgeServiceServicer):
        def Ping(self, request: Any, context: Any) -> Any:
            return pb.PingResponse(message="pong")

        def InitializeSession(self, request: Any, context: Any) -> Any:
            return pb.InitializeSessionResponse(success=True)

        def Heartbeat(self, request: Any, context: Any) -> Any:
            return pb.HeartbeatResponse(session_valid=True)

        def ExecuteTool(self, request: Any, context: Any) -> Any:
            response = pb.ExecuteToolResponse(success=True)
            response.result.type_url = "type.googleapis.com/snakepit.string"
            response.result.value = b'"ok"'
            return response

    server = grpc.server(ThreadPoolExecutor(max_workers=16))
    pb_grpc.add_BridgeServiceServicer_to_server(Bare(), server)
    port = server.add_insecure_port("localhost:0")
    server.start()
    write_ready_file(ready_file, port)
    server.wait_for_termination()


class BareProcess:
    def __init__(self) -> None:
        import grpc

        from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc

        ready = os.path.join(tempfile.mkdtemp(prefix="bench_bare_"), "ready")
        code = f"from compilation_bridge.commands.bench import serve_bare; serve_bare({ready!r})"
        from compilation_bridge.transport.snakepit_client import snakepit_env

        # The same environment Snakepit gives a worker (GRPC_POLL_STRATEGY=poll, one BLAS thread...).
        env = snakepit_env(ready)
        self.process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 30
        while not (os.path.exists(ready) and Path(ready).read_text().strip()):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("the bare servicer did not start")
            time.sleep(0.01)
        self.channel = grpc.insecure_channel(f"localhost:{Path(ready).read_text().strip()}")
        self.stub = pb_grpc.BridgeServiceStub(self.channel)

    def stop(self) -> None:
        self.channel.close()
        self.process.terminate()
        self.process.wait(10)


# ---------------------------------------------------------------------------------------- measuring


def _timed(stub: Any, request: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    response = stub.ExecuteTool(request, timeout=30)
    return time.perf_counter() - started, response


def _iteration(session: Any, ours: Any, bare: Any, samples: dict[str, dict[str, list[float]]] | None) -> None:
    """One workload iteration against our worker, then the very same requests against the bare one."""
    requests = []
    construct = session.request(
        "snakebridge.call",
        {
            **session.base("vllm.config", "__init__", [None, None, None], {"cache_dir": "/tmp/bench"}),
            "call_type": "class",
            "class": "CompilationConfig",
        },
    )
    requests.append(construct)
    elapsed, response = _timed(ours.stub, construct)
    timings = [elapsed]
    if not response.success:
        raise RuntimeError(f"construct failed: {response.error_message}")
    ref = json.loads(response.result.value)
    get_attr = session.for_ref(ref, "mode", [], {})
    get_attr.update(call_type="get_attr", attr="mode")
    compute_hash = session.for_ref(ref, "compute_hash", [], {})
    compute_hash["call_type"] = "method"
    from compilation_bridge.transport.snakepit_client import wire_ref

    release = {
        "protocol_version": 1,
        "min_supported_version": 1,
        "ref": wire_ref(ref),
        "session_id": ref["session_id"],
    }
    for tool, payload in (
        ("snakebridge.call", get_attr),
        ("snakebridge.call", compute_hash),
        ("snakebridge.release_ref", release),
    ):
        request = session.request(tool, payload)
        requests.append(request)
        elapsed, response = _timed(ours.stub, request)
        if not response.success:
            raise RuntimeError(f"{tool} failed: {response.error_message}")
        timings.append(elapsed)
    bare_timings = [_timed(bare.stub, request)[0] for request in requests]
    if samples is not None:
        for step, ours_s, bare_s in zip(STEPS, timings, bare_timings, strict=True):
            samples["ours"][step].append(ours_s)
            samples["bare"][step].append(bare_s)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "p50_us": _percentile(values, 0.50) * 1e6,
        "p99_us": _percentile(values, 0.99) * 1e6,
        "calls_per_s": len(values) / sum(values),
    }


def _heartbeats_during(worker: Any, stop: threading.Event, latencies: list[float]) -> None:
    while not stop.wait(0.05):
        latency = worker.heartbeat_once(timeout_s=10)
        if latency >= 0:
            latencies.append(latency)


def run_once(iterations: int, warmup: int) -> dict[str, Any]:
    from compilation_bridge.transport.snakepit_client import SnakeBridgeSession, WorkerProcess

    worker = WorkerProcess.spawn(heartbeat_interval_s=None)
    bare = BareProcess()
    try:
        ready_s, rss_idle_kib = worker.ready_after_s, worker.rss_kib()
        session = SnakeBridgeSession(worker.stub, worker.session_id, session_id="bench")
        for _ in range(warmup):
            _iteration(session, worker, bare, None)
        samples: dict[str, dict[str, list[float]]] = {k: {s: [] for s in STEPS} for k in ("ours", "bare")}
        stop, heartbeat_latencies = threading.Event(), list[float]()
        beats = threading.Thread(
            target=_heartbeats_during, args=(worker, stop, heartbeat_latencies), daemon=True
        )
        beats.start()
        for _ in range(iterations):
            _iteration(session, worker, bare, samples)
        stop.set()
        beats.join()
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
        result[side] = {"all": _summary(every), **{step: _summary(samples[side][step]) for step in STEPS}}
    result["p50_ratio"] = result["ours"]["all"]["p50_us"] / result["bare"]["all"]["p50_us"]
    result["p99_ratio"] = result["ours"]["all"]["p99_us"] / result["bare"]["all"]["p99_us"]
    result["throughput_ratio"] = result["ours"]["all"]["calls_per_s"] / result["bare"]["all"]["calls_per_s"]
    result["heartbeat_p99_ms"] = _percentile(heartbeat_latencies, 0.99) * 1e3 if heartbeat_latencies else None
    result.update(_sigterm_times())
    return result


def _sigterm_times() -> dict[str, float]:
    """SIGTERM -> exit, idle and while a 30 s call runs (uses the test-only sleep hook)."""
    from compilation_bridge.transport.snakepit_client import SnakeBridgeSession, WorkerProcess

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


def _print(result: dict[str, Any], runs: int) -> None:
    print(f"compilation-bridge bench ({runs} run(s); medians across runs)")
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
    print(f"p50 ratio {result['p50_ratio']:.2f}x (target <= 1.3x), p99 ratio {result['p99_ratio']:.2f}x")
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


def _median(results: list[dict[str, Any]]) -> dict[str, Any]:
    def merge(values: list[Any]) -> Any:
        if isinstance(values[0], dict):
            return {key: merge([v[key] for v in values]) for key in values[0]}
        if values[0] is None:
            return None
        return statistics.median(values)

    return merge(results)


def _rpc(args: argparse.Namespace) -> dict[str, Any]:
    results = []
    for n in range(max(1, args.repeat)):
        results.append(run_once(args.iterations, args.warmup))
        if args.repeat > 1:
            print(f"run {n + 1}: p50 ratio {results[-1]['p50_ratio']:.2f}x", file=sys.stderr)
    summary = _median(results)
    summary["runs"] = [r["p50_ratio"] for r in results]
    if not args.json:
        _print(summary, len(results))
    return summary


def _port(args: argparse.Namespace) -> dict[str, Any]:
    from compilation_bridge.commands import bench_port

    figures = bench_port.measure(iterations=max(100, args.iterations // 2), warmup=args.warmup)
    if not args.json:
        bench_port.report(figures)
    return figures


def _compile(args: argparse.Namespace) -> dict[str, Any]:
    from compilation_bridge.commands.bench_compile import bench_compile

    out = sys.stderr if args.json else sys.stdout
    return bench_compile(threads=args.compile_threads, out=out)


def _store(args: argparse.Namespace) -> dict[str, Any]:
    from compilation_bridge.commands import bench_store

    figures = bench_store.measure(iterations=max(100, args.iterations // 2), warmup=args.warmup)
    if not args.json:
        bench_store.report(figures)
    return figures


def run(args: argparse.Namespace) -> int:
    chosen = set(args.only or ("rpc", "port", "compile", "store"))
    figures: dict[str, Any] = {}
    for name, bench in (("rpc", _rpc), ("port", _port), ("compile", _compile), ("store", _store)):
        if name in chosen:
            figures[name] = bench(args)
            if not args.json:
                print()
    if args.json:
        print(json.dumps(figures, indent=2))
    if args.markdown:
        from compilation_bridge.commands.bench_table import markdown

        table = markdown(figures.get("rpc"), figures.get("port"), figures.get("compile"))
        Path(args.markdown).write_text(table)
        print(f"wrote {args.markdown}", file=sys.stderr)
    return 0
