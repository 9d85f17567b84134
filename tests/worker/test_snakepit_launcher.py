"""scripts/snakepit-python: Snakepit runs it as its Python and gets this project's worker instead."""

import sys
from pathlib import Path

from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.snakepit_client import WorkerProcess

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
