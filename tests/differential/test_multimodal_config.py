"""``MultiModalConfig``: defaults, keyword sets (listed and random, valid and invalid), its three validators
(the dummy options ``limit_per_prompt`` becomes, the encoder attention backend, the shared-memory size
check), every function the ``vllm`` hex package's generated module calls, and ``ModelConfig``'s use of it:
the config a caller gives, the multimodal init variables (validated, then unused for the text models this
worker plans, as vLLM leaves them for any model that is not multimodal), and what the generated
``Vllm.Config.ModelConfig`` reads of them."""

from __future__ import annotations

import os
from typing import Any

import pytest
from config_strategies import sampled
from diff_harness import FIELDS, HASH, REPR, build_new, call, enum, get, new, op, tiny_model, tiny_moe_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.generated_getters import GETTERS

EXAMPLES = int(os.environ.get("DIFFERENTIAL_EXAMPLES", "1000"))
SETTINGS = settings(
    max_examples=max(EXAMPLES // 4, 1),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

ATTRS = GETTERS["MultiModalConfig"]
CLS = "MultiModalConfig"
MODALITIES = ("image", "video", "audio", "other")
METHODS = [
    *[call("get_limit_per_prompt", m) for m in MODALITIES],
    *[call("get_dummy_options", m) for m in MODALITIES],
    call("merge_mm_processor_kwargs", {"num_crops": 2, "x": None}),
    call("merge_mm_processor_kwargs", {}),
    call("is_multimodal_pruning_enabled"),
    call("_validate_multimodal_config"),
]


def request(*args: Any, **kwargs: Any) -> dict[str, Any]:
    ops = [REPR, HASH, op("deepcopy_eq"), op("eq", other=None), op("eq", other=new(CLS))]
    ops += [op("eq", other=new(CLS, *args, **kwargs)), *[get(a) for a in ATTRS], *METHODS, FIELDS]
    return {"build": build_new(CLS, *args, **kwargs), "ops": ops}


LIMITS: list[Any] = [
    {"image": 16, "video": 2},
    {"video": {"count": 1, "num_frames": 32, "width": 512, "height": 512}, "image": {"count": 5}},
    {"image": 16, "audio": {"length": 3}, "other": {"count": 0}},
    {"other": {"count": 2, "width": 5}},  # the base options ignore what they do not know
    {"image": {"count": 1, "num_frames": 2}},  # ... the others refuse it
    {"video": {"num_frames": 0}},
    {"image": -1},
    {"image": "3"},
    {"image": 2.0},
    {"image": True},
    {"audio": {"count": "4"}},
    {1: 2},
    {"image": None},
    None,
    [],
    {},
]
CASES: list[dict[str, Any]] = [
    {},
    *[{"limit_per_prompt": v} for v in LIMITS],
    {"enable_mm_embeds": True, "interleave_mm_strings": True, "skip_mm_profiling": True},
    *[{"media_io_kwargs": v} for v in ({"video": {"num_frames": 40}}, {"video": 1}, None)],
    *[{"mm_processor_kwargs": v} for v in ({"num_crops": 4}, {}, None, [1])],
    *[{"mm_processor_cache_gb": v} for v in (0, 1.5, -1, "2", None)],
    *[{"mm_processor_cache_type": v} for v in ("shm", "lru", "LRU", None)],
    {"mm_processor_cache_type": "shm", "mm_shm_cache_max_object_size_mb": 64},
    *[{"mm_shm_cache_max_object_size_mb": v} for v in (128, 64, -1, 128.0)],
    *[{"mm_encoder_tp_mode": v} for v in ("weights", "data", "x")],
    *[{"mm_encoder_attn_backend": v} for v in ("FLASH_ATTN", "torch_sdpa", "xformers", "nope", "", 1, None)],
    {"mm_encoder_attn_backend": enum("AttentionBackendEnum", "FLASH_ATTN")},  # a member as it is
    *[{"video_pruning_rate": v} for v in (0.0, 0.5, 1.0, -0.1, "0.2", None)],
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_multimodal_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(**kwargs))


def test_positional(check: Any, platform: str) -> None:
    check(platform, request({"image": 2}, True, {}, {"a": 1}, 2, "shm", 16, "data", "TRITON_ATTN"))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("_validate_limit_per_prompt", {"image": 2, "x": {"count": 1}}),
        ("_validate_limit_per_prompt", {"video": {"count": -1}}),
        ("_validate_limit_per_prompt", None),
        ("_validate_mm_encoder_attn_backend", "flash_attn"),
        ("_validate_mm_encoder_attn_backend", "XFormers"),
        ("_validate_mm_encoder_attn_backend", "nope"),
        ("_validate_mm_encoder_attn_backend", None),
        ("_validate_mm_encoder_attn_backend", 3),
    ],
    ids=repr,
)
def test_validators_called_directly(check: Any, platform: str, name: str, value: Any) -> None:
    """The generated module calls the field validators as methods, with any value."""
    ops = [call(name, value)]
    check(platform, {"build": build_new(CLS, limit_per_prompt={"image": 1}), "ops": ops})


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "limit_per_prompt": sampled(*LIMITS),
    "enable_mm_embeds": sampled(True, False, 0, "yes"),
    "media_io_kwargs": sampled({}, {"image": {"a": 1}}, {"image": 1}),
    "mm_processor_kwargs": sampled(None, {}, {"a": 1}, 2),
    "mm_processor_cache_gb": st.one_of(st.floats(-1, 64, allow_nan=False), st.integers(-1, 64), sampled("1")),
    "mm_processor_cache_type": sampled("lru", "shm", "x"),
    "mm_shm_cache_max_object_size_mb": st.one_of(sampled(128), st.integers(-1, 512)),
    "mm_encoder_tp_mode": sampled("weights", "data", "DATA"),
    "mm_encoder_attn_backend": sampled(None, "FLASH_ATTN", "flashinfer", "xformers", "bad", 2),
    "interleave_mm_strings": sampled(True, False, "n"),
    "skip_mm_profiling": sampled(True, False, 1),
    "video_pruning_rate": st.one_of(sampled(None, "0.5"), st.floats(-0.5, 1.5, allow_nan=False)),
}


