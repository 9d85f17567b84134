"""Each tool call's log lines carry its correlation id, set by a server interceptor around the call:
the request's metadata first, Snakepit's `x-snakepit-correlation-id` header next, streams too."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import grpc
import pytest

from compilation_bridge.testing.session import snakebridge_payload
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.logcontext import CorrelationFilter, correlation_id
from compilation_bridge.transport.options import ServeOptions
from compilation_bridge.transport.server import build_server


class Seen(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.addFilter(CorrelationFilter())
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((getattr(record, "corr", "?"), record.getMessage()))


@pytest.fixture
def stub_and_seen() -> Iterator[tuple[pb_grpc.BridgeServiceStub, Seen]]:
    server = build_server(ServeOptions())
    channel = grpc.insecure_channel(f"localhost:{server.port}")
    seen = Seen()
    logger = logging.getLogger("compilation_bridge")
    logger.addHandler(seen)
    saved = logger.level
    logger.setLevel(logging.INFO)
    yield pb_grpc.BridgeServiceStub(channel), seen
    logger.setLevel(saved)
    logger.removeHandler(seen)
    channel.close()
    server.stop(0)


def failing_request(metadata: dict[str, str]) -> pb.ExecuteToolRequest:
    """A call the worker refuses (a call type it does not know), which it logs as failed."""
    request = pb.ExecuteToolRequest(session_id="w", tool_name="snakebridge.call", metadata=metadata)
    for key, value in {**snakebridge_payload("S"), "call_type": "bogus"}.items():
        request.parameters[key].value = json.dumps(value).encode()
    return request


def test_the_request_metadata_then_the_header_name_the_call(
    stub_and_seen: tuple[pb_grpc.BridgeServiceStub, Seen],
) -> None:
    stub, seen = stub_and_seen
    header = "x-snakepit-correlation-id"
    stub.ExecuteTool(failing_request({"correlation_id": "from-metadata"}), metadata=[(header, "h")])
    stub.ExecuteTool(failing_request({}), metadata=[(header, "from-header")])
    corrs = {corr for corr, message in seen.records if "failed" in message}
    assert corrs == {"from-metadata", "from-header"}, seen.records
    assert correlation_id.get() == "-"  # nothing leaks into the test's own context


def test_a_stream_is_named_while_it_runs(stub_and_seen: tuple[pb_grpc.BridgeServiceStub, Seen]) -> None:
    stub, seen = stub_and_seen
    request = failing_request({"correlation_id": "a-stream"})
    request.tool_name = "snakebridge.stream"
    with pytest.raises(grpc.RpcError):
        list(stub.ExecuteStreamingTool(request))
    assert any(corr == "a-stream" and "failed" in message for corr, message in seen.records), seen.records
