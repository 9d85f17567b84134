"""The Erlang-port transport against the gRPC path, on the standard workload, in one run.

Both workers are real processes: `python -m compilation_bridge port` on pipes (framed exactly as the
Elixir stub frames them) and the gRPC worker started as Snakepit starts it. One client sends the same
workload (construct -> get_attr -> compute_hash -> release_ref, SnakeBridge payloads) to each,
interleaved iteration by iteration so that machine noise hits both alike, and times the whole workload
round trip. `measure()` returns the figures (the `bench` command can call it); `report()` prints them.
Run alone with `python -m compilation_bridge.commands.bench_port`. Asserts nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import msgpack

from compilation_bridge.transport.port import HEADER, encode_frame
from compilation_bridge.transport.snakepit_client import snakebridge_payload

TARGET_RATIO = 0.5
SESSION = "bench_port"


def _payloads(ref: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """The workload's four SnakeBridge payloads (the last three need the constructed ref)."""
    base = snakebridge_payload(SESSION)
    if ref is None:
        construct = {
            **base,
            "call_type": "class",
            "class": "CompilationConfig",
            "function": "__init__",
            "args": [None, None, None],
            "kwargs": {"cache_dir": "/tmp/bench"},
        }
        return [("snakebridge.call", construct)]
    instance = {k: ref[k] for k in ("__type__", "__schema__", "id", "session_id", "python_module", "library")}
    return [
        (
            "snakebridge.call",
            {**base, "call_type": "get_attr", "function": "mode", "attr": "mode", "instance": instance},
        ),
        (
            "snakebridge.call",
            {**base, "call_type": "method", "function": "compute_hash", "instance": instance},
        ),
        (
            "snakebridge.release_ref",
            {"protocol_version": 1, "min_supported_version": 1, "ref": instance, "session_id": SESSION},
        ),
    ]


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
        from compilation_bridge.transport.snakepit_client import SnakeBridgeSession, WorkerProcess

        self.worker = WorkerProcess.spawn(heartbeat_interval_s=None)
        self.session = SnakeBridgeSession(self.worker.stub, self.worker.session_id, session_id=SESSION)

    def call(self, tool: str, payload: dict[str, Any]) -> Any:
        return self.session.execute(tool, payload)

    def close(self) -> None:
        self.worker.terminate()


def workload(client: PortClient | GrpcClient) -> float:
    """Seconds for one construct -> get_attr -> compute_hash -> release_ref round trip."""
    started = time.perf_counter()
    ((tool, payload),) = _payloads(None)
    ref = client.call(tool, payload)
    for tool, payload in _payloads(ref):
        client.call(tool, payload)
    return time.perf_counter() - started


def measure(iterations: int = 1000, warmup: int = 100) -> dict[str, Any]:
    port, grpc = PortClient(), GrpcClient()
    try:
        for _ in range(warmup):
            workload(port)
            workload(grpc)
        samples: dict[str, list[float]] = {"port": [], "grpc": []}
        for _ in range(iterations):
            samples["port"].append(workload(port))
            samples["grpc"].append(workload(grpc))
    finally:
        port.close()
        grpc.close()
    result: dict[str, Any] = {"iterations": iterations}
    for side, values in samples.items():
        ordered = sorted(values)
        result[side] = {
            "p50_us": statistics.median(values) * 1e6,
            "p99_us": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] * 1e6,
        }
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


if __name__ == "__main__":
    figures = measure(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
    report(figures)
    print(json.dumps(figures))