@st.composite
def keyword_sets(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(sampled(*VALUES), unique=True, max_size=6))
    kwargs = {name: draw(VALUES[name]) for name in names}
    if draw(st.integers(0, 19)) == 10:
        kwargs["not_a_field"] = 1
    return kwargs


def test_random_keyword_sets(check: Any, platform: str) -> None:
    @SETTINGS
    @given(keyword_sets())
    def run(kwargs: dict[str, Any]) -> None:
        check(platform, request(**kwargs))

    run()


# What the generated Vllm.Config.ModelConfig reads of the multimodal part (vLLM's init variables read back
# as the class's None), and its two functions about the config.
MODEL_OPS = [
    get("multimodal_config"),
    get("is_multimodal_model"),
    call("get_multimodal_config"),
    *[get(name) for name in GETTERS["MultiModalConfig"] if name != "limit_per_prompt"],
    get("limit_mm_per_prompt"),
    op("hash", on="multimodal_config"),
]
MODEL_CASES: list[dict[str, Any]] = [
    {},
    {"multimodal_config": new(CLS)},
    {"multimodal_config": new(CLS, limit_per_prompt={"image": 2}, mm_encoder_attn_backend="FLASH_ATTN")},
    {"multimodal_config": {"limit_per_prompt": {"image": 3}}},  # a dict, validated into the class
    {"multimodal_config": {"mm_processor_cache_type": "bad"}},
    {"multimodal_config": 1},
    {"limit_mm_per_prompt": {"image": 2, "video": {"count": 1}}, "enable_mm_embeds": True},
    {"limit_mm_per_prompt": {"image": "x"}},
    {"media_io_kwargs": {"video": {"num_frames": 4}}, "mm_processor_kwargs": {"n": 1}},
    {"mm_processor_cache_gb": 0, "mm_processor_cache_type": "shm", "mm_shm_cache_max_object_size_mb": 8},
    {"mm_processor_cache_type": "nope"},
    {"mm_encoder_tp_mode": "data", "mm_encoder_attn_backend": "TORCH_SDPA"},
    {"mm_encoder_attn_backend": "anything goes: only the MultiModalConfig validates it"},
    {"mm_encoder_tp_mode": "x"},
    {"interleave_mm_strings": True, "skip_mm_profiling": False, "video_pruning_rate": 0.5},
    {"video_pruning_rate": "fast"},
]


@pytest.mark.parametrize("kwargs", MODEL_CASES, ids=repr)
@pytest.mark.parametrize("model", [tiny_model, tiny_moe_model], ids=["tiny-llama", "tiny-mixtral"])
def test_inside_model_config(check: Any, platform: str, model: Any, kwargs: dict[str, Any]) -> None:
    check(platform, {"build": build_new("ModelConfig", **model(**kwargs)), "ops": MODEL_OPS, "final": False})


@pytest.mark.parametrize("kwargs", [{}, {"multimodal_config": new(CLS, skip_mm_profiling=True)}], ids=repr)
def test_inside_vllm_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """VllmConfig plans the model as without it; its hash leaves the multimodal config out, as vLLM's
    model hash does (compared here through the model-free parts only: the model hash is a listed
    departure)."""
    build = {"kind": "vllm", "model": tiny_model(**kwargs)}
    ops = [op("fields", on="model_config.multimodal_config"), get("is_multimodal_model", on="model_config")]
    check(platform, {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})
