"""SpeculativeConfig where this worker departs from vLLM on purpose (bounds on what a caller makes it
build or parse), and vLLM's MTP config override as dict operations, model type by model type (vLLM's
`hf_config_override`; the DeepSeek-V3 case is also proven against vLLM in the differential tests)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from compilation_bridge.vllm_config import ModelConfig, ParallelConfig, SpeculativeConfig
from compilation_bridge.vllm_config.speculative import MAX_TOKEN_TREE_CHARS, MAX_TREE_SPECULATIVE_TOKENS


def eagle(**kwargs: Any) -> SpeculativeConfig:
    target = ModelConfig(model="tiny-llama", skip_tokenizer_init=True)
    return SpeculativeConfig(
        method="eagle",
        model="tiny-llama",
        target_model_config=target,
        target_parallel_config=ParallelConfig(),
        **kwargs,
    )


def test_the_chain_token_tree_is_bounded() -> None:
    assert eagle(num_speculative_tokens=3).speculative_token_tree == "[(0,), (0, 0), (0, 0, 0)]"
    assert eagle(num_speculative_tokens=MAX_TREE_SPECULATIVE_TOKENS).speculative_token_tree is not None
    with pytest.raises(ValidationError, match="num_speculative_tokens must be at most 1024"):
        eagle(num_speculative_tokens=MAX_TREE_SPECULATIVE_TOKENS + 1)


def test_a_callers_token_tree_is_bounded() -> None:
    assert eagle(num_speculative_tokens=2, speculative_token_tree="[(1,), (0,)]").speculative_token_tree == (
        "[(0,), (1,)]"
    )
    with pytest.raises(ValidationError, match="speculative_token_tree must be at most 65536 characters"):
        eagle(num_speculative_tokens=2, speculative_token_tree="[" + " " * MAX_TOKEN_TREE_CHARS + "]")


def test_ngram_takes_any_token_count() -> None:
    """Nothing is built in proportion to the count for n-gram lookup: no bound there, as in vLLM."""
    assert SpeculativeConfig(method="ngram", num_speculative_tokens=10**9).num_speculative_tokens == 10**9


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"model_type": "deepseek_v32", "architectures": ["A"], "num_nextn_predict_layers": 1},
            {"model_type": "deepseek_mtp", "architectures": ["DeepSeekMTPModel"], "n_predict": 1},
        ),
        (
            {"model_type": "pangu_ultra_moe", "architectures": ["A"], "num_nextn_predict_layers": 2},
            {"model_type": "pangu_ultra_moe_mtp", "architectures": ["OpenPanguMTPModel"], "n_predict": 2},
        ),
        (
            {"model_type": "mimo", "architectures": ["MiMoForCausalLM"], "num_hidden_layers": 4},
            {
                "model_type": "mimo_mtp",
                "architectures": ["MiMoMTPModel"],
                "n_predict": None,
                "num_hidden_layers": 0,
            },
        ),
        (
            {
                "model_type": "glm4_moe",
                "architectures": ["Glm4MoeForCausalLM"],
                "num_nextn_predict_layers": 1,
            },
            {"model_type": "glm4_moe_mtp", "architectures": ["Glm4MoeMTPModel"], "n_predict": 1},
        ),
        (
            {"model_type": "ernie4_5_moe", "architectures": ["A"]},
            {"model_type": "ernie_mtp", "architectures": ["ErnieMTPModel"], "n_predict": None},
        ),
        (
            {"model_type": "qwen3_next", "architectures": ["A"], "num_nextn_predict_layers": 1},
            {"model_type": "qwen3_next_mtp", "architectures": ["Qwen3NextMTP"], "n_predict": 1},
        ),
        (
            {"model_type": "exaone_moe", "architectures": ["A"]},
            {"model_type": "exaone_moe_mtp", "architectures": ["ExaoneMoeMTP"], "n_predict": None},
        ),
        (
            {"model_type": "longcat_flash", "architectures": ["A"]},
            {"model_type": "longcat_flash_mtp", "architectures": ["LongCatFlashMTPModel"], "n_predict": 1},
        ),
        (
            {"model_type": "mistral", "architectures": ["MistralLarge3ForCausalLM"]},
            {"model_type": "mistral", "architectures": ["EagleMistralLarge3ForCausalLM"]},
        ),
        (
            {"model_type": "llama", "architectures": ["LlamaForCausalLM"]},
            {"model_type": "llama", "architectures": ["LlamaForCausalLM"]},
        ),
    ],
)
def test_the_mtp_override(config: dict[str, Any], expected: dict[str, Any]) -> None:
    overridden = SpeculativeConfig.hf_config_override(dict(config))
    assert {k: overridden[k] for k in expected} == expected


def test_the_override_needs_a_config() -> None:
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'architectures'"):
        SpeculativeConfig.hf_config_override(None)
