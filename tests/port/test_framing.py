"""Frames through the real dispatch, in-process: replies, errors, bad frames, limits, streams."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from tests.port.conftest import call_payload, request, run_in_process

from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.transport.port import EXIT_BAD_STREAM, EXIT_OK, HEADER, encode_frame

ERROR_KEYS = {"type", "message", "stacktrace", "traceback", "context"}


def construct(request_id: int, session: str = "S", *args: Any, **kwargs: Any) -> bytes:
    payload = call_payload(
        session,
        call_type="class",
        function="__init__",
        args=list(args),
        kwargs=kwargs,
        **{"class": "CompilationConfig"},
    )
    return request(request_id, "snakebridge.call", payload)


def instance(ref: dict[str, Any]) -> dict[str, Any]:
    return {k: ref[k] for k in ("__type__", "__schema__", "id", "session_id", "python_module", "library")}


def test_ready_event_comes_first_and_eof_exits_cleanly() -> None:
    status, out = run_in_process(b"")
    assert status == EXIT_OK
    assert out == [{"event": "ready", "pid": out[0]["pid"], "frame_version": 1, "max_frame_bytes": 16777216}]


def test_standard_workload_round_trip_matches_direct_dispatch() -> None:
    status, out = run_in_process(construct(1, "S", None, None, None, cache_dir="/tmp/vc"))
    assert status == EXIT_OK
    ref = out[1]["result"]
    assert out[1]["id"] == 1 and out[1]["ok"] is True
    assert ref["__type__"] == "ref" and ref["session_id"] == "S" and ref["type_name"] == "CompilationConfig"

    dispatcher = Dispatcher()
    data = construct(1, "S", None, 3, None)
    _status, out = run_in_process(data, dispatcher)
    ref = out[1]["result"]
    follow = b"".join(
        [
            request(
                2,
                "snakebridge.call",
                call_payload(call_type="get_attr", function="mode", attr="mode", instance=instance(ref)),
            ),
            request(
                3,
                "snakebridge.call",
                call_payload(call_type="method", function="compute_hash", instance=instance(ref)),
            ),
            request(
                4,
                "snakebridge.release_ref",
                {"protocol_version": 1, "min_supported_version": 1, "ref": instance(ref), "session_id": "S"},
            ),
            request(
                5,
                "snakebridge.call",
                call_payload(call_type="method", function="compute_hash", instance=instance(ref)),
            ),
        ]
    )
    status, out = run_in_process(follow, dispatcher)
    assert status == EXIT_OK
    replies = {frame["id"]: frame for frame in out[1:]}
    assert replies[2] == {"id": 2, "ok": True, "result": 3}
    digest = replies[3]["result"]
    assert isinstance(digest, str) and len(digest) == 64
    assert replies[4] == {"id": 4, "ok": True, "result": True}
    assert replies[5]["ok"] is False and replies[5]["error"]["type"] == "KeyError"
    assert "Unknown SnakeBridge reference" in replies[5]["error"]["message"]


def test_python_errors_travel_as_the_grpc_error_payload() -> None:
    _status, out = run_in_process(construct(7, "S", None, None, None, mode=3))
    reply = out[1]
    assert reply["id"] == 7 and reply["ok"] is False
    assert set(reply["error"]) == ERROR_KEYS
    assert reply["error"]["type"] == "ValidationError"
    assert "Got multiple values for argument" in reply["error"]["message"]
    assert reply["error"]["context"]["call_type"] == "class"
    assert reply["error"]["context"]["session_id"] == "worker-session"


def test_unknown_tool_and_bad_payload_are_error_replies() -> None:
    data = request(1, "snakebridge.nope", {}) + request(2, "snakebridge.call", [1, 2])
    _status, out = run_in_process(data)
    assert out[1]["error"]["type"] == "AttributeError"
    assert out[1]["error"]["message"] == "Tool 'snakebridge.nope' not supported by SnakeBridgeAdapter"
    assert out[2]["error"]["type"] == "TypeError"


def framed(body: bytes) -> bytes:
    return HEADER.pack(len(body)) + body


def test_undecodable_frames_get_error_replies_and_the_loop_goes_on() -> None:
    bad = [
        framed(b"\xc1"),  # a reserved msgpack byte
        framed(msgpack.packb([1, 2, 3])),  # not a map
        framed(msgpack.packb({"tool": "snakebridge.call"})),  # no id
        framed(msgpack.packb({"id": True, "tool": "snakebridge.call"})),  # a bool is not an id
        framed(msgpack.packb({"id": 9, "tool": 5})),  # tool not a string
        framed(msgpack.packb({"id": 1}) + b"\x00"),  # trailing bytes
        framed(b"\xa2\xff\xfe"),  # str with invalid UTF-8
        framed(b""),  # empty frame
    ]
    good = construct(42, "S", None, None, None)
    status, out = run_in_process(b"".join(bad) + good)
    assert status == EXIT_OK
    errors, last = out[1:-1], out[-1]
    assert len(errors) == len(bad)
    for reply in errors:
        assert reply["ok"] is False and set(reply["error"]) == ERROR_KEYS
        assert reply["error"]["type"] == "FrameError"
    assert [reply["id"] for reply in errors] == [None, None, None, None, 9, None, None, None]
    assert last["id"] == 42 and last["ok"] is True


def test_an_oversized_length_is_fatal_and_exits_cleanly() -> None:
    data = struct.pack(">I", 2048) + b"x" * 10
    status, out = run_in_process(data, max_frame_bytes=1024)
    assert status == EXIT_BAD_STREAM
    assert out[-1]["event"] == "fatal"
    assert "frame too large: 2048 bytes (limit 1024)" in out[-1]["error"]["message"]


def test_truncated_frames_are_fatal() -> None:
    for data in (b"\x00\x00", struct.pack(">I", 100) + b"abc"):
        status, out = run_in_process(data)
        assert status == EXIT_BAD_STREAM
        assert out[-1]["event"] == "fatal" and "truncated" in out[-1]["error"]["message"]


def test_a_result_over_the_reply_limit_becomes_an_error_reply() -> None:
    _status, out = run_in_process(construct(1, "S", None, None, None), max_reply_bytes=10)
    assert out[1]["ok"] is False and "result too large" in out[1]["error"]["message"]


class CountingDispatcher(Dispatcher):
    def stream(self, tool_name: str, payload: Any, request_session_id: str) -> Iterator[Any]:
        if payload.get("fail"):
            yield "first"
            raise RuntimeError("boom")
        yield from ({"n": n} for n in range(3))


def test_stream_chunks_then_a_reply_with_the_count() -> None:
    data = request(1, "snakebridge.stream", {"fail": False}) + request(
        2, "snakebridge.stream", {"fail": True}
    )
    _status, out = run_in_process(data, CountingDispatcher())
    assert out[1:5] == [
        {"id": 1, "chunk": {"n": 0}},
        {"id": 1, "chunk": {"n": 1}},
        {"id": 1, "chunk": {"n": 2}},
        {"id": 1, "ok": True, "result": 3},
    ]
    assert out[5] == {"id": 2, "chunk": "first"}
    assert out[6]["ok"] is False and out[6]["error"]["type"] == "RuntimeError"


def test_the_real_stream_tool_reports_bad_input_as_an_error_reply() -> None:
    payload = call_payload(call_type="nope", function="compile_model")
    _status, out = run_in_process(request(3, "snakebridge.stream", payload))
    assert out[1]["id"] == 3 and out[1]["ok"] is False and out[1]["error"]["type"] == "ValueError"


def test_frames_round_trip_through_encode_frame() -> None:
    frame = encode_frame({"id": 1, "ok": True, "result": {"a": [1, 2.5, None, True, "x"]}})
    assert HEADER.unpack(frame[:4])[0] == len(frame) - 4


class RecordingSurface:
    def __init__(self) -> None:
        self.loaded: list[tuple[str, bool]] = []

    def module_names(self) -> list[str]:
        return ["vllm.config", "compilation_bridge.compile"]

    def load_module(self, name: str, warm: bool = False) -> None:
        self.loaded.append((name, warm))


def test_config_model_loads_before_ready_and_compile_preload_is_opt_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for preload, expected in (("", []), ("1", [("compilation_bridge.compile", True)])):
        monkeypatch.setenv("COMPILATION_BRIDGE_PRELOAD_COMPILE", preload)
        dispatcher = Dispatcher()
        surface = RecordingSurface()
        dispatcher.surface = surface  # type: ignore[assignment]
        run_in_process(b"", dispatcher)
        deadline = time.monotonic() + 5
        while len(surface.loaded) < 1 + len(expected) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert surface.loaded == [("vllm.config", False), *expected]
