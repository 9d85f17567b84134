"""A call that needs vLLM's engine is refused in band, saying that this worker serves configuration and
where engine calls belong (docs/worker.md, "Configuration here, the engine in vLLM"); other modules are
refused without that advice."""

from __future__ import annotations

import pytest

from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.testing.session import snakebridge_payload


@pytest.mark.parametrize(
    ("module", "fields"),
    [
        ("vllm", {"call_type": "class", "class": "LLM", "function": "__init__"}),
        ("vllm", {"call_type": "class", "class": "AsyncLLMEngine", "function": "__init__"}),
        ("vllm.engine.llm_engine", {"call_type": "class", "class": "LLMEngine", "function": "__init__"}),
        ("vllm.outputs", {"function": "RequestOutput"}),
    ],
)
def test_engine_calls_say_where_they_belong(module: str, fields: dict[str, str]) -> None:
    reply = Dispatcher().execute("snakebridge.call", snakebridge_payload("S", module, **fields), "S")
    assert reply.error is not None
    message = reply.error["message"]
    if module == "vllm":  # served for SamplingParams: its other names are refused by name
        name = fields.get("class") or fields["function"]
        assert reply.error["type"] == "PermissionError"
        assert message.startswith(f"vllm.{name} is not exposed by compilation-bridge")
    else:
        assert reply.error["type"] == "ImportError"
        assert message.startswith(f"module {module!r} is not exposed by compilation-bridge")
    assert "serves vLLM's configuration" in message and "__runtime__: [pool_name: ...]" in message


def test_other_modules_get_no_engine_advice() -> None:
    payload = snakebridge_payload("S", "os", function="getcwd")
    reply = Dispatcher().execute("snakebridge.call", payload, "S")
    assert reply.error is not None and reply.error["type"] == "ImportError"
    assert "pool_name" not in reply.error["message"]
