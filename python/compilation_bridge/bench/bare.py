"""The benchmarks' baseline: a bare grpcio BridgeService that answers every call with a constant.

It runs in its own process, started with the environment Snakepit gives a worker, so that the ratio
against our worker is what our decoding, dispatch, config work and encoding add. Its StreamTelemetry
sends one constant event after another for as long as the call lasts, reading the controls on a thread
of its own as the worker must: what gRPC itself costs a telemetry message (`observers`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from compilation_bridge.testing.worker_process import snakepit_env, wait_ready
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.readyfile import write_ready_file
from compilation_bridge.transport.server import bind_server


class BareServicer(pb_grpc.BridgeServiceServicer):
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

    def StreamTelemetry(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:
        threading.Thread(target=_drain, args=(request_iterator,), daemon=True).start()
        event = pb.TelemetryEvent(
            event_parts=["tool", "execution", "stop"],
            metadata={"tool": "snakebridge.call", "operation": "method:CompilationConfig.compute_hash"},
            timestamp_ns=1,
            correlation_id="0123456789abcdef0123456789abcdef",
        )
        event.measurements["duration"].int_value = 123_456
        while context.is_active():
            yield event


def _drain(controls: Iterator[Any]) -> None:
    try:
        for _ in controls:
            pass
    except grpc.RpcError:
        pass  # the call ended


def serve_bare(ready_file: str) -> None:
    """Serve the bare servicer on a free loopback port until killed (the child process's body)."""

    def new_server() -> grpc.Server:
        server = grpc.server(ThreadPoolExecutor(max_workers=16), options=[("grpc.so_reuseport", 0)])
        pb_grpc.add_BridgeServiceServicer_to_server(BareServicer(), server)
        return server

    # Bound as the worker binds (every loopback address), so the benchmark's "localhost" reaches it alone.
    server, port = bind_server(new_server, "localhost", 0)
    server.start()
    write_ready_file(ready_file, port)
    server.wait_for_termination()


class BareProcess:
    """The bare servicer in a child process, and a stub connected to it."""

    def __init__(self) -> None:
        ready = os.path.join(tempfile.mkdtemp(prefix="bench_bare_"), "ready")
        code = f"from compilation_bridge.bench.bare import serve_bare; serve_bare({ready!r})"
        # The same environment Snakepit gives a worker (GRPC_POLL_STRATEGY=poll, one BLAS thread...).
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.DEVNULL, env=snakepit_env(ready)
        )
        port = wait_ready(self.process, ready, timeout_s=30)
        self.channel = grpc.insecure_channel(f"localhost:{port}")
        self.stub = pb_grpc.BridgeServiceStub(self.channel)

    def stop(self) -> None:
        self.channel.close()
        self.process.terminate()
        self.process.wait(10)
