"""Hostile input at the worker's edges: over-long session ids, caller-keyed caches, forged log lines, and
failures while decoding, calling or encoding. Each is answered in-band and the worker keeps serving.

The gRPC tests run a real server in this process (one per module) and call it through a real channel,
so a failure that escaped as a gRPC status would show as `grpc.RpcError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from tests.workers import construct, payload

from compilation_bridge.protocol.codec import ref_identity
from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.protocol.sessionids import MAX_SESSION_ID_BYTES
from compilation_bridge.refs.limits import RefLimits
from compilation_bridge.refs.local import LocalRefTable
from compilation_bridge.testing.fake_elixir import ElixirBridgeServer
from compilation_bridge.testing.session import snakebridge_payload
from compilation_bridge.transport import jsonio
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.logcontext import correlation_id
from compilation_bridge.transport.options import ServeOptions
from compilation_bridge.transport.server import RunningServer, build_server
from compilation_bridge.vllm_config import logs as config_logs

LONG_SESSION = "s" * (MAX_SESSION_ID_BYTES + 1)
# Within the cap in characters, over it in bytes: the cap is on the UTF-8 size.
LONG_IN_BYTES = "é" * (MAX_SESSION_ID_BYTES // 2 + 1)
DEEP_LIST = b"[" * 1000 + b"]" * 1000  # within orjson's depth limit; its repr overflows Python's stack


@pytest.fixture(scope="module")
def running() -> Iterator[RunningServer]:
    server = build_server(ServeOptions())
    yield server
    server.stop(0)


@pytest.fixture(scope="module")
def stub(running: RunningServer) -> Iterator[pb_grpc.BridgeServiceStub]:
    channel = grpc.insecure_channel(f"localhost:{running.port}")
    yield pb_grpc.BridgeServiceStub(channel)
    channel.close()


def tool_request(params: dict[str, Any], session_id: str = "worker-session", **extra: Any) -> Any:
    request = pb.ExecuteToolRequest(session_id=session_id, tool_name="snakebridge.call", **extra)
    for key, value in params.items():
        request.parameters[key].value = value if isinstance(value, bytes) else json.dumps(value).encode()
    return request


def in_band_error(response: pb.ExecuteToolResponse) -> dict[str, Any]:
    assert not response.success
    error = json.loads(response.error_message)
    assert isinstance(error["type"], str) and isinstance(error["message"], str)
    return error


def config_call(session: str = "S", **fields: Any) -> dict[str, Any]:
    return payload(
        session, call_type="class", python_module="vllm.config", **{"class": "CompilationConfig"}, **fields
    )


# ------------------------------------------------------------------------------- 1. session ids


@pytest.mark.parametrize("long_id", [LONG_SESSION, LONG_IN_BYTES])
def test_over_long_request_session_id_is_refused_in_band(dispatcher: Dispatcher, long_id: str) -> None:
    reply = dispatcher.execute("snakebridge.call", config_call(session=""), long_id)
    assert not reply.success and reply.error is not None
    assert reply.error["type"] == "ValueError"
    assert f"limit {MAX_SESSION_ID_BYTES} bytes" in reply.error["message"]
    assert long_id not in json.dumps(reply.error)  # never echoed back
    assert dispatcher.refs.count() == 0


def test_over_long_payload_session_id_is_refused(dispatcher: Dispatcher) -> None:
    reply = dispatcher.execute("snakebridge.call", config_call(session=LONG_SESSION), "worker-session")
    assert not reply.success and reply.error is not None
    assert "session_id too long" in reply.error["message"]
    assert LONG_SESSION not in json.dumps(reply.error)
    assert dispatcher.refs.count() == 0


def test_session_id_at_the_cap_is_accepted(dispatcher: Dispatcher) -> None:
    ref = construct(dispatcher, "x" * MAX_SESSION_ID_BYTES)
    assert ref["session_id"] == "x" * MAX_SESSION_ID_BYTES


def test_over_long_ids_in_a_ref_are_refused() -> None:
    with pytest.raises(ValueError, match="reference session_id too long"):
        ref_identity({"__type__": "ref", "id": "x", "session_id": LONG_SESSION}, "S")
    with pytest.raises(ValueError, match="reference id too long") as info:
        ref_identity({"__type__": "ref", "id": LONG_SESSION, "session_id": "S"}, "S")
    assert LONG_SESSION not in str(info.value)


def test_streaming_and_release_tools_check_the_session_too(dispatcher: Dispatcher) -> None:
    for tool in ("snakebridge.release_session", "snakebridge.release_ref"):
        reply = dispatcher.execute(tool, payload(""), LONG_SESSION)
        assert not reply.success and "too long" in reply.error["message"]  # type: ignore[index]
    stream = dispatcher.stream("snakebridge.stream", payload("", function="f"), LONG_SESSION)
    with pytest.raises(ValueError, match="session_id too long"):
        next(stream)


def test_grpc_session_rpcs_refuse_over_long_ids(
    stub: pb_grpc.BridgeServiceStub, running: RunningServer
) -> None:
    response = stub.ExecuteTool(tool_request(config_call(session=""), session_id=LONG_SESSION), timeout=10)
    assert in_band_error(response)["context"]["session_id"].startswith("<257-byte session id")
    init = stub.InitializeSession(pb.InitializeSessionRequest(session_id=LONG_SESSION), timeout=10)
    assert not init.success and "too long" in json.loads(init.error_message)["message"]
    assert LONG_SESSION not in init.error_message
    assert LONG_SESSION not in running.servicer.sessions
    got = stub.GetSession(pb.GetSessionRequest(session_id=LONG_SESSION), timeout=10)
    assert got.session_id == ""
    cleaned = stub.CleanupSession(pb.CleanupSessionRequest(session_id=LONG_SESSION), timeout=10)
    assert not cleaned.success


def test_heartbeat_to_elixir_carries_the_workers_own_session() -> None:
    """Elixir initializes the worker's session first; later InitializeSession and tool calls (anyone's)
    never change what the worker's heartbeat sends, nor create sessions in Elixir's store."""
    import threading

    from compilation_bridge.transport import server as server_module
    from compilation_bridge.transport.options import HeartbeatConfig

    elixir = ElixirBridgeServer()
    worker = build_server(ServeOptions())
    stop = threading.Event()
    try:
        channel = grpc.insecure_channel(f"localhost:{worker.port}")
        worker_stub = pb_grpc.BridgeServiceStub(channel)
        worker_stub.InitializeSession(pb.InitializeSessionRequest(session_id="session_1_1"), timeout=10)
        for n in range(5):
            worker_stub.InitializeSession(pb.InitializeSessionRequest(session_id=f"caller-{n}"), timeout=10)
            worker_stub.ExecuteTool(
                tool_request(config_call(f"payload-{n}"), session_id=f"req-{n}"), timeout=10
            )
        options = ServeOptions(
            elixir_address=elixir.address,
            heartbeat=HeartbeatConfig(interval_ms=20, timeout_ms=2000),
        )
        client = server_module._start_heartbeat(options, worker.servicer, stop)
        assert client is not None
        stop.wait(0.3)
        client.stop()
        channel.close()
    finally:
        worker.stop(0)
        elixir.stop()
    assert elixir.heartbeats and set(elixir.heartbeats) == {"session_1_1"}
    assert elixir.sessions == ["session_1_1"]


# ------------------------------------------------------------------------------- 2. bounded caches


def test_sessions_without_refs_leave_nothing_behind(dispatcher: Dispatcher) -> None:
    for n in range(300):
        ref = construct(dispatcher, f"burst-{n}")
        assert dispatcher.execute("snakebridge.release_ref", payload(f"burst-{n}", ref=ref), "w").success
        dispatcher.execute("snakebridge.call", payload(f"failing-{n}", call_type="bogus"), "w")
        dispatcher.execute("snakebridge.release_session", payload(f"never-{n}"), "w")
    assert dispatcher.refs.session_count() == 0 and dispatcher.refs.count() == 0


def test_a_burst_of_sessions_does_not_refuse_later_ones() -> None:
    table = LocalRefTable(RefLimits(max_sessions=10))
    for n in range(1000):  # made-up sessions whose refs went away: released, or dropped by release_session
        ref_id = table.put(f"made-up-{n}", n)
        if n % 2:
            table.release(f"made-up-{n}", ref_id)
        else:
            table.release_session(f"made-up-{n}")
    assert table.session_count() == 0
    later = [table.put(f"later-{n}", n) for n in range(10)]
    assert len(later) == 10


def test_sessions_holding_refs_are_capped_without_evicting_anyone() -> None:
    table = LocalRefTable(RefLimits(max_sessions=2))
    a = table.put("A", 1)
    table.put("B", 2)
    with pytest.raises(RuntimeError, match=r"too many sessions hold SnakeBridge references \(2, limit 2\)"):
        table.put("C", 3)
    table.put("A", 4)  # an existing session still grows
    assert table.get("A", a) == 1 and table.session_count() == 2
    table.release_session("B")
    table.put("C", 3)


def test_new_sessions_always_pass_the_memory_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from compilation_bridge.refs import limits as refs_module

    monkeypatch.setattr(refs_module, "resident_bytes", lambda: 10 << 30)
    table = LocalRefTable(RefLimits(max_rss_bytes=1 << 30))
    with pytest.raises(MemoryError):
        table.put("first-session", 1)  # every put is checked
    assert table.session_count() == 0


def test_max_sessions_from_env() -> None:
    assert RefLimits.from_env({"COMPILATION_BRIDGE_MAX_SESSIONS": "5"}).max_sessions == 5
    assert RefLimits.from_env({}).max_sessions == 10_000


def test_initialize_session_memory_is_bounded(running: RunningServer) -> None:
    from compilation_bridge.transport import servicer as servicer_module

    servicer = running.servicer
    context: Any = None
    for n in range(servicer_module.MAX_SESSIONS + 50):
        assert servicer.InitializeSession(
            pb.InitializeSessionRequest(session_id=f"made-up-{n}"), context
        ).success
    assert len(servicer.sessions) == servicer_module.MAX_SESSIONS
    assert servicer.InitializeSession(pb.InitializeSessionRequest(session_id="later"), context).success


def test_log_once_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = config_logs._Seen(8)
    monkeypatch.setattr(config_logs, "_seen", seen)
    for n in range(100):
        config_logs.warning_once("Op '%s' has no effect", "x" * 1000 + str(n))
    assert len(seen) == 8
    config_logs.warning_once("Op '%s' has no effect", ["unhashable", "list"])  # vLLM's cache would raise


# ------------------------------------------------------------------------------- 4. errors in-band


HOSTILE_PARAMETERS = [
    pytest.param({"function": DEEP_LIST}, id="deep-list-in-context"),
    pytest.param({"call_type": DEEP_LIST}, id="deep-list-in-message"),
    pytest.param({"args": b"[" * 5000 + b"12345678901234567890123" + b"]" * 5000}, id="recursion-in-json"),
    pytest.param({"function": b'"\\ud800 12345678901234567890123"'}, id="lone-surrogate"),
    pytest.param({"args": b'["\\udc00", 12345678901234567890123]'}, id="lone-low-surrogate"),
    pytest.param({"args": b'"\xff\xfe"'}, id="bad-utf8"),
    pytest.param({"args": b"[" + b"9" * 5000 + b"]"}, id="huge-int"),
]


@pytest.mark.parametrize("params", HOSTILE_PARAMETERS)
def test_execute_tool_answers_in_band(stub: pb_grpc.BridgeServiceStub, params: dict[str, Any]) -> None:
    base = snakebridge_payload("S")
    in_band_error(stub.ExecuteTool(tool_request({**base, **params}), timeout=10))
    ok = stub.ExecuteTool(tool_request(config_call()), timeout=10)
    assert ok.success


def test_lone_surrogates_are_not_json() -> None:
    with pytest.raises(ValueError, match="lone surrogate"):
        jsonio.loads(b'["\\ud800", 12345678901234567890123]')
    assert jsonio.loads(b'["\\ud83d\\ude00", 12345678901234567890123]')[0] == "\U0001f600"


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_error_reply_never_raises(dispatcher: Dispatcher) -> None:
    class BadRepr:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

        __str__ = __repr__

    reply = dispatcher.error_reply(Unprintable(), "t", {"function": BadRepr(), "library": "\ud800"}, "S")
    assert reply.error is not None and reply.error["context"]["function"] == "<unprintable BadRepr>"
    assert reply.error["message"] == "<unprintable Unprintable>"
    jsonio.dumps(reply.error).decode()  # encodable: the surrogate is spelled out
    assert reply.error["context"]["library"] == "\\ud800"


def test_a_failure_while_answering_is_still_in_band(
    stub: pb_grpc.BridgeServiceStub, running: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: Any) -> Any:
        raise RecursionError("while encoding")

    monkeypatch.setattr(running.servicer, "_tool_response", broken)
    error = in_band_error(stub.ExecuteTool(tool_request(config_call()), timeout=10))
    assert error["type"] == "RecursionError"
    correlation_id.set("-")
