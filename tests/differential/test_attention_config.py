"""``AttentionConfig`` (and the ``AttentionBackendEnum`` its ``backend`` holds): defaults, keyword sets
(listed and random, valid and invalid), the environment variables its ``__post_init__`` reads, every
attribute and method the ``vllm`` hex package's generated module calls, hashes, and inside ``VllmConfig``."""

from __future__ import annotations

import os
from typing import Any

import pytest
from config_strategies import sampled
from diff_harness import FIELDS, HASH, REPR, build_new, call, enum, get, new, op, tiny_model
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

# What the generated module (Vllm.Config.AttentionConfig, vllm hex 0.3.0) reads with get_attr ...
ATTRS = GETTERS["AttentionConfig"]
# ... and calls with call_method; the arguments are this test's.
METHODS = [
    call("compute_hash"),
    *[call("validate_backend_before", v) for v in ("flash_attn", "FLASHINFER", "cpu_attn", 3, None, "nope")],
    call("validate_backend_before", enum("AttentionBackendEnum", "TRITON_ATTN")),
    call("_set_from_env_if_set", "backend", "VLLM_ATTENTION_BACKEND"),
    call("_set_from_env_if_set", "use_cudnn_prefill", "VLLM_USE_CUDNN_PREFILL"),
]
BACKEND_OPS = [get("name", on="backend"), call("get_path", on="backend"), call("is_overridden", on="backend")]
BACKEND_OPS.append(call("get_path", False, on="backend"))


def request(kwargs: dict[str, Any], env: dict[str, str | None] | None = None) -> dict[str, Any]:
    ops = [HASH, REPR, op("deepcopy_eq"), FIELDS, op("eq", other=new("AttentionConfig"))]
    ops += [op("eq", other=new("AttentionConfig", **kwargs)), *[get(a) for a in ATTRS], *METHODS]
    ops += [*BACKEND_OPS, HASH, FIELDS]
    return {"build": build_new("AttentionConfig", **kwargs), "ops": ops, "env": env or {}}


CASES: list[dict[str, Any]] = [
    {},
    *[{"backend": v} for v in ("FLASH_ATTN", "flash_attn", "FlashInfer", "TORCH_SDPA", "custom", "", "x", 3)],
    {"backend": enum("AttentionBackendEnum", "CUTLASS_MLA")},
    {"backend": "vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"},
    {"backend": None},
    *[{"flash_attn_version": v} for v in (2, 3, 4, "3", None, 2.0)],
    *[{"flash_attn_max_num_splits_for_cuda_graph": v} for v in (16, 0, -1, "8", 1.5, None)],
    *[{"use_trtllm_attention": v} for v in (True, False, None, "yes", 2)],
    {"use_prefill_decode_attention": True, "use_cudnn_prefill": "true", "disable_flashinfer_prefill": 1},
    {"use_trtllm_ragged_deepseek_prefill": True, "disable_flashinfer_q_quantization": "off"},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_attention_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(kwargs))


ENV_CASES: list[dict[str, str | None]] = [
    {"VLLM_ATTENTION_BACKEND": "FLASHINFER"},
    {"VLLM_ATTENTION_BACKEND": "flashinfer"},  # not one of the choices: vLLM's envs refuses it
    {"VLLM_ATTENTION_BACKEND": "CUSTOM"},
    {"VLLM_FLASH_ATTN_VERSION": "3"},
    {"VLLM_FLASH_ATTN_VERSION": "5"},  # set after validation: kept as vLLM keeps it
    {"VLLM_FLASH_ATTN_VERSION": "x"},
    {"VLLM_V1_USE_PREFILL_DECODE_ATTENTION": "TRUE"},
    {"VLLM_V1_USE_PREFILL_DECODE_ATTENTION": "0"},
    {"VLLM_FLASH_ATTN_MAX_NUM_SPLITS_FOR_CUDA_GRAPH": "8"},
    {"VLLM_FLASH_ATTN_MAX_NUM_SPLITS_FOR_CUDA_GRAPH": ""},
    {"VLLM_USE_CUDNN_PREFILL": "1", "VLLM_USE_TRTLLM_RAGGED_DEEPSEEK_PREFILL": "2"},
    {"VLLM_USE_CUDNN_PREFILL": "yes"},
    {"VLLM_USE_TRTLLM_ATTENTION": "True"},
    {"VLLM_USE_TRTLLM_ATTENTION": "no"},
    {"VLLM_DISABLE_FLASHINFER_PREFILL": "1", "VLLM_FLASHINFER_DISABLE_Q_QUANTIZATION": "1"},
    {"VLLM_DISABLE_FLASHINFER_PREFILL": "true"},
]


