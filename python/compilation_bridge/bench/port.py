"""The Erlang-port transport against the gRPC path, on the standard workload, in one run.

Both workers are real processes: `python -m compilation_bridge port` on pipes (framed exactly as the
Elixir stub frames them) and the gRPC worker started as Snakepit starts it. One client sends the
standard workload (`workload`) to each,
interleaved iteration by iteration so that machine noise hits both alike, and times the whole workload
round trip. `measure()` returns the figures (the `bench` command can call it); `report()` prints them.
Run alone with `python -m compilation_bridge.bench.port [iterations]`. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import msgpack

from compilation_bridge.bench import workload
from compilation_bridge.bench.stats import percentile
from compilation_bridge.testing.session import SnakeBridgeSession
from compilation_bridge.testing.worker_process import WorkerProcess
from compilation_bridge.transport.port import HEADER, encode_frame

TARGET_RATIO = 0.5
SESSION = "bench_port"


class PortClient:
    """A port worker on pipes, one request at a time (what CompilationBridge.Worker does)."""

    def __init__(self) -> None:
        env = dict(os.environ, SNAKEPIT_LOG_LEVEL="error")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "compilation_bridge", "port"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.next_id = 0
        self._receive()  # the ready event

    def _receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        (size,) = HEADER.unpack(self.proc.stdout.read(HEADER.size))
        return msgpack.unpackb(self.proc.stdout.read(size), raw=False)

    def call(self, tool: str, payload: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None
        self.next_id += 1
        self.proc.stdin.write(encode_frame({"id": self.next_id, "tool": tool, "payload": payload}))
        self.proc.stdin.flush()
        reply = self._receive()
        if not reply.get("ok"):
            raise RuntimeError(f"{tool} failed: {reply.get('error')}")
        return reply["result"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


class GrpcClient:
    """The gRPC worker as Snakepit starts it, spoken to as SnakeBridge's runtime does."""

    def __init__(self) -> None:
        self.worker = WorkerProcess.spawn(heartbeat_interval_s=None)
        self.session = SnakeBridgeSession(self.worker.stub, self.worker.session_id, session_id=SESSION)

    def call(self, tool: str, payload: dict[str, Any]) -> Any:
        return self.session.execute(tool, payload)

    def close(self) -> None:
        self.worker.terminate()


def round_trip(client: PortClient | GrpcClient) -> float:
    """Seconds for one construct -> get_attr -> compute_hash -> release_ref round trip."""
    started = time.perf_counter()
    ref = client.call(*workload.construct(SESSION))
    for tool, payload in workload.on_ref(SESSION, ref):
        client.call(tool, payload)
    return time.perf_counter() - started


def measure(iterations: int = 1000, warmup: int = 100) -> dict[str, Any]:
    port, grpc = PortClient(), GrpcClient()
    try:
        for _ in range(warmup):
            round_trip(port)
            round_trip(grpc)
        samples: dict[str, list[float]] = {"port": [], "grpc": []}
        for _ in range(iterations):
            samples["port"].append(round_trip(port))
            samples["grpc"].append(round_trip(grpc))
    finally:
        port.close()
        grpc.close()
    result: dict[str, Any] = {"iterations": iterations}
    for side, values in samples.items():
        result[side] = {"p50_us": statistics.median(values) * 1e6, "p99_us": percentile(values, 0.99) * 1e6}
    result["p50_ratio"] = result["port"]["p50_us"] / result["grpc"]["p50_us"]
    result["p99_ratio"] = result["port"]["p99_us"] / result["grpc"]["p99_us"]
    result["target_ratio"] = TARGET_RATIO
    return result


def report(result: dict[str, Any]) -> None:
    print(
        f"port vs gRPC, standard workload round trip ({result['iterations']} iterations): "
        f"port p50 {result['port']['p50_us']:.0f} us, gRPC p50 {result['grpc']['p50_us']:.0f} us, "
        f"ratio {result['p50_ratio']:.2f}x (p99 ratio {result['p99_ratio']:.2f}x; target <= {TARGET_RATIO}x)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compilation_bridge.bench.port", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "iterations", nargs="?", type=int, default=1000, help="timed round trips per side (default 1000)"
    )
    args = parser.parse_args(argv)
    if args.iterations < 1:
        parser.error(f"argument iterations: expected a whole number of at least 1, got {args.iterations}")
    figures = measure(args.iterations)
    report(figures)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
