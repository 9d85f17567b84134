"""``CacheConfig``, ``LoadConfig`` and ``ObservabilityConfig``: defaults, keyword sets (listed and random,
valid and invalid), every attribute and method the ``vllm`` hex package's generated modules call, hashes,
equality, and each one inside ``VllmConfig``."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest
from config_strategies import sampled
from diff_harness import FIELDS, HASH, REPR, build_new, call, get, new, op, tiny_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from tests.generated_getters import GETTERS

EXAMPLES = int(os.environ.get("DIFFERENTIAL_EXAMPLES", "1000"))
SETTINGS = settings(
    max_examples=max(EXAMPLES // 4, 1),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# What each generated Elixir module (vllm hex 0.3.0, Vllm.Config.*) reads with get_attr ...
CACHE_ATTRS = GETTERS["CacheConfig"]
LOAD_ATTRS = GETTERS["LoadConfig"]
OBSERVABILITY_ATTRS = GETTERS["ObservabilityConfig"]
# ... and calls with call_method (besides the constructor); the arguments are this test's.
CACHE_METHODS = [
    call("compute_hash"),
    call("metrics_info"),
    *[call("_validate_cache_dtype", d) for d in ("auto", "fp8", "fp8_e5m2", "bfloat16")],
    *[
        call("verify_with_parallel_config", new("ParallelConfig", tensor_parallel_size=tp))
        for tp in (1, 2, 8)
    ],
]
LOAD_METHODS = [
    call("compute_hash"),
    *[call("_lowercase_load_format", f) for f in ("auto", "SafeTensors", "PT", "")],
    *[call("_validate_ignore_patterns", p) for p in (["original/**/*"], [], ["*.bin"], "x", "")],
]
OBSERVABILITY_METHODS = [
    call("compute_hash"),
    call("_validate_tracing_config"),
    *[
        call("_validate_collect_detailed_traces", v)
        for v in (None, ["model"], ["model,worker"], ["a,b", "c"])
    ],
    *[call("_validate_show_hidden_metrics_for_version", v) for v in (None, "0.13", "0.7.1", "1!2.0")],
    call("_validate_otlp_traces_endpoint", None),
]
COMMON = [HASH, REPR, op("deepcopy_eq"), op("eq", other=None), FIELDS]


def request(cls: str, kwargs: dict[str, Any], attrs: tuple[str, ...], methods: list[Any]) -> dict[str, Any]:
    ops = [*COMMON, op("eq", other=new(cls)), op("eq", other=new(cls, **kwargs))]
    ops += [get(a) for a in attrs] + methods + [HASH, FIELDS]
    return {"build": build_new(cls, **kwargs), "ops": ops}


CACHE_CASES: list[dict[str, Any]] = [
    {},
    *[{"block_size": v} for v in (1, 16, 128, 256, 7, "x", None, 2.5)],
    *[{"gpu_memory_utilization": v} for v in (0.5, 1, 1.0, 0, -0.1, 1.01, "0.3", "x", None)],
    *[{"swap_space": v} for v in (0, 4, 2.5, -1, "8", None, 200)],
    *[{"cache_dtype": v} for v in ("auto", "fp8", "fp8_e4m3", "fp8_ds_mla", "bfloat16", "FP8", "int8", 1)],
    *[{"prefix_caching_hash_algo": v} for v in ("sha256", "xxhash_cbor", "md5")],
    *[{"cpu_offload_gb": v} for v in (0, 10, -1, 0.5)],
    *[{"mamba_block_size": v} for v in (8, 0, -8, None, "16")],
    *[{"mamba_cache_dtype": v} for v in ("float32", "bfloat16")],
    *[{"mamba_ssm_cache_dtype": v} for v in ("float16", "auto", 3)],
    *[{"kv_offloading_backend": v} for v in ("lmcache", "native", "other")],
    {"kv_offloading_size": 4.0, "kv_offloading_backend": "lmcache"},
    {"kv_cache_memory_bytes": 2**30, "num_gpu_blocks_override": 64, "sliding_window": 4096},
    {"is_attention_free": True, "enable_prefix_caching": False, "kv_sharing_fast_prefill": True},
    {"calculate_kv_scales": "yes", "cpu_kvcache_space_bytes": 1024, "mamba_page_size_padded": 16},
    {"num_gpu_blocks": 10},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CACHE_CASES, ids=repr)
def test_cache_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request("CacheConfig", kwargs, CACHE_ATTRS, CACHE_METHODS))


def test_cache_config_swap_space_against_host(check: Any, platform: str) -> None:
    """The swap-space check: fine, warned (over 40% of the host) and refused (over 70%)."""
    for swap_space, tp in ((4, 8), (120, 8), (200, 8), (1000, 1), (1500, 1)):
        ops = [call("verify_with_parallel_config", new("ParallelConfig", tensor_parallel_size=tp)), HASH]
        check(platform, {"build": build_new("CacheConfig", swap_space=swap_space), "ops": ops})


def test_cache_config_positional(check: Any, platform: str) -> None:
    check(platform, {"build": build_new("CacheConfig", 32, 0.5, 2, "fp8"), "ops": [HASH, REPR]})


LOAD_CASES: list[dict[str, Any]] = [
    {},
    *[{"load_format": v} for v in ("auto", "PT", "SafeTensors", "dummy", "my_plugin", "", 5, None)],
    *[{"download_dir": v} for v in ("/models", None, 3)],
    *[{"safetensors_load_strategy": v} for v in ("eager", "torchao", "other", None)],
    *[{"model_loader_extra_config": v} for v in ({"a": 1}, {}, [1], "x", None)],
    *[{"device": v} for v in ("cuda", "cpu", None, 1)],
    *[{"ignore_patterns": v} for v in (["*.pt"], [], "x", "", ["original/**/*"], None, [1], 5)],
    *[{"use_tqdm_on_load": v} for v in (False, "no", 2)],
    *[{"pt_load_map_location": v} for v in ("cuda", {"": "cuda"}, {"cuda:1": "cuda:0"}, {"a": 1}, 5)],
    {"bogus": True},
]


@pytest.mark.parametrize("kwargs", LOAD_CASES, ids=repr)
def test_load_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request("LoadConfig", kwargs, LOAD_ATTRS, LOAD_METHODS))


OBSERVABILITY_CASES: list[dict[str, Any]] = [
    {},
    *[
        {"show_hidden_metrics_for_version": v}
        for v in ("0.13", "0.14", "0.7", "1.0.0rc1", "x.y", "", 13, None)
    ],
    *[
        {"collect_detailed_traces": v}
        for v in (None, [], ["model"], ["all"], ["model,worker"], ["x"], "model")
    ],
    *[{"kv_cache_metrics_sample": v} for v in (0.5, 1, 0, 1.5, "0.2", None)],
    {"kv_cache_metrics": True, "cudagraph_metrics": True, "enable_mfu_metrics": True},
    {"enable_layerwise_nvtx_tracing": "yes", "enable_mm_processor_stats": 1},
    {"enable_logging_iteration_details": True, "otlp_traces_endpoint": None},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", OBSERVABILITY_CASES, ids=repr)
def test_observability_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request("ObservabilityConfig", kwargs, OBSERVABILITY_ATTRS, OBSERVABILITY_METHODS))


def test_otlp_endpoint_without_opentelemetry(
    oracle: Any, platform: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endpoint needs OpenTelemetry importable where the config is built; vLLM's message ends with the
    traceback of the failed import, which names each side's own file, so only its last line is compared.
    The product side is built here with OpenTelemetry made unimportable (the worker's environment may
    have it; then it accepts, as vLLM does where it is installed)."""
    from compilation_bridge.vllm_config import ObservabilityConfig, observability

    # `import opentelemetry...` raises ImportError; submodules another test loaded are blocked too, since
    # an import finds a loaded submodule in sys.modules without looking at its package.
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    observability.otel_import_error.cache_clear()
    try:
        for endpoint in ("http://collector:4317", ""):
            expected = oracle(
                platform, {"build": build_new("ObservabilityConfig", otlp_traces_endpoint=endpoint)}
            )
            if expected["build"] == "ok":
                pytest.skip("the oracle environment has OpenTelemetry")
            with pytest.raises(ValidationError) as raised:
                ObservabilityConfig(otlp_traces_endpoint=endpoint)
            head, _, trace = expected["build"]["message"].partition("Original error:\n")
            got_head, _, got_trace = str(raised.value).partition("Original error:\n")
            assert expected["build"]["error"] == type(raised.value).__name__
            assert got_head == head
            assert got_trace.strip().splitlines()[-1] == trace.strip().splitlines()[-1]
    finally:
        observability.otel_import_error.cache_clear()


