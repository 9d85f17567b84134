"""`compilation-bridge serve` and the worker's stderr logs (correlation id, nothing on stdout)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from compilation_bridge.testing.session import CallError, SnakeBridgeSession
from compilation_bridge.testing.worker_process import WorkerProcess
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc

pytestmark = pytest.mark.timeout(120)


def test_serve_command_serves_and_stops(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "compilation_bridge",
            "serve",
            "--port",
            "0",
            "--ready-file",
            str(ready),
            "--platform",
            "cpu",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not (ready.exists() and ready.read_text().strip()):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        with grpc.insecure_channel(f"localhost:{ready.read_text().strip()}") as channel:
            stub = pb_grpc.BridgeServiceStub(channel)
            assert stub.Ping(pb.PingRequest(message="hi"), timeout=5).message == "Pong from Python: hi"
            session = SnakeBridgeSession(stub, "manual")
            cc = session.call_class("vllm.config", "CompilationConfig", [None, None, None])
            assert session.get_attr(cc, "backend") == "inductor"
    finally:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=10)
    assert process.returncode == 0
    assert stdout == b""
    assert b"serving on localhost:" in stderr


def test_logs_carry_the_correlation_id() -> None:
    worker = WorkerProcess.spawn(extra_env={"SNAKEPIT_LOG_LEVEL": "info"}, heartbeat_interval_s=None)
    try:
        session = SnakeBridgeSession(worker.stub, worker.session_id)
        request = session.request("snakebridge.call", session.base("os", "getcwd", [], {}))
        request.metadata["correlation_id"] = "corr-1234"
        response = worker.stub.ExecuteTool(request)
        assert not response.success
        with pytest.raises(CallError):
            session.call("os", "getcwd")
    finally:
        worker.terminate()
    log = worker.log_text()
    assert "[corr=corr-1234]" in log and "ImportError" in log
    assert os.path.exists(worker.log_path)
