"""``SpeculativeConfig``: defaults per method (n-gram, suffix, EAGLE, EAGLE-3, MTP, a plain draft model),
keyword sets (listed and random, valid and invalid, compared error for error), every attribute and
method the ``vllm`` hex package's generated module reads or calls, the hash, and inside ``VllmConfig``
(capture sizes, asynchronous scheduling, fast prefill against EAGLE, the engine hash).

Draft models are config-only folders: the tiny Llama (an EAGLE head by name or by method), and a tiny
DeepSeek-V3 whose config the MTP override turns into a DeepSeek MTP layer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from config_strategies import sampled
from diff_harness import HASH, REPR, TINY_LLAMA, build_new, call, get, new, op, scheduler, tiny_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.generated_getters import GETTERS

EXAMPLES = int(os.environ.get("DIFFERENTIAL_EXAMPLES", "1000"))
SETTINGS = settings(
    max_examples=max(EXAMPLES // 8, 1),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CLS = "SpeculativeConfig"
MODELS = Path(__file__).resolve().parent / "models"
EAGLE_HEAD = str(MODELS / "tiny-eagle-llama")  # "eagle-" in its name: detected as an EAGLE head
EAGLE3_HEAD = str(MODELS / "tiny-llama-eagle3")
DEEPSEEK = str(MODELS / "tiny-deepseek-v3")
MEDUSA = str(MODELS / "tiny-medusa")
CHUNKED = str(MODELS / "tiny-llama-chunked")  # chunked local attention (attention_chunk_size)
# The model configs it holds: compared through what they expose, not whole (their Hugging Face config
# is a transformers object in vLLM, a dict here).
MODEL_ATTRS = {"target_model_config", "target_parallel_config", "draft_model_config", "draft_parallel_config"}
SCALARS = [get(a) for a in GETTERS[CLS] if a not in MODEL_ATTRS]
MODEL_FACTS = [
    "model",
    "runner",
    "runner_type",
    "tokenizer",
    "skip_tokenizer_init",
    "dtype",
    "max_model_len",
    "spec_target_max_model_len",
    "architecture",
    "architectures",
    "enforce_eager",
    "quantization",
    "revision",
    "code_revision",
    "seed",
    "hf_overrides",
    "is_moe",
    "use_mla",
]
PARALLEL_FACTS = [
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "distributed_executor_backend",
    "world_size",
    "disable_custom_all_reduce",
]


def target(model: str = str(TINY_LLAMA), **kw: Any) -> dict[str, Any]:
    return new("ModelConfig", model=model, skip_tokenizer_init=True, **kw)


def parallel(**kw: Any) -> dict[str, Any]:
    return new("ParallelConfig", **kw)


def inspect() -> list[dict[str, Any]]:
    """Everything a caller can read: the scalars, the held configs' facts, the methods without
    arguments, repr and hash."""
    ops = [REPR, HASH, op("deepcopy_eq"), op("eq", other=None), call("use_eagle"), *SCALARS]
    ops += [get(f, on="draft_model_config") for f in MODEL_FACTS]
    ops += [get(f, on="draft_parallel_config") for f in PARALLEL_FACTS]
    ops += [get("model", on="target_model_config"), get("max_model_len", on="target_model_config")]
    return ops


def request(*args: Any, **kwargs: Any) -> dict[str, Any]:
    # The validator answers the config itself: compared whole only while it holds no model config.
    verify = [] if MODEL_ATTRS & set(kwargs) or "model" in kwargs else [call("_verify_args")]
    return {"build": build_new(CLS, *args, **kwargs), "ops": inspect() + verify, "final": False}


def with_target(tp: int = 1, **kwargs: Any) -> dict[str, Any]:
    return {
        "target_model_config": target(),
        "target_parallel_config": parallel(tensor_parallel_size=tp),
        **kwargs,
    }


CASES: list[dict[str, Any]] = [
    {},
    {"method": "ngram"},
    {"method": "ngram", "num_speculative_tokens": 3},
    {"method": "[ngram]", "num_speculative_tokens": 3},
    {"model": "ngram", "num_speculative_tokens": 2},
    {"model": "[ngram]", "num_speculative_tokens": 2},
    *[
        {"method": "ngram", "num_speculative_tokens": 3, **w}
        for w in (
            {"prompt_lookup_max": 4},
            {"prompt_lookup_min": 2},
            {"prompt_lookup_min": 2, "prompt_lookup_max": 7},
            {"prompt_lookup_min": 4, "prompt_lookup_max": 2},
            {"prompt_lookup_min": 0},
            {"prompt_lookup_max": "3"},
        )
    ],
    {"method": "ngram", "num_speculative_tokens": 3, **with_target()},
    {"method": "suffix"},
    {"method": "suffix", "num_speculative_tokens": 4, "suffix_decoding_max_tree_depth": 0},
    {"num_speculative_tokens": 3},
    {"method": "eagle", "num_speculative_tokens": 3},
    {"method": "draft_model", "num_speculative_tokens": 3},
    {"method": "mtp", "num_speculative_tokens": 1},
    {"method": "deepseek_mtp", "num_speculative_tokens": 1},
    *[{"method": "ngram", "num_speculative_tokens": v} for v in (0, -1, 1.0, 2.5, "2", True, None)],
    *[
        {"method": "ngram", "num_speculative_tokens": 2, k: v}
        for k, v in (
            ("disable_by_batch_size", 1),
            ("disable_by_batch_size", 2),
            ("disable_by_batch_size", 8),
            ("draft_tensor_parallel_size", 0),
            ("max_model_len", 0),
            ("quantization", "fp8"),
            ("quantization", "nope"),
            ("enforce_eager", True),
            ("enforce_eager", "x"),
            ("disable_padded_drafter_batch", True),
            ("speculative_token_tree", "[(0,)]"),
            ("suffix_decoding_max_spec_factor", "x"),
            ("bogus", 1),
        )
    ],
    {"method": "lookahead", "num_speculative_tokens": 2},
    # model-based proposers against the tiny Llama
    {"method": "eagle", "model": str(TINY_LLAMA), "num_speculative_tokens": 3, **with_target()},
    {"method": "eagle3", "model": str(TINY_LLAMA), "num_speculative_tokens": 2, **with_target()},
    {"model": EAGLE_HEAD, "num_speculative_tokens": 2, **with_target()},
    {"model": EAGLE3_HEAD, "num_speculative_tokens": 4, **with_target()},
    {"model": EAGLE3_HEAD, **with_target()},
    {"model": str(TINY_LLAMA), "num_speculative_tokens": 2, **with_target()},
    {"method": "eagle", "model": str(TINY_LLAMA), "num_speculative_tokens": 2},
    {
        "model": EAGLE_HEAD,
        "num_speculative_tokens": 2,
        "speculative_token_tree": "[(0, 1), (0,), (1,)]",
        **with_target(),
    },
    {
        "model": EAGLE_HEAD,
        "num_speculative_tokens": 2,
        "speculative_token_tree": "not a tree",
        **with_target(),
    },
    {"model": EAGLE_HEAD, "num_speculative_tokens": 2, "max_model_len": 100, **with_target()},
    {"model": EAGLE_HEAD, "num_speculative_tokens": 2, "max_model_len": 1000, **with_target()},
    {
        "model": EAGLE_HEAD,
        "num_speculative_tokens": 2,
        "max_model_len": 300,
        "target_model_config": target(max_model_len=256),
        "target_parallel_config": parallel(),
    },
    {
        "model": EAGLE_HEAD,
        "num_speculative_tokens": 2,
        "target_model_config": target(max_model_len=256, dtype="float16", seed=3, enforce_eager=True),
        "target_parallel_config": parallel(),
    },
    {"model": EAGLE_HEAD, "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1, **with_target(tp=2)},
    {"model": EAGLE_HEAD, "num_speculative_tokens": 2, "draft_tensor_parallel_size": 2, **with_target(tp=2)},
    {"model": EAGLE_HEAD, "num_speculative_tokens": 2, "draft_tensor_parallel_size": 3, **with_target(tp=4)},
    {"model": EAGLE_HEAD, "num_speculative_tokens": 2, **with_target(tp=4)},
    {
        "model": EAGLE_HEAD,
        "num_speculative_tokens": 2,
        "revision": "main",
        "code_revision": "v1",
        **with_target(),
    },
    {"model": EAGLE_HEAD, "num_speculative_tokens": 2, "disable_by_batch_size": 4, **with_target()},
    # MTP: the DeepSeek-V3 target's own MTP layer, or named as a draft
    {
        "method": "mtp",
        "num_speculative_tokens": 1,
        "target_model_config": target(DEEPSEEK),
        "target_parallel_config": parallel(),
    },
    {
        "method": "mtp",
        "num_speculative_tokens": 2,
        "target_model_config": target(DEEPSEEK),
        "target_parallel_config": parallel(),
    },
    {
        "method": "deepseek_mtp",
        "num_speculative_tokens": 3,
        "target_model_config": target(DEEPSEEK),
        "target_parallel_config": parallel(),
    },
    {"model": DEEPSEEK, "target_model_config": target(DEEPSEEK), "target_parallel_config": parallel()},
    {"method": "mtp", "num_speculative_tokens": 2, **with_target()},
    # A Medusa head, detected by its config's model type (every key spelled out: transformers' config
    # classes' defaults are not filled in here, a listed departure)
    {"model": MEDUSA, "num_speculative_tokens": 3, **with_target()},
    {"model": MEDUSA, "num_speculative_tokens": 2, **with_target(tp=2)},
    {
        "method": "eagle3",
        "model": EAGLE3_HEAD,
        "num_speculative_tokens": 2,
        "target_model_config": target(DEEPSEEK),
        "target_parallel_config": parallel(),
    },
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_speculative_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(**kwargs))


def test_positional(check: Any, platform: str) -> None:
    check(platform, request(None, 3, None, "ngram", None, None, None, None, None, 4, False, 2, 6))


STATIC_CALLS = [
    call("_maybe_override_draft_max_model_len", None, 512, 256),
    call("_maybe_override_draft_max_model_len", 100, 512, 256),
    call("_maybe_override_draft_max_model_len", 300, 512, 256),
    call("_maybe_override_draft_max_model_len", 600, 512, 1024),
    call("create_draft_parallel_config", parallel(tensor_parallel_size=2, pipeline_parallel_size=2), 1),
    call("_verify_and_get_draft_tp", parallel(tensor_parallel_size=2), None, None),
    call("_verify_and_get_draft_tp", parallel(tensor_parallel_size=2), 1, None),
    call("_verify_and_get_draft_tp", parallel(tensor_parallel_size=2), 3, None),
    call("_validate_suffix_decoding"),
    call("compute_hash"),
]


def test_methods(check: Any, platform: str) -> None:
    """The generated module's methods with arguments, on an n-gram config (vLLM's are static)."""
    build = build_new(CLS, method="ngram", num_speculative_tokens=2)
    check(platform, {"build": build, "ops": STATIC_CALLS, "final": False})


def test_verify_args_again(check: Any, platform: str) -> None:
    """The validator called as a method after a caller changed what it checks."""
    ops = [
        op("set", name="disable_by_batch_size", value=1),
        call("_verify_args"),
        op("set", name="disable_by_batch_size", value=None),
        op("set", name="num_speculative_tokens", value=0),
        call("_verify_args"),
        op("set", name="num_speculative_tokens", value=None),
        call("_verify_args"),
        op("set", name="method", value="eagle3"),
        HASH,
        call("use_eagle"),
    ]
    check(
        platform,
        {"build": build_new(CLS, method="ngram", num_speculative_tokens=2), "ops": ops, "final": False},
    )


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "num_speculative_tokens": st.one_of(st.integers(1, 6), sampled(None, 0, -1, "2", 1.5)),
    "method": sampled(None, "ngram", "[ngram]", "suffix", "eagle", "eagle3", "mtp", "medusa", "x"),
    "model": sampled(None, "ngram", EAGLE_HEAD, EAGLE3_HEAD, str(TINY_LLAMA)),
    "prompt_lookup_max": st.one_of(st.integers(-1, 8), sampled(None)),
    "prompt_lookup_min": st.one_of(st.integers(-1, 8), sampled(None)),
    "disable_by_batch_size": st.one_of(st.integers(0, 4), sampled(None)),
    "draft_tensor_parallel_size": sampled(None, 0, 1, 2),
    "max_model_len": sampled(None, 0, 64, 512, 4096),
    "disable_padded_drafter_batch": sampled(True, False, "yes"),
    "enforce_eager": sampled(None, True, 0),
    "quantization": sampled(None, "fp8", "awq", "zzz"),
    "speculative_token_tree": sampled(None, "[(0,), (1,), (0, 0)]", "[["),
}


PROPOSERS: list[dict[str, Any]] = [
    {},
    {"method": "ngram"},
    {"model": "ngram"},
    {"method": "suffix"},
    {"model": EAGLE_HEAD},
    {"model": EAGLE3_HEAD},
    {"method": "eagle", "model": str(TINY_LLAMA)},
    {"method": "eagle3", "model": EAGLE_HEAD},
    {"method": "mtp"},
    {"model": DEEPSEEK},
]


@st.composite
def keyword_sets(draw: st.DrawFn) -> dict[str, Any]:
    """A proposer (method and/or draft model), then up to four keywords, any of which may override it."""
    names = draw(st.lists(sampled(*VALUES), unique=True, max_size=4))
    kwargs = {**draw(sampled(*PROPOSERS)), **{name: draw(VALUES[name]) for name in names}}
    if kwargs.get("model") == "ngram" and kwargs.get("method") not in (None, "ngram", "[ngram]"):
        del kwargs["model"]  # a draft model named "ngram" is a hub name: refused here (a listed departure)
    # Mostly with a token count and a target model, so that most sets get past the first checks.
    if draw(st.integers(0, 3)) and "num_speculative_tokens" not in kwargs:
        kwargs["num_speculative_tokens"] = draw(st.integers(1, 6))
    if draw(st.integers(0, 5)):
        model = draw(sampled(str(TINY_LLAMA), DEEPSEEK))
        lengths = draw(sampled({}, {"max_model_len": 128}))
        kwargs["target_model_config"] = target(model, **lengths)
        kwargs["target_parallel_config"] = parallel(tensor_parallel_size=draw(sampled(1, 2)))
    return kwargs


def test_random_keyword_sets(check: Any, platform: str) -> None:
    @SETTINGS
    @given(keyword_sets())
    def run(kwargs: dict[str, Any]) -> None:
        check(platform, request(**kwargs))

    run()


SPECS = [
    None,
    {"method": "ngram", "num_speculative_tokens": 3},
    {"method": "ngram", "num_speculative_tokens": 7, "prompt_lookup_max": 3},
    {"model": EAGLE_HEAD, "num_speculative_tokens": 2},
    {"method": "eagle3", "model": str(TINY_LLAMA), "num_speculative_tokens": 4},
    {"model": EAGLE_HEAD, "num_speculative_tokens": 2, "disable_padded_drafter_batch": True},
]
VLLM_OPS = [
    op("hash", on=""),
    op("repr", on="speculative_config"),
    get("async_scheduling", on="scheduler_config"),
    get("disable_hybrid_kv_cache_manager", on="scheduler_config"),
    get("cudagraph_capture_sizes"),
    get("max_cudagraph_capture_size"),
    get("mode"),
    get("cudagraph_mode"),
]


@pytest.mark.parametrize("async_scheduling", [None, True], ids=["async-auto", "async-on"])
@pytest.mark.parametrize("spec", SPECS, ids=repr)
def test_inside_vllm_config(
    check: Any, platform: str, spec: dict[str, Any] | None, async_scheduling: bool | None
) -> None:
    """VllmConfig plans capture sizes for the draft's tokens, allows asynchronous scheduling only for
    EAGLE/MTP with padded drafter batches, and hashes the speculative config; without a model the
    model-based methods fail as in vLLM (the engine hash with a model is a listed departure)."""
    build: dict[str, Any] = {
        "kind": "vllm",
        "model": tiny_model(),
        "scheduler_config": scheduler(max_num_seqs=32, async_scheduling=async_scheduling),
    }
    if spec is not None:
        build["speculative_config"] = spec
    ops = VLLM_OPS[1:]  # with a model the engine hash folds in transformers' config (a listed departure)
    check(platform, {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})


@pytest.mark.parametrize("spec", SPECS[1:3], ids=repr)
def test_engine_hash_without_a_model(check: Any, platform: str, spec: dict[str, Any]) -> None:
    build: dict[str, Any] = {"kind": "vllm", "scheduler_config": scheduler(), "speculative_config": spec}
    check(platform, {"build": build, "ops": VLLM_OPS, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})


@pytest.mark.parametrize("allow", [None, "0"], ids=["env-unset", "env-0"])
@pytest.mark.parametrize("spec", [None, *SPECS[1:5]], ids=repr)
def test_chunked_local_attention(
    check: Any, platform: str, spec: dict[str, Any] | None, allow: str | None
) -> None:
    """With chunked local attention, EAGLE turns the hybrid KV cache manager off whatever the env says."""
    build: dict[str, Any] = {
        "kind": "vllm",
        "model": tiny_model(model=CHUNKED),
        "scheduler_config": scheduler(),
    }
    if spec is not None:
        build["speculative_config"] = spec
    env = {"VLLM_CPU_KVCACHE_SPACE": "4", "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": allow}
    check(platform, {"build": build, "ops": VLLM_OPS[1:], "env": env})


MTP_SPECS = [
    {"method": "mtp", "num_speculative_tokens": 1},
    {"method": "deepseek_mtp", "num_speculative_tokens": 2},
    {"method": "ngram", "num_speculative_tokens": 2},
]


@pytest.mark.parametrize("async_scheduling", [None, True], ids=["async-auto", "async-on"])
@pytest.mark.parametrize("spec", MTP_SPECS, ids=repr)
def test_mtp_inside_vllm_config(
    check: Any, platform: str, spec: dict[str, Any], async_scheduling: bool | None
) -> None:
    """The DeepSeek-V3 target's own MTP layer as the draft: EAGLE-like, so asynchronous scheduling stays."""
    build: dict[str, Any] = {
        "kind": "vllm",
        "model": tiny_model(model=DEEPSEEK),
        "scheduler_config": scheduler(max_num_seqs=16, async_scheduling=async_scheduling),
        "speculative_config": spec,
    }
    ops = [*VLLM_OPS[1:], get("method", on="speculative_config"), get("model", on="speculative_config")]
    ops += [get("architecture", on="speculative_config.draft_model_config")]
    check(platform, {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})


@pytest.mark.parametrize("spec", SPECS[1:5], ids=repr)
def test_fast_prefill_against_eagle(check: Any, platform: str, spec: dict[str, Any]) -> None:
    build: dict[str, Any] = {
        "kind": "vllm",
        "model": tiny_model(),
        "scheduler_config": scheduler(),
        "cache_config": {"kv_sharing_fast_prefill": True},
        "speculative_config": spec,
    }
    check(platform, {"build": build, "ops": VLLM_OPS[1:], "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})
