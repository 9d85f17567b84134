"""Snakepit's command line and environment, as the launch script reads them (docs/wire.md#launch-arguments,
docs/wire.md#environment)."""

from __future__ import annotations

import json
import subprocess
import sys

from compilation_bridge.transport.options import DEFAULT_HOST, HeartbeatConfig, parse


def test_snakepit_argv_in_any_order_with_unknown_flags() -> None:
    argv = [
        "--adapter",
        "snakebridge_adapter.SnakeBridgeAdapter",
        "--max-workers",
        "10",
        "--thread-safety-check",
        "--port",
        "0",
        "--elixir-address",
        "localhost:50051",
        "--snakepit-run-id",
        "k3x9a01",
        "--snakepit-instance-name",
        "dev_app_nonode_nohost",
        "--snakepit-instance-token",
        "t0k",
        "--user-extra=1",
    ]
    options = parse(argv, env={"SNAKEPIT_READY_FILE": "/tmp/r", "SNAKEPIT_PROCESS_GROUP": "1"})
    assert options.port == 0 and options.elixir_address == "localhost:50051"
    assert options.run_id == "k3x9a01" and options.instance_name == "dev_app_nonode_nohost"
    assert options.ready_file == "/tmp/r" and options.process_group
    assert options.host == DEFAULT_HOST
    assert "--max-workers" in options.ignored and "--user-extra=1" in options.ignored


def test_environment_fallbacks_and_heartbeat_config() -> None:
    config = {
        "enabled": True,
        "interval_ms": 500,
        "timeout_ms": 900,
        "max_missed_heartbeats": 5,
        "dependent": False,
    }
    options = parse(
        ["--heartbeat-interval-ms", "100", "--heartbeat-dependent"],
        env={
            "SNAKEPIT_GRPC_ADDRESS": "127.0.0.1:9",
            "SNAKEPIT_HEARTBEAT_CONFIG": json.dumps(config),
            "COMPILATION_BRIDGE_HOST": "0.0.0.0",
        },
    )
    assert options.elixir_address == "127.0.0.1:9" and options.host == "0.0.0.0"
    # The env JSON wins over CLI flags, as in the reference.
    assert options.heartbeat == HeartbeatConfig(True, 500, 900, 5, 0, False)
    assert parse([], env={"SNAKEPIT_HEARTBEAT_CONFIG": "{nope"}).heartbeat == HeartbeatConfig()


def test_importing_the_worker_prints_nothing() -> None:
    modules = ("transport.server", "transport.launch", "surface", "protocol.dispatch")
    code = "; ".join(f"import compilation_bridge.{name}" for name in modules)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert result.returncode == 0 and result.stdout == b"" and result.stderr == b""
