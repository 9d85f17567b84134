"""scripts/snakepit-python: Snakepit runs it as its Python and gets this project's worker instead."""

import os
import subprocess
import sys
from pathlib import Path

from compilation_bridge.testing.worker_process import WorkerProcess
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb

LAUNCHER = Path(__file__).resolve().parents[2] / "scripts" / "snakepit-python"


def test_launcher_replaces_snakepits_own_server(tmp_path: Path) -> None:
    # What Snakepit would pass as argv[1]: its own priv/python/grpc_server.py (never run here).
    snakepit_script = tmp_path / "priv" / "python" / "grpc_server.py"
    snakepit_script.parent.mkdir(parents=True)
    worker = WorkerProcess.spawn(
        python=str(LAUNCHER),
        script=snakepit_script,
        extra_env={"COMPILATION_BRIDGE_PYTHON": sys.executable},
        heartbeat_interval_s=None,
    )
    try:
        reply = worker.stub.Ping(pb.PingRequest(message="connection_test"), timeout=10)
        assert reply.message == "Pong from Python: connection_test"
        cmdline = Path(f"/proc/{worker.process.pid}/cmdline").read_bytes().split(b"\0")
        # Snakepit's orphan cleanup looks for python, grpc_server.py and the run id on the command line.
        assert "python" in Path(cmdline[0].decode()).name
        assert any(arg.endswith(b"python/grpc_server.py") and b"priv" not in arg for arg in cmdline)
        assert b"--snakepit-run-id" in cmdline
    finally:
        code, _seconds = worker.terminate()
    assert code == 0


def test_launcher_hands_other_invocations_to_python() -> None:
    # Snakepit's environment check and runtime identity run its Python with -c; they must exit at once.
    for code in ("import grpc", "import sys; print(sys.version.split()[0])"):
        done = subprocess.run(
            [str(LAUNCHER), "-c", code],
            env={**os.environ, "COMPILATION_BRIDGE_PYTHON": sys.executable},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == sys.version.split()[0]


def test_server_script_refuses_to_serve_without_snakepits_launch_arguments() -> None:
    # Run by hand (no run id, no ready file), it must exit instead of becoming an unmanaged server.
    env = {k: v for k, v in os.environ.items() if k != "SNAKEPIT_READY_FILE"}
    done = subprocess.run(
        [str(LAUNCHER), "grpc_server.py", "--adapter", "x", "--port", "0"],
        env={**env, "COMPILATION_BRIDGE_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "compilation-bridge serve" in done.stderr
