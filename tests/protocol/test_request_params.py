"""vLLM's request parameters over the wire, in-process (`vllm.sampling_params`, `vllm.pooling_params`):
every function the `vllm` hex package's generated modules (Vllm.SamplingParams.*, Vllm.PoolingParams.*)
call answers as the class itself does, methods
that return parameters return refs, refs pass back in as arguments, and what needs vLLM's engine (a
tokenizer) is refused."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from tests.generated_getters import GETTERS
from tests.protocol.test_config_family import call, plain, ref_of
from tests.protocol.test_config_family import construct as construct_in
from tests.workers import payload

from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.vllm_config import (
    BeamSearchParams,
    PoolingParams,
    RequestOutputKind,
    SamplingParams,
    StructuredOutputsParams,
)

MODULE = "vllm.sampling_params"
CLASSES: dict[str, type] = {
    "SamplingParams": SamplingParams,
    "BeamSearchParams": BeamSearchParams,
    "StructuredOutputsParams": StructuredOutputsParams,
    "PoolingParams": PoolingParams,
}
MODULES = {"PoolingParams": "vllm.pooling_params"}  # the others: vllm.sampling_params
# Per class: the keywords it is built with, and the methods the generated module calls with these
# arguments (the getters are tests/generated_getters.py's).
GENERATED: dict[str, tuple[dict[str, Any], dict[str, list[Any]]]] = {
    "SamplingParams": (
        {"n": 1, "temperature": 0.7, "seed": 5, "stop": "END", "stop_token_ids": [7], "bad_words": ["x"]},
        {
            "_verify_args": [],
            "_verify_greedy_sampling": [],
            "update_from_generation_config": [{"eos_token_id": [2, 9]}, 2],
        },
    ),
    "BeamSearchParams": ({"beam_width": 4, "max_tokens": 32, "length_penalty": 0.8}, {}),
    "StructuredOutputsParams": (
        {"regex": "[a-z]+", "disable_fallback": True},
        {"all_constraints_none": [], "all_non_structural_tag_constraints_none": []},
    ),
    "PoolingParams": (
        {"dimensions": 16, "normalize": True, "truncate_prompt_tokens": 8},
        {"verify": ["embed"], "_verify_valid_parameters": [], "_set_default_parameters": [None]},
    ),
}


def construct(dispatcher: Dispatcher, cls: str, **kwargs: Any) -> dict[str, Any]:
    return construct_in(dispatcher, cls, MODULES.get(cls, MODULE), **kwargs)


def get(dispatcher: Dispatcher, ref: dict[str, Any], attr: str) -> Any:
    return call(dispatcher, call_type="get_attr", attr=attr, function=attr, instance=ref_of(ref))


def method(dispatcher: Dispatcher, ref: dict[str, Any], name: str, *args: Any, **kwargs: Any) -> Any:
    fields = {"call_type": "method", "function": name, "args": list(args), "kwargs": kwargs}
    return call(dispatcher, instance=ref_of(ref), **fields)


def wire(value: Any) -> Any:
    """What the wire gives back for a plain value: a set travels tagged, tuples as lists."""
    if isinstance(value, set | frozenset):
        return {"__type__": "set", "__schema__": 1, "elements": sorted(value)}
    return plain(value)


def same(got: Any, expected: Any) -> bool:
    if isinstance(got, dict) and got.get("__type__") == "set":  # a set's items come in no set order
        return {**got, "elements": sorted(got["elements"])} == wire(expected)
    return bool(got == wire(expected))


@pytest.mark.parametrize("name", list(GENERATED))
def test_every_generated_function_is_served(dispatcher: Dispatcher, name: str) -> None:
    kwargs, methods = GENERATED[name]
    local = CLASSES[name](**kwargs)
    ref = construct(dispatcher, name, **kwargs)
    assert ref["type_name"] == name
    for method_name, args in methods.items():  # first: update_from_generation_config changes the object
        assert same(method(dispatcher, ref, method_name, *args), getattr(local, method_name)(*args))
    for attr in GETTERS[name]:
        got, expected = get(dispatcher, ref, attr), getattr(local, attr)
        if isinstance(expected, enum.IntEnum):  # an int, as JSON gives it
            assert got == int(expected), attr
        elif isinstance(expected, enum.Enum):  # an enum member travels as a ref: its name tells it
            named = (got["type_name"], get(dispatcher, got, "name"))
            assert named == (type(expected).__name__, expected.name), attr
        elif isinstance(expected, StructuredOutputsParams):
            assert got["type_name"] == "StructuredOutputsParams", attr
        else:
            assert same(got, expected), attr


def test_methods_that_make_parameters_return_refs(dispatcher: Dispatcher) -> None:
    ref = construct(dispatcher, "SamplingParams", seed=3, max_tokens=64)
    clone = method(dispatcher, ref, "clone")
    assert clone["type_name"] == "SamplingParams" and clone["id"] != ref["id"]
    assert get(dispatcher, clone, "max_tokens") == 64
    made = method(dispatcher, ref, "from_optional", n=None, logit_bias={"5": 300})
    assert get(dispatcher, made, "n") == 1
    bias = get(dispatcher, made, "logit_bias")  # integer keys: a dict of pairs on the wire
    assert (bias["__type__"], bias["pairs"]) == ("dict", [[5, 100.0]])
    validated = method(dispatcher, ref, "_validate_msgspec", {"top_k": 4})
    assert get(dispatcher, validated, "top_k") == 4


def test_refs_pass_back_in(dispatcher: Dispatcher) -> None:
    structured = construct(dispatcher, "StructuredOutputsParams", choice=["yes", "no"])
    fields = {"call_type": "class", "function": "__init__", "args": [2], "class": "RequestOutputKind"}
    final_only = call(dispatcher, python_module=MODULE, **fields)
    kwargs = {"structured_outputs": ref_of(structured), "output_kind": ref_of(final_only)}
    ref = construct(dispatcher, "SamplingParams", **kwargs)
    assert get(dispatcher, get(dispatcher, ref, "structured_outputs"), "choice") == ["yes", "no"]
    assert get(dispatcher, get(dispatcher, ref, "output_kind"), "name") == "FINAL_ONLY"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"temperature": -1}, "VLLMValidationError", "temperature must be non-negative, got -1."),
        ({"n": 0}, "ValueError", "n must be at least 1, got 0."),
        ({"bogus": 1}, "TypeError", "Unexpected keyword argument 'bogus'"),
    ],
)
def test_errors_are_vllms(dispatcher: Dispatcher, kwargs: dict[str, Any], error: str, message: str) -> None:
    fields = {"call_type": "class", "function": "__init__", "kwargs": kwargs, "class": "SamplingParams"}
    reply = dispatcher.execute("snakebridge.call", payload("S", python_module=MODULE, **fields), "w")
    assert not reply.success
    assert reply.error["type"] == error and reply.error["message"].startswith(message)


def test_what_needs_a_tokenizer_is_refused(dispatcher: Dispatcher) -> None:
    ref = construct(dispatcher, "SamplingParams", bad_words=["x"])
    fields = {"call_type": "method", "function": "update_from_tokenizer", "args": [None]}
    reply = dispatcher.execute("snakebridge.call", payload("S", instance=ref_of(ref), **fields), "w")
    assert not reply.success and reply.error["type"] == "AttributeError", reply.error


def test_the_enums_answer_by_member(dispatcher: Dispatcher) -> None:
    fields = {"call_type": "class", "function": "__init__", "args": [1], "class": "RequestOutputKind"}
    member = call(dispatcher, python_module=MODULE, **fields)
    assert member["type_name"] == "RequestOutputKind"
    assert get(dispatcher, member, "name") == RequestOutputKind(1).name


def test_pooling_params_verify_against_a_model_ref(dispatcher: Dispatcher) -> None:
    fields = {"call_type": "class", "function": "__init__", "class": "ModelConfig"}
    kwargs = {"model": "tiny-llama", "skip_tokenizer_init": True, "runner": "pooling"}  # the bundled model
    model = call(dispatcher, python_module="vllm.config", kwargs=kwargs, **fields)
    params = construct(dispatcher, "PoolingParams", dimensions=16)
    fields = {"call_type": "method", "function": "verify", "args": ["embed", ref_of(model)]}
    reply = dispatcher.execute("snakebridge.call", payload("S", instance=ref_of(params), **fields), "w")
    assert not reply.success and reply.error["type"] == "ValueError"
    assert "does not support matryoshka representation" in reply.error["message"]