@pytest.mark.parametrize("env", ENV_CASES, ids=repr)
def test_environment_overrides(check: Any, platform: str, env: dict[str, str | None]) -> None:
    """``__post_init__`` reads nine deprecated variables over the fields (after validation)."""
    check(platform, request({}, env))
    check(platform, request({"backend": "TRITON_ATTN", "flash_attn_version": 2}, env))


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "backend": sampled(None, "FLASH_ATTN", "triton_attn", "Flex_Attention", "CPU_ATTN", "CUSTOM", "bad", 1),
    "flash_attn_version": sampled(None, 2, 3, 1, "2", 3.0),
    "use_prefill_decode_attention": sampled(True, False, "y", 0),
    "flash_attn_max_num_splits_for_cuda_graph": st.one_of(st.integers(-2, 64), sampled("4", 2.5)),
    "use_cudnn_prefill": sampled(True, False, None),
    "use_trtllm_ragged_deepseek_prefill": sampled(True, False),
    "use_trtllm_attention": sampled(None, True, False, "f"),
    "disable_flashinfer_prefill": sampled(True, False),
    "disable_flashinfer_q_quantization": sampled(True, False, "on"),
}
ENVS = sampled(
    {},
    {"VLLM_ATTENTION_BACKEND": "TREE_ATTN"},
    {"VLLM_USE_TRTLLM_ATTENTION": "1"},
    {"VLLM_FLASH_ATTN_VERSION": "2"},
)


@st.composite
def random_requests(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(sampled(*VALUES), unique=True, max_size=5))
    kwargs = {name: draw(VALUES[name]) for name in names}
    if draw(st.integers(0, 19)) == 10:
        kwargs["not_a_field"] = 1
    return request(kwargs, draw(ENVS))


def test_random_keyword_sets(check: Any, platform: str) -> None:
    @SETTINGS
    @given(random_requests())
    def run(req: dict[str, Any]) -> None:
        check(platform, req)

    run()


@pytest.mark.parametrize("model", [False, True], ids=["no-model", "tiny-llama"])
@pytest.mark.parametrize(
    "attention",
    [
        {},
        {"backend": "FLASHINFER"},
        {"flash_attn_version": 3, "use_trtllm_attention": False},
        {"backend": "x"},
    ],
    ids=repr,
)
def test_inside_vllm_config(check: Any, platform: str, attention: dict[str, Any], model: bool) -> None:
    build: dict[str, Any] = {"kind": "vllm", "attention_config": attention}
    if model:
        build["model"] = tiny_model()
    # With a model the engine hash folds in transformers' config (a listed departure): left out then.
    ops = ([] if model else [op("hash", on="")]) + [
        op("hash", on="attention_config"),
        op("fields", on="attention_config"),
    ]
    check(platform, {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})


def test_vllm_config_default_follows_the_environment(check: Any, platform: str) -> None:
    """VllmConfig's default AttentionConfig reads the variables too, and the engine hash sees them."""
    for env in ({"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}, {"VLLM_USE_CUDNN_PREFILL": "1"}):
        ops = [op("hash", on=""), op("fields", on="attention_config")]
        check(
            platform, {"build": {"kind": "vllm"}, "ops": ops, "env": {**env, "VLLM_CPU_KVCACHE_SPACE": "4"}}
        )
