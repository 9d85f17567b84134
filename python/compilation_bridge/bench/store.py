"""The ref store's benchmark: what it costs per call, what a pool gains, what Redis' caches save.

- Per call: the standard workload (construct -> get_attr -> compute_hash -> release_ref) against
  workers with the store off, on SQLite and (when `redis-server` is installed) on Redis, interleaved
  iteration by iteration so machine noise hits all alike; p50 per step and throughput, as ratios to off.
- Pool: N workers sharing one SQLite store against one worker, 2N client threads each with its own
  session and every call to a random worker (as Snakepit may route them), for a fixed time.
- Remote caches: a cold start (compile + first run) with no cache, then host A compiling with the Redis
  store (Inductor's remote caches on), another worker of host A rebuilding that model from the ref store
  (its local compile cache: a warm load), and host B, with its own empty folders, doing the same from
  Redis alone (Inductor's remote caches).

Figures only; asserts nothing. Every worker is a real process started the way Snakepit starts one.
"""

from __future__ import annotations

import functools
import os
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from compilation_bridge.bench import workload
from compilation_bridge.bench.stats import percentile
from compilation_bridge.bench.workload import STEPS
from compilation_bridge.testing.session import SnakeBridgeSession, wire_ref
from compilation_bridge.testing.worker_process import WorkerProcess, host_env

TARGETS = {"sqlite": 1.05, "redis": 1.10}  # p50 per call against the same worker with the store off


# ---------------------------------------------------------------------------------------- helpers