# --- random keyword sets ----------------------------------------------------------------------------

CACHE_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "block_size": sampled(None, 8, 16, 32, 64, 128, 7, "16"),
    "gpu_memory_utilization": st.one_of(st.floats(-0.5, 1.5, allow_nan=False), sampled(1, "0.5", None)),
    "swap_space": st.one_of(st.integers(-2, 300), st.floats(0, 64, allow_nan=False)),
    "cache_dtype": sampled("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "x"),
    "is_attention_free": sampled(True, False, "x"),
    "num_gpu_blocks_override": sampled(None, 1, 64, -1, "2"),
    "sliding_window": sampled(None, 128, 0, "w"),
    "enable_prefix_caching": sampled(True, False, 1, "off"),
    "prefix_caching_hash_algo": sampled("sha256", "sha256_cbor", "xxhash", "xxhash_cbor", "md5"),
    "cpu_offload_gb": st.one_of(st.integers(-1, 64), st.floats(0, 8, allow_nan=False)),
    "calculate_kv_scales": sampled(True, False, None),
    "mamba_block_size": sampled(None, 8, 16, 0, -1),
    "mamba_cache_dtype": sampled("auto", "float32", "float16", "int8"),
    "mamba_ssm_cache_dtype": sampled("auto", "float32", "float16", "bf16"),
    "kv_sharing_fast_prefill": sampled(True, False),
    "kv_cache_memory_bytes": sampled(None, 2**30, 0, -5, 1.5),
    "kv_offloading_size": sampled(None, 1.0, 4, "2"),
    "kv_offloading_backend": sampled("native", "lmcache", "x"),
}
LOAD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "load_format": sampled("auto", "pt", "SafeTensors", "GGUF", "runai_streamer", 3, ""),
    "download_dir": sampled(None, "/d", 1),
    "safetensors_load_strategy": sampled("lazy", "eager", "torchao", None),
    "model_loader_extra_config": sampled({}, {"k": "v"}, {"n": [1, 2]}, "s", [1]),
    "device": sampled(None, "cuda", "cpu", 0),
    "ignore_patterns": sampled(["original/**/*"], [], ["*.pt", "*.bin"], "x", "", [2]),
    "use_tqdm_on_load": sampled(True, False, "yes", 3),
    "pt_load_map_location": sampled("cpu", "cuda", {"": "cuda"}, {"a": 1}, None),
}
OBSERVABILITY_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "show_hidden_metrics_for_version": sampled(None, "0.13", "0.12", "0.13.1", "v0.13", "bad version", 1),
    "collect_detailed_traces": sampled(None, [], ["model"], ["worker", "all"], ["model,all"], ["bad"]),
    "kv_cache_metrics": sampled(True, False, "t"),
    "kv_cache_metrics_sample": st.one_of(st.floats(-0.5, 1.5, allow_nan=False), sampled(1, "0.1")),
    "cudagraph_metrics": sampled(True, False),
    "enable_layerwise_nvtx_tracing": sampled(True, False),
    "enable_mfu_metrics": sampled(True, False, 2),
    "enable_mm_processor_stats": sampled(True, False),
    "enable_logging_iteration_details": sampled(True, False),
}
CLASSES = {
    "CacheConfig": (CACHE_VALUES, CACHE_ATTRS, CACHE_METHODS),
    "LoadConfig": (LOAD_VALUES, LOAD_ATTRS, LOAD_METHODS),
    "ObservabilityConfig": (OBSERVABILITY_VALUES, OBSERVABILITY_ATTRS, OBSERVABILITY_METHODS),
}


