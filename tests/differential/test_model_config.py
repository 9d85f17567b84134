"""The model facts ``ModelConfig`` exposes that VllmConfig's compilation planning reads, from a folder's
config.json (the tiny dense and mixture-of-experts models): dtype (the allreduce-fusion split point),
lengths, hidden size, architecture, runner (pooling), MoE/MLA/encoder-decoder flags, quantization."""

from __future__ import annotations

from typing import Any

import pytest
from diff_harness import build_new, call, get, tiny_model, tiny_moe_model

FACTS = [
    get("dtype"),
    get("max_model_len"),
    get("enforce_eager"),
    get("architecture"),
    get("architectures"),
    get("runner_type"),
    get("is_moe"),
    get("is_encoder_decoder"),
    get("use_mla"),
    get("quantization"),
    call("get_hidden_size"),
    call("get_head_size"),
]

MODELS = {"tiny-llama": tiny_model, "tiny-mixtral": tiny_moe_model}


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"dtype": "float32"},
        {"dtype": "auto"},
        {"dtype": "half"},
        {"max_model_len": 256},
        {"runner": "pooling"},
    ],
    ids=repr,
)
@pytest.mark.parametrize("model", list(MODELS))
def test_model_facts(check: Any, platform: str, model: str, kwargs: dict[str, Any]) -> None:
    req = {"build": build_new("ModelConfig", **MODELS[model](**kwargs)), "ops": FACTS, "final": False}
    check(platform, req)
