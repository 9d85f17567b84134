"""The port transport under hostile frames: every request is answered in-band and the loop goes on."""

from __future__ import annotations

from typing import Any

import pytest
from tests.port.conftest import call_payload, request, run_in_process

from compilation_bridge.protocol.dispatch import Dispatcher, Reply
from compilation_bridge.protocol.sessionids import MAX_SESSION_ID_BYTES
from compilation_bridge.transport.port import EXIT_OK

LONG_SESSION = "p" * (MAX_SESSION_ID_BYTES + 1)


def nested(depth: int) -> list[Any]:
    """A list nested `depth` deep: msgpack carries it, but its repr overflows Python's stack."""
    root: list[Any] = []
    node = root
    for _ in range(depth):
        node.append([])
        node = node[0]
    return root


def construct_payload(session: str = "S") -> dict[str, Any]:
    return call_payload(
        session, call_type="class", python_module="vllm.config", **{"class": "CompilationConfig"}
    )


def answers(data: bytes, dispatcher: Dispatcher | None = None) -> list[dict[str, Any]]:
    status, out = run_in_process(data, dispatcher)
    assert status == EXIT_OK
    return out[1:]  # after the ready event


@pytest.mark.parametrize("field", ["function", "call_type", "python_module"])
def test_deep_values_get_an_error_reply_and_the_loop_goes_on(field: str) -> None:
    hostile = call_payload("S", **{field: nested(1020)})
    replies = answers(
        request(1, "snakebridge.call", hostile) + request(2, "snakebridge.call", construct_payload())
    )
    assert [r["id"] for r in replies] == [1, 2]
    assert replies[0]["ok"] is False and isinstance(replies[0]["error"]["message"], str)
    assert replies[1]["ok"] is True


def test_over_long_session_ids_are_refused_in_band() -> None:
    data = b"".join(
        [
            request(1, "snakebridge.call", construct_payload(""), session_id=LONG_SESSION),
            request(2, "snakebridge.call", construct_payload(LONG_SESSION)),
            request(3, "snakebridge.stream", call_payload(LONG_SESSION, function="f")),
            request(4, "snakebridge.call", construct_payload()),
        ]
    )
    replies = answers(data)
    assert [r["id"] for r in replies] == [1, 2, 3, 4]
    for reply in replies[:3]:
        assert reply["ok"] is False and "too long" in reply["error"]["message"]
        assert LONG_SESSION not in str(reply)
    assert replies[3]["ok"] is True


class ExplodingDispatcher(Dispatcher):
    """A dispatcher whose reply cannot be packed at all (a stand-in for any failure while answering)."""

    def execute(self, tool_name: str, payload: Any, request_session_id: str) -> Reply:
        if tool_name == "explode":
            return Reply(False, error={"unpackable": object()})
        return super().execute(tool_name, payload, request_session_id)


def test_a_failure_while_answering_is_still_answered() -> None:
    data = request(1, "explode", {}) + request(2, "snakebridge.call", construct_payload())
    replies = answers(data, ExplodingDispatcher())
    assert [r["id"] for r in replies] == [1, 2]
    assert replies[0]["ok"] is False and replies[0]["error"]["type"] == "TypeError"
    assert replies[1]["ok"] is True