@st.composite
def keyword_sets(draw: st.DrawFn, values: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    names = draw(st.lists(sampled(*values), unique=True, max_size=5))
    kwargs = {name: draw(values[name]) for name in names}
    if draw(st.integers(0, 19)) == 10:
        kwargs["not_a_field"] = 1
    return kwargs


@pytest.mark.parametrize("cls", list(CLASSES))
def test_random_keyword_sets(check: Any, platform: str, cls: str) -> None:
    values, attrs, methods = CLASSES[cls]

    @SETTINGS
    @given(keyword_sets(values))
    def run(kwargs: dict[str, Any]) -> None:
        check(platform, request(cls, kwargs, attrs, methods))

    run()


# --- inside VllmConfig --------------------------------------------------------------------------------

SUB_CONFIGS = [op("fields", on=name) for name in ("cache_config", "load_config", "observability_config")]
SUB_HASHES = [op("hash", on=name) for name in ("cache_config", "load_config", "observability_config")]
# The CPU platform sizes its KV cache from the host's memory unless told: tell it, so both sides agree.
KV_SPACE = {"VLLM_CPU_KVCACHE_SPACE": "4"}


def vllm_with(model: bool = False, **sub: dict[str, Any]) -> dict[str, Any]:
    build: dict[str, Any] = {"kind": "vllm", **sub}
    if model:
        build["model"] = tiny_model()
    # With a model the engine hash folds in transformers' config (a listed departure): left out then.
    engine_hash = [] if model else [op("hash", on="")]
    return {"build": build, "ops": [*engine_hash, *SUB_HASHES, *SUB_CONFIGS], "env": KV_SPACE}


VLLM_CASES: list[dict[str, Any]] = [
    {},
    {"cache_config": {}},
    {"cache_config": {"block_size": 16}},
    {"cache_config": {"block_size": 48}},
    {"cache_config": {"cache_dtype": "fp8"}},
    {"cache_config": {"cache_dtype": "fp8", "enable_prefix_caching": False}},
    {"cache_config": {"cache_dtype": "fp8_e5m2", "calculate_kv_scales": True}},
    {"cache_config": {"swap_space": 200}, "parallel_config": {"tensor_parallel_size": 8}},
    {"cache_config": {"kv_sharing_fast_prefill": True, "sliding_window": 64}},
    {"cache_config": {"mamba_block_size": 16}},
    {"cache_config": {"mamba_block_size": 16, "enable_prefix_caching": False}},
    {"cache_config": {"kv_cache_memory_bytes": 2**30, "cpu_offload_gb": 2}},
    {"load_config": {"load_format": "Dummy", "ignore_patterns": ["*.pt"]}},
    {"observability_config": {"kv_cache_metrics": True, "show_hidden_metrics_for_version": "0.13"}},
]


@pytest.mark.parametrize("model", [False, True], ids=["no-model", "tiny-llama"])
@pytest.mark.parametrize("sub", VLLM_CASES, ids=repr)
def test_inside_vllm_config(check: Any, platform: str, sub: dict[str, Any], model: bool) -> None:
    check(platform, vllm_with(model, **sub))


def test_kv_cache_space_from_the_environment(check: Any) -> None:
    """On CPU the KV cache space comes from VLLM_CPU_KVCACHE_SPACE (GiB); a bad value fails as in vLLM."""
    for value in ("1", "0", "64", "x"):
        req = vllm_with()
        req["env"] = {"VLLM_CPU_KVCACHE_SPACE": value}
        check("cpu", req)
