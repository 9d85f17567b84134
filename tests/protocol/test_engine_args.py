"""`EngineArgs` over the wire, in-process, as an Elixir caller reaches it without generated bindings
(SnakeBridge's dynamic call, naming vLLM's module and class): the arguments come back as a ref, whose
`create_engine_config` (with a `UsageContext` member, which travels as its string) returns a `VllmConfig`
ref whose sub-configs read as the same call made here; refusals arrive as errors and the worker keeps
serving."""

from __future__ import annotations

from typing import Any

import pytest
from tests.protocol.test_config_family import call, ref_of
from tests.workers import payload

from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.vllm_config import EngineArgs, UsageContext

MODEL = "tiny-llama"  # the model the worker ships (a config.json only)


def dynamic(dispatcher: Dispatcher, module: str, function: str, *args: Any, **kwargs: Any) -> Any:
    return call(
        dispatcher, call_type="dynamic", module_path=module, function=function, args=list(args), kwargs=kwargs
    )


def read(dispatcher: Dispatcher, ref: dict[str, Any], *path: str) -> Any:
    for attr in path:
        ref = call(dispatcher, call_type="get_attr", attr=attr, function=attr, instance=ref_of(ref))
    return ref


@pytest.mark.parametrize("module", ["vllm", "vllm.engine.arg_utils"])
def test_engine_args_create_a_vllm_config_read_back_through_refs(dispatcher: Dispatcher, module: str) -> None:
    args = dynamic(dispatcher, module, "EngineArgs", model=MODEL, max_model_len=256, enable_lora=True)
    assert args["type_name"] == "EngineArgs"
    usage = dynamic(dispatcher, "vllm.usage.usage_lib", "UsageContext", "LLM_CLASS")
    assert usage == "LLM_CLASS"  # a str enum's member travels as its string, and names it when sent back
    fields = {"call_type": "method", "function": "create_engine_config", "instance": ref_of(args)}
    config = call(dispatcher, args=[usage], **fields)
    assert config["type_name"] == "VllmConfig"

    local = EngineArgs(model=MODEL, max_model_len=256, enable_lora=True).create_engine_config(
        UsageContext.LLM_CLASS
    )
    hashed = call(dispatcher, call_type="method", function="compute_hash", instance=ref_of(config))
    assert hashed == local.compute_hash()
    assert read(dispatcher, config, "scheduler_config", "max_num_batched_tokens") == (
        local.scheduler_config.max_num_batched_tokens
    )
    assert read(dispatcher, config, "model_config", "max_model_len") == 256
    assert read(dispatcher, config, "lora_config", "max_loras") == local.lora_config.max_loras  # type: ignore[union-attr]
    # create_engine_config resolved the defaults into the arguments, as vLLM's does
    assert read(dispatcher, args, "max_num_seqs") == 256


def test_a_refused_argument_set_is_an_error_and_the_worker_keeps_serving(dispatcher: Dispatcher) -> None:
    args = dynamic(dispatcher, "vllm", "EngineArgs", model=MODEL, max_num_partial_prefills=2)
    fields = {"call_type": "method", "function": "create_engine_config", "instance": ref_of(args)}
    reply = dispatcher.execute("snakebridge.call", payload("S", **fields), "worker-session")
    assert not reply.success and reply.error["type"] == "NotImplementedError"
    assert reply.error["message"].startswith("Concurrent Partial Prefill is not supported.")
    assert dynamic(dispatcher, "vllm", "EngineArgs", model=MODEL)["type_name"] == "EngineArgs"


def test_the_engine_itself_is_still_refused(dispatcher: Dispatcher) -> None:
    fields = {"call_type": "dynamic", "module_path": "vllm", "function": "LLM", "kwargs": {"model": MODEL}}
    reply = dispatcher.execute("snakebridge.call", payload("S", **fields), "worker-session")
    assert not reply.success and reply.error["type"] == "PermissionError"
    assert "second Snakepit pool" in reply.error["message"]
