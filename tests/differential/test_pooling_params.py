"""``vllm.pooling_params.PoolingParams`` against vLLM 0.14.0: msgspec's construction, every attribute the
``vllm`` hex package's generated module reads, and ``verify`` for every pooling task, alone and against a
``ModelConfig`` of the pooling runner (its ``PoolerConfig`` defaults merged in, step pooling, matryoshka
dimensions), with the deprecated ``normalize``/``softmax``/``activation``; both platforms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from diff_harness import FIELDS, REPR, STR, build_new, call, enum, get, new, op, tiny_model
from tests.generated_getters import GETTERS

PP = "PoolingParams"
MODELS = Path(__file__).resolve().parent / "models"
TASKS = ("embed", "classify", "score", "token_embed", "token_classify", "plugin", "generate", None)


def model(**kwargs: Any) -> dict[str, Any]:
    return new("ModelConfig", **tiny_model(runner="pooling", **kwargs))


def matryoshka(folder: str) -> dict[str, Any]:
    return new("ModelConfig", model=str(MODELS / folder), skip_tokenizer_init=True, runner="pooling")


def request(kwargs: dict[str, Any], verify: list[Any] | None = None) -> dict[str, Any]:
    ops = [REPR, STR, op("deepcopy_eq"), op("eq", other=None), op("eq", other=new(PP, **kwargs))]
    ops += [op("pyhash_eq", other=new(PP)), call("clone")]
    if verify is not None:
        ops.append(call("verify", *verify))
    ops += [*[get(a) for a in GETTERS[PP]], FIELDS]
    return {"build": build_new(PP, **kwargs), "ops": ops}


CASES: list[dict[str, Any]] = [
    {},
    {"dimensions": 16},
    {"dimensions": 0},
    {"dimensions": 64, "use_activation": False},
    {"normalize": False},
    {"softmax": True, "activation": False},
    {"activation": True},
    {"step_tag_id": 5, "returned_token_ids": [1, 2]},
    {"truncate_prompt_tokens": -1, "extra_kwargs": {"a": 1}},
    {"task": "embed"},
    {"task": "classify", "dimensions": 8},
    {"skip_reading_prefix_cache": False, "requires_token_ids": True},
    {"output_kind": enum("RequestOutputKind", "FINAL_ONLY")},
    {"output_kind": enum("RequestOutputKind", "DELTA")},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
@pytest.mark.parametrize("task", TASKS)
def test_verify_without_a_model(check: Any, platform: str, kwargs: dict[str, Any], task: str | None) -> None:
    check(platform, request(kwargs, [task]))


MODEL_CASES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({}, model()),
    ({"dimensions": 16}, model()),
    ({"dimensions": 16}, matryoshka("tiny-llama-matryoshka")),
    ({"dimensions": 8}, matryoshka("tiny-llama-matryoshka")),
    ({"dimensions": 0}, matryoshka("tiny-llama-matryoshka-any")),
    ({"dimensions": 4}, matryoshka("tiny-llama-matryoshka-any")),
    ({}, model(pooler_config=new("PoolerConfig", dimensions=32, use_activation=False))),
    ({"use_activation": True}, model(pooler_config=new("PoolerConfig", use_activation=False))),
    ({"step_tag_id": 3}, model()),
    ({}, model(pooler_config=new("PoolerConfig", tok_pooling_type="STEP", step_tag_id=7))),
    (
        {"returned_token_ids": [4]},
        model(pooler_config=new("PoolerConfig", pooling_type="STEP", returned_token_ids=[1, 2])),
    ),
    ({"skip_reading_prefix_cache": True}, model()),
]


@pytest.mark.parametrize(("kwargs", "model_config"), MODEL_CASES, ids=repr)
@pytest.mark.parametrize("task", TASKS[:-2])
def test_verify_against_a_model(
    check: Any, platform: str, kwargs: dict[str, Any], model_config: dict[str, Any], task: str
) -> None:
    check(platform, request(kwargs, [task, model_config]))


def test_verify_twice(check: Any, platform: str) -> None:
    ops = [call("verify", "embed"), call("verify", "embed"), call("verify", "classify"), FIELDS]
    check(platform, {"build": build_new(PP), "ops": ops})


def test_positional(check: Any, platform: str) -> None:
    check(platform, {"build": build_new(PP, -1, 16, None, None, None, True), "ops": [REPR, FIELDS]})
    check(platform, {"build": build_new(PP, *range(20)), "ops": [REPR]})


@pytest.mark.parametrize("folder", ["tiny-llama-matryoshka", "tiny-llama-matryoshka-any"])
def test_the_models_matryoshka_attributes(check: Any, platform: str, folder: str) -> None:
    kwargs = {"model": str(MODELS / folder), "skip_tokenizer_init": True, "runner": "pooling"}
    ops = [get("is_matryoshka"), get("matryoshka_dimensions")]
    # final: False, as for every ModelConfig: vLLM's hf_config is a transformers object, a dict here
    check(platform, {"build": build_new("ModelConfig", **kwargs), "ops": ops, "final": False})
