"""Hybrid attention/Mamba models (Jamba, LFM2, LFM2-MoE) in ``VllmConfig``: vLLM's
``HybridAttentionMambaModelConfig`` update sizes the attention block so that one attention page holds a
Mamba state (``cache_config.block_size``), aligns ``mamba_block_size`` under prefix caching, and pads the
Mamba page to the attention page (``mamba_page_size_padded``), from the state shapes and dtypes of each
model class. Compared with vLLM 0.14.0 on both platforms, directly and through ``EngineArgs``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from diff_harness import call, get, op, vllm_request
from test_engine_args import create

MODELS_DIR = Path(__file__).resolve().parent / "models"
JAMBA = str(MODELS_DIR / "tiny-jamba")
LFM2 = str(MODELS_DIR / "tiny-lfm2")
LFM2_MOE = str(MODELS_DIR / "tiny-lfm2-moe")
JAMBA_DEFAULTS = str(MODELS_DIR / "tiny-jamba-defaults")
# The CPU platform sizes the KV cache from the machine's memory unless told: told here, on both sides.
ENV = {"VLLM_CPU_KVCACHE_SPACE": "4"}

# tiny-lfm2's config.json has no `conv_dim`, which vLLM's LFM2 reads for its conv state (and transformers'
# Lfm2Config does not default): vLLM's AttributeError. With it, LFM2 plans.
MODELS: dict[str, dict[str, Any]] = {
    "jamba": {"model": JAMBA},
    "jamba-seq-cls": {"model": JAMBA, "hf_overrides": {"architectures": ["JambaForSequenceClassification"]}},
    "lfm2": {"model": LFM2, "hf_overrides": {"conv_dim": 64}},
    "lfm2-no-conv-dim": {"model": LFM2},
    "lfm2-moe": {"model": LFM2_MOE},
}

CACHE_FIELDS = (
    "block_size",
    "enable_prefix_caching",
    "mamba_block_size",
    "mamba_page_size_padded",
    "cache_dtype",
    "mamba_cache_dtype",
    "mamba_ssm_cache_dtype",
)
OPS = [
    *[get(name, on="cache_config") for name in CACHE_FIELDS],
    op("fields", on="cache_config"),
    op("hash", on="cache_config"),
    get("max_model_len", on="model_config"),
    get("architecture", on="model_config"),
    get("config_updated", on="model_config"),
    call("try_verify_and_update_config", on=""),  # once per model config: a no-op now
    get("block_size", on="cache_config"),
]


def hybrid_request(
    model: str,
    cache: dict[str, Any] | None = None,
    parallel: dict[str, Any] | None = None,
    **model_kwargs: Any,
) -> dict[str, Any]:
    """``VllmConfig(model_config=ModelConfig(...), cache_config=CacheConfig(**cache), ...)`` and the cache
    config it leaves (the compilation config is compared whole, as always)."""
    model_config = {**MODELS[model], "skip_tokenizer_init": True, **model_kwargs}
    req = vllm_request({}, model=model_config, parallel_config=parallel, ops=OPS)
    if cache is not None:
        req["build"]["cache_config"] = cache
    req["env"] = ENV
    return req


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("prefix_caching", [None, True, False])
def test_hybrid_block_sizes(check: Any, platform: str, model: str, prefix_caching: bool | None) -> None:
    """The defaults: with prefix caching (on by default) Jamba's attention block is a multiple of the
    Mamba chunk size (2048 for Mamba1) and the mamba block follows it; LFM2 has no Mamba prefix caching, so
    it is turned off and the attention block is the smallest multiple of 16 whose page holds the state."""
    cache = {} if prefix_caching is None else {"enable_prefix_caching": prefix_caching}
    check(platform, hybrid_request(model, cache))


CACHE_CASES: list[dict[str, Any]] = [
    {"block_size": 16},
    {"block_size": 64},
    {"block_size": 256},
    {"block_size": 8, "enable_prefix_caching": False},
    {"block_size": 256, "enable_prefix_caching": False},
    {"mamba_block_size": 32, "enable_prefix_caching": True},
    {"mamba_block_size": 100, "enable_prefix_caching": True},
    {"mamba_block_size": 32},
    {"mamba_block_size": 32, "enable_prefix_caching": False},
    {"mamba_block_size": 64, "block_size": 8, "enable_prefix_caching": True},
    {"cache_dtype": "fp8"},
    {"cache_dtype": "fp8", "enable_prefix_caching": False},
    {"cache_dtype": "fp8_e5m2", "enable_prefix_caching": False},
    {"cache_dtype": "bfloat16", "enable_prefix_caching": False},
    {"mamba_cache_dtype": "float32"},
    {"mamba_cache_dtype": "float16", "enable_prefix_caching": False},
    {"mamba_ssm_cache_dtype": "float32", "enable_prefix_caching": False},
    {"mamba_cache_dtype": "float16", "mamba_ssm_cache_dtype": "float32"},
    {"mamba_page_size_padded": 4096, "enable_prefix_caching": False},
]


@pytest.mark.parametrize("model", ["jamba", "lfm2", "lfm2-moe"])
@pytest.mark.parametrize("cache", CACHE_CASES, ids=repr)
def test_hybrid_cache_settings(check: Any, platform: str, model: str, cache: dict[str, Any]) -> None:
    """The user's block size is kept when large enough and raised otherwise; a mamba block size sets the
    chunk under prefix caching and is refused without it; the KV-cache dtype sizes the attention page, the
    mamba dtypes the state (Jamba's temporal state has its own); CPU refuses fp8 with prefix caching."""
    check(platform, hybrid_request(model, cache))


@pytest.mark.parametrize("model", ["jamba", "lfm2", "lfm2-moe"])
@pytest.mark.parametrize("tp", [2, 3, 4])
@pytest.mark.parametrize("prefix_caching", [True, False])
def test_hybrid_tensor_parallel(check: Any, platform: str, model: str, tp: int, prefix_caching: bool) -> None:
    """Tensor parallelism splits the KV heads and the Mamba state; a state width it does not divide is
    vLLM's divisibility assertion, before the attention heads are checked."""
    check(
        platform,
        hybrid_request(model, {"enable_prefix_caching": prefix_caching}, {"tensor_parallel_size": tp}),
    )


MODEL_CASES: list[tuple[str, dict[str, Any]]] = [
    ("jamba", {"dtype": "float32"}),
    ("jamba", {"dtype": "float16"}),
    ("lfm2-moe", {"dtype": "float32"}),
    ("jamba", {"max_model_len": 100}),
    ("lfm2-moe", {"max_model_len": 100}),
    ("jamba", {"hf_overrides": {"mamba_d_state": 128, "mamba_expand": 4}}),
    ("jamba", {"hf_overrides": {"mamba_chunk_size": 256}}),
    ("jamba", {"hf_overrides": {"chunk_size": 96}}),
    ("jamba", {"hf_overrides": {"num_key_value_heads": 1, "hidden_size": 128}}),
    # A conv kernel of 1 leaves no conv state: LFM2-MoE's Mamba page is empty and nothing is aligned.
    ("lfm2-moe", {"hf_overrides": {"conv_L_cache": 1}}),
    ("lfm2-moe", {"hf_overrides": {"conv_L_cache": 9}}),
    ("jamba", {"hf_overrides": {"mamba_d_conv": 1}}),
]


@pytest.mark.parametrize("prefix_caching", [None, False])
@pytest.mark.parametrize(("model", "kwargs"), MODEL_CASES, ids=repr)
def test_hybrid_model_settings(
    check: Any, platform: str, model: str, kwargs: dict[str, Any], prefix_caching: bool | None
) -> None:
    """The model's dtype, length and config sizes: the attention page per token, the Mamba chunk size
    (``mamba_chunk_size``, else ``chunk_size``, else 2048) and the state shapes."""
    cache = {} if prefix_caching is None else {"enable_prefix_caching": prefix_caching}
    check(platform, hybrid_request(model, cache, **kwargs))


@pytest.mark.parametrize("prefix_caching", [True, False])
def test_hybrid_config_defaults(check: Any, platform: str, prefix_caching: bool) -> None:
    """Fields a config.json omits are read with the config class's defaults: tiny-jamba-defaults has no
    ``mamba_*`` sizes (transformers' JambaConfig: state 16, conv 4, expand 2), tiny-lfm2-moe no
    ``conv_L_cache`` (vLLM's Lfm2MoeConfig: 3)."""
    cache = {"enable_prefix_caching": prefix_caching}
    req = hybrid_request("jamba", cache)
    req["build"]["model"]["model"] = JAMBA_DEFAULTS
    check(platform, req)
    check(platform, hybrid_request("lfm2-moe", cache))


HYBRID_ENGINE_CASES: list[dict[str, Any]] = [
    {"model": JAMBA},
    {"model": JAMBA, "enable_prefix_caching": False},
    {"model": JAMBA, "block_size": 32, "mamba_block_size": 64},
    {"model": JAMBA, "tensor_parallel_size": 2, "kv_cache_dtype": "fp8"},
    {"model": JAMBA, "mamba_ssm_cache_dtype": "float32", "enable_prefix_caching": False},
    {"model": LFM2_MOE},
    {"model": LFM2_MOE, "enable_prefix_caching": True, "block_size": 64},
    {"model": LFM2_MOE, "mamba_cache_dtype": "float32", "tensor_parallel_size": 2},
    {"model": LFM2, "hf_overrides": {"conv_dim": 64}},
    {"model": LFM2},
]


@pytest.mark.parametrize("kwargs", HYBRID_ENGINE_CASES, ids=repr)
def test_hybrid_engine_args(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """Through ``EngineArgs.create_engine_config``: every sub-config of the plan, field by field."""
    check(platform, create(**kwargs))
