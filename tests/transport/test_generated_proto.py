"""The committed protobuf/gRPC modules are exactly what scripts/gen_proto.sh produces from the .proto."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "python/compilation_bridge/transport/generated"
# Lines that name the generator's version: a newer grpcio-tools must not make the tree look stale.
VERSION_LINE = re.compile(r"(Protobuf Python Version|GRPC_GENERATED_VERSION|^\s+\d+,\s*$)")


def _normalised(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if not VERSION_LINE.search(line)]


def test_generated_modules_are_up_to_date(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    subprocess.run(
        ["bash", str(ROOT / "scripts/gen_proto.sh"), str(tmp_path)],
        check=True,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )
    produced = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    assert produced == sorted(
        p.name for p in GENERATED.iterdir() if p.is_file() and p.suffix in (".py", ".pyi")
    )
    for name in produced:
        assert _normalised(tmp_path / name) == _normalised(GENERATED / name), (
            f"{name} is stale: run scripts/gen_proto.sh and commit the result"
        )


def test_service_matches_snakepit_wire_contract() -> None:
    from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb

    service = pb.DESCRIPTOR.services_by_name["BridgeService"]
    assert pb.DESCRIPTOR.package == "snakepit.bridge"
    assert [m.name for m in service.methods] == [
        "Ping",
        "InitializeSession",
        "CleanupSession",
        "GetSession",
        "Heartbeat",
        "ExecuteTool",
        "ExecuteStreamingTool",
        "RegisterTools",
        "GetExposedElixirTools",
        "ExecuteElixirTool",
        "StreamTelemetry",
    ]
    fields = {f.name: f.number for f in pb.ExecuteToolRequest.DESCRIPTOR.fields}
    assert fields == {
        "session_id": 1,
        "tool_name": 2,
        "parameters": 3,
        "metadata": 4,
        "stream": 5,
        "binary_parameters": 6,
    }
    response = {f.name: f.number for f in pb.ExecuteToolResponse.DESCRIPTOR.fields}
    assert response == {
        "success": 1,
        "result": 2,
        "error_message": 3,
        "metadata": 4,
        "execution_time_ms": 5,
        "binary_result": 6,
    }
    assert {f.name: f.number for f in pb.ToolChunk.DESCRIPTOR.fields} == {
        "chunk_id": 1,
        "data": 2,
        "is_final": 3,
        "metadata": 4,
    }
    assert {f.name: f.number for f in pb.HeartbeatResponse.DESCRIPTOR.fields} == {
        "server_time": 1,
        "session_valid": 2,
    }
    telemetry = {f.name: f.number for f in pb.TelemetryEvent.DESCRIPTOR.fields}
    assert telemetry == {
        "event_parts": 1,
        "measurements": 2,
        "metadata": 3,
        "timestamp_ns": 4,
        "correlation_id": 5,
    }