@contextmanager
def redis_server() -> Iterator[str | None]:
    """A throwaway Redis on a loopback port (None when redis-server is not installed)."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(port)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(10)


def _wait_port(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def _session(worker: WorkerProcess, session_id: str) -> SnakeBridgeSession:
    return SnakeBridgeSession(worker.stub, worker.session_id, session_id, timeout_s=60)


def _timed(call: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call(*args)
    return time.perf_counter() - started, result


def _same(session: SnakeBridgeSession) -> SnakeBridgeSession:
    return session


def round_trip(on: Callable[[], SnakeBridgeSession]) -> list[float]:
    """One iteration of the standard workload, each call on `on()`; the four call times."""
    session = on()
    took, ref = _timed(session.execute, *workload.construct(session.session_id))
    times = [took]
    for tool, payload in workload.on_ref(session.session_id, ref):
        times.append(_timed(on().execute, tool, payload)[0])
    return times


# ---------------------------------------------------------------------------------------- per call


def per_call(iterations: int, warmup: int) -> dict[str, Any]:
    with redis_server() as redis_url, tempfile.TemporaryDirectory(prefix="bench_store_") as tmp:
        settings = {"off": "off", "sqlite": "sqlite", **({"redis": redis_url} if redis_url else {})}
        workers = {
            name: WorkerProcess.spawn(
                heartbeat_interval_s=None,
                extra_env={
                    "COMPILATION_BRIDGE_REF_STORE": value,
                    "COMPILATION_BRIDGE_STATE_DIR": os.path.join(tmp, name),
                },
            )
            for name, value in settings.items()
        }
        try:
            samples = _interleaved(workers, iterations, warmup)
        finally:
            for worker in workers.values():
                worker.terminate()
    return _per_call_figures(samples, iterations)


def _interleaved(
    workers: dict[str, WorkerProcess], iterations: int, warmup: int
) -> dict[str, list[list[float]]]:
    sessions = {name: _session(worker, f"bench_{name}") for name, worker in workers.items()}
    samples: dict[str, list[list[float]]] = {name: [] for name in workers}
    for n in range(warmup + iterations):
        for name, session in sessions.items():
            times = round_trip(functools.partial(_same, session))
            if n >= warmup:
                samples[name].append(times)
    return samples


def _per_call_figures(samples: dict[str, list[list[float]]], iterations: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"iterations": iterations}
    for name, rows in samples.items():
        every = [t for row in rows for t in row]
        figures[name] = {
            "p50_us": percentile(every, 0.5) * 1e6,
            "calls_per_s": len(every) / sum(every),
            **{f"{step}_p50_us": percentile([r[i] for r in rows], 0.5) * 1e6 for i, step in enumerate(STEPS)},
        }
    off = figures["off"]
    for name in samples:
        if name != "off":
            figures[name]["p50_ratio"] = figures[name]["p50_us"] / off["p50_us"]
            figures[name]["throughput_ratio"] = figures[name]["calls_per_s"] / off["calls_per_s"]
    return figures


# ---------------------------------------------------------------------------------------- pool


def pool_throughput(size: int, seconds: float) -> dict[str, Any]:
    figures: dict[str, Any] = {"workers": size, "clients": 2 * size, "seconds": seconds}
    for n in (1, size):
        with tempfile.TemporaryDirectory(prefix="bench_pool_") as tmp:
            env = {"COMPILATION_BRIDGE_STATE_DIR": tmp}
            workers = [WorkerProcess.spawn(heartbeat_interval_s=None, extra_env=env) for _ in range(n)]
            try:
                figures[f"{n}_worker_calls_per_s"] = _drive(workers, 2 * size, seconds)
            finally:
                for worker in workers:
                    worker.terminate()
    figures["speedup"] = figures[f"{size}_worker_calls_per_s"] / figures["1_worker_calls_per_s"]
    return figures


def _drive(workers: list[WorkerProcess], clients: int, seconds: float) -> float:
    """Calls per second that `clients` threads complete, each call on a random worker."""
    deadline = time.monotonic() + seconds
    counts = [0] * clients

    def client(index: int) -> None:
        sessions = [_session(worker, f"bench_pool_{index}") for worker in workers]
        while time.monotonic() < deadline:
            round_trip(lambda: random.choice(sessions))
            counts[index] += len(STEPS)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.monotonic() - started)


# ---------------------------------------------------------------------------------------- remote caches


def remote_cache_start(tokens: int = 16) -> dict[str, Any]:
    with redis_server() as redis_url, tempfile.TemporaryDirectory(prefix="bench_hosts_") as tmp:
        if redis_url is None:
            return {"skipped": "redis-server is not installed"}
        no_cache = _cold_start(host_env(Path(tmp, "alone"), "sqlite"), tokens)
        remote = {"COMPILATION_BRIDGE_INDUCTOR_REMOTE_CACHE": "1"}
        host_a = {**host_env(Path(tmp, "a"), redis_url), **remote}
        host_b = {**host_env(Path(tmp, "b"), redis_url), **remote}
        return {"tokens": tokens, "no_cache_s": no_cache, **_across_hosts(host_a, host_b, tokens)}


def _compile_and_run(session: SnakeBridgeSession, tokens: int) -> tuple[float, dict[str, Any]]:
    def go() -> dict[str, Any]:
        cc = session.call_class("vllm.config", "CompilationConfig", [None, 3, None], backend="inductor")
        model = session.call("compilation_bridge.compile", "compile_model", [wire_ref(cc)], max_num_tokens=64)
        session.call_method(model, "run", [tokens])
        return model

    return _timed(go)


def _warm_imports(session: SnakeBridgeSession) -> None:
    """Import torch, Dynamo and Inductor first: a worker pays that once at start, not per compile."""
    cc = session.call_class("vllm.config", "CompilationConfig", [None, 0, None])
    session.call("compilation_bridge.compile", "compile_model", [wire_ref(cc)], max_num_tokens=4)


def _cold_start(env: dict[str, str], tokens: int) -> float:
    worker = WorkerProcess.spawn(heartbeat_interval_s=None, extra_env=env)
    try:
        return _compile_and_run(_ready_session(worker), tokens)[0]
    finally:
        worker.terminate()


def _across_hosts(env_a: dict[str, str], env_b: dict[str, str], tokens: int) -> dict[str, float]:
    worker_a = WorkerProcess.spawn(heartbeat_interval_s=None, extra_env=env_a)
    try:
        host_a_s, model = _compile_and_run(_ready_session(worker_a), tokens)
    finally:
        worker_a.terminate()
    from compilation_bridge.refs.keys import KEY_FILE

    Path(env_b["COMPILATION_BRIDGE_STATE_DIR"]).mkdir(mode=0o700)
    shutil.copy2(
        Path(env_a["COMPILATION_BRIDGE_STATE_DIR"]) / KEY_FILE, env_b["COMPILATION_BRIDGE_STATE_DIR"]
    )
    return {
        "host_a_cold_s": host_a_s,
        "host_a_other_worker_s": _rebuild_and_run(env_a, model, tokens),
        "host_b_from_remote_s": _rebuild_and_run(env_b, model, tokens),
    }


def _ready_session(worker: WorkerProcess) -> SnakeBridgeSession:
    session = _session(worker, "bench_hosts")
    session.timeout_s = 600
    _warm_imports(session)
    return session


def _rebuild_and_run(env: dict[str, str], model: dict[str, Any], tokens: int) -> float:
    """A fresh worker with `env` runs `model` (made elsewhere): it rebuilds it from the ref store."""
    worker = WorkerProcess.spawn(heartbeat_interval_s=None, extra_env=env)
    try:
        session = _ready_session(worker)
        return _timed(lambda: session.call_method(model, "run", [tokens]))[0]
    finally:
        worker.terminate()


# ---------------------------------------------------------------------------------------- all


def measure(iterations: int, warmup: int, pool_seconds: float = 10.0) -> dict[str, Any]:
    size = max(2, min(4, os.cpu_count() or 2))
    return {
        "per_call": per_call(iterations, warmup),
        "pool": pool_throughput(size, pool_seconds),
        "remote_cache": remote_cache_start(),
    }


def report(figures: dict[str, Any]) -> None:
    calls = figures["per_call"]
    print(f"ref store, standard workload ({calls['iterations']} iterations, interleaved)")
    print(f"{'store':<8}{'p50':>9}{'calls/s':>9}{'ratio':>8}" + "".join(f"{s:>14}" for s in STEPS))
    for name in ("off", "sqlite", "redis"):
        if name in calls:
            row = calls[name]
            ratio = f"{row.get('p50_ratio', 1.0):.2f}x"
            steps = "".join(f"{row[f'{s}_p50_us']:>12.0f}us" for s in STEPS)
            print(f"{name:<8}{row['p50_us']:>7.0f}us{row['calls_per_s']:>9.0f}{ratio:>8}{steps}")
    print("(targets: p50 ratio " + ", ".join(f"{name} <= {ratio}x" for name, ratio in TARGETS.items()) + ")")
    pool = figures["pool"]
    n = pool["workers"]
    print(
        f"pool of {n} workers, {pool['clients']} clients, random routing: "
        f"{pool[f'{n}_worker_calls_per_s']:.0f} calls/s against one worker's "
        f"{pool['1_worker_calls_per_s']:.0f} ({pool['speedup']:.2f}x; {os.cpu_count()} cores)"
    )
    remote = figures["remote_cache"]
    if "skipped" in remote:
        print(f"remote caches: skipped ({remote['skipped']})")
        return
    print(
        f"compile + first run({remote['tokens']}): no cache {remote['no_cache_s']:.1f} s; "
        f"host A with Redis {remote['host_a_cold_s']:.1f} s; another worker on host A (compile cache) "
        f"{remote['host_a_other_worker_s']:.1f} s; host B from A's remote caches "
        f"{remote['host_b_from_remote_s']:.1f} s"
    )
