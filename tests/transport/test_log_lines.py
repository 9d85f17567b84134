"""One log record per line: caller text (tool names, session and correlation ids, messages) that reaches
the logs cannot add lines, forge records or send terminal escapes, in the text and the json format."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import grpc
import pytest

from compilation_bridge.testing.session import snakebridge_payload
from compilation_bridge.transport import logs
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.options import ServeOptions
from compilation_bridge.transport.server import build_server


@pytest.fixture
def stub() -> Iterator[pb_grpc.BridgeServiceStub]:
    server = build_server(ServeOptions())
    channel = grpc.insecure_channel(f"localhost:{server.port}")
    yield pb_grpc.BridgeServiceStub(channel)
    channel.close()
    server.stop(0)


HOSTILE = "tool\nFAKE - ERROR - [corr=x] forged\r\x1b[31mred\x85next\u2028sep\x00\x7f"


def _formatted(formatter: logging.Formatter, exc: bool = False) -> str:
    record = logging.LogRecord(
        "compilation_bridge.protocol", logging.ERROR, __file__, 1, "%s failed", (HOSTILE,), None
    )
    if exc:
        try:
            raise ValueError(HOSTILE)
        except ValueError:
            record.exc_info = sys.exc_info()
    record.corr = HOSTILE
    return formatter.format(record)


@pytest.mark.parametrize("exc", [False, True])
def test_text_logs_escape_control_characters(exc: bool) -> None:
    line = _formatted(logs.TextFormatter(logs.TEXT_FORMAT), exc)
    assert line.count("\n") == 0 and "\r" not in line and "\x1b" not in line
    assert not any(0x80 <= ord(c) < 0xA0 or c in "\u2028\u2029\x00\x7f" for c in line)
    assert "tool\\nFAKE" in line and "\\x1b[31mred" in line and "\\x85next" in line and "\\u2028sep" in line
    assert "[corr=tool\\nFAKE" in line


@pytest.mark.parametrize("exc", [False, True])
def test_json_logs_escape_control_characters(exc: bool) -> None:
    line = _formatted(logs.JsonFormatter(), exc)
    assert line.count("\n") == 0 and "\r" not in line and "\x1b" not in line
    assert not any(0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in line)
    entry = json.loads(line)
    assert entry["message"] == f"{HOSTILE} failed" and entry["correlation_id"] == HOSTILE


def test_worker_log_lines_stay_one_per_record(
    stub: pb_grpc.BridgeServiceStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(logs.sys, "stderr", stream)
    root = logging.getLogger()
    # Another suite's session fixture may hold the product's logger at ERROR: this test needs its INFO lines.
    product = logging.getLogger("compilation_bridge")
    saved = (list(root.handlers), root.level, product.level)
    try:
        product.setLevel(logging.NOTSET)
        logs.configure_logging("info")
        request = pb.ExecuteToolRequest(
            session_id="w", tool_name="snakebridge.x\x1b[2J", metadata={"correlation_id": "c\nd"}
        )
        for key, value in {**snakebridge_payload("S"), "call_type": "bogus\nforged line"}.items():
            request.parameters[key].value = json.dumps(value).encode()
        assert not stub.ExecuteTool(request, timeout=10).success
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        product.setLevel(saved[2])
    lines = stream.getvalue().splitlines()
    failed = [line for line in lines if "failed" in line]
    assert failed and all("[corr=c\\nd]" in line for line in failed), lines
    assert "\x1b" not in stream.getvalue()
