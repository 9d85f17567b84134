"""`set_attr` needs its value: without `args: [value]` it is an error, never a field set to None."""

from __future__ import annotations

from typing import Any

import pytest
from tests.workers import construct, payload

from compilation_bridge.protocol.dispatch import Dispatcher


def _set_attr(dispatcher: Dispatcher, ref: dict[str, Any], **fields: Any) -> Any:
    return dispatcher.execute(
        "snakebridge.call",
        payload("S", call_type="set_attr", instance=ref, attr="cache_dir", **fields),
        "worker-session",
    )


@pytest.mark.parametrize(
    "fields",
    [{}, {"args": []}, {"value": "/var/cache/b"}, {"args": ["/a", "/b"]}],
    ids=["no args", "empty args", "value instead of args", "two args"],
)
def test_set_attr_without_exactly_one_value_is_refused(fields: dict[str, Any]) -> None:
    dispatcher = Dispatcher()
    ref = construct(dispatcher, "S", cache_dir="/var/cache/a")
    reply = _set_attr(dispatcher, ref, **fields)
    assert not reply.success
    assert reply.error["type"] == "ValueError"
    assert reply.error["message"].startswith("snakebridge.call set_attr requires the value as args: [value]")
    read = dispatcher.execute(
        "snakebridge.call", payload("S", call_type="get_attr", instance=ref, attr="cache_dir"), "w"
    )
    assert read.result == "/var/cache/a"  # unchanged


def test_set_attr_with_its_value_still_sets_it() -> None:
    dispatcher = Dispatcher()
    ref = construct(dispatcher, "S", cache_dir="/var/cache/a")
    assert _set_attr(dispatcher, ref, args=["/var/cache/b"]).result is True
    read = dispatcher.execute(
        "snakebridge.call", payload("S", call_type="get_attr", instance=ref, attr="cache_dir"), "w"
    )
    assert read.result == "/var/cache/b"
