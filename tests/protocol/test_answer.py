"""The one rule both transports encode replies by (protocol/answer.py)."""

from __future__ import annotations

import json
from typing import Any

from compilation_bridge.protocol.answer import encode_answer
from compilation_bridge.protocol.dispatch import Dispatcher, Reply


def answer(reply: Reply, max_bytes: int = 100) -> Any:
    dispatcher = Dispatcher()
    return encode_answer(
        reply,
        encode_result=lambda result: json.dumps(result).encode(),
        encode_error=lambda error: json.dumps(error).encode(),
        max_bytes=max_bytes,
        explain=lambda exc: dispatcher.error_reply(exc, "snakebridge.call", None, "S"),
    )


def test_a_result_within_the_cap_travels() -> None:
    done = answer(Reply(True, {"a": 1}))
    assert (done.success, done.data, done.result) == (True, b'{"a": 1}', {"a": 1})


def test_a_result_over_the_cap_is_an_in_band_error_with_both_sizes() -> None:
    done = answer(Reply(True, "x" * 200))
    error = json.loads(done.data)
    assert not done.success and error["type"] == "ValueError"
    assert error["message"] == "result too large: 202 bytes (limit 100)"


def test_a_result_that_cannot_be_encoded_is_an_in_band_error() -> None:
    done = answer(Reply(True, {1j}))
    assert not done.success and json.loads(done.data)["type"] == "TypeError"


def test_an_error_reply_is_encoded_as_it_is() -> None:
    error = {"type": "KeyError", "message": "m"}
    done = answer(Reply(False, error=error))
    assert (done.success, json.loads(done.data)) == (False, error)
