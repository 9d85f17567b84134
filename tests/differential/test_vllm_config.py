"""vLLM's ``VllmConfig.__post_init__`` and the VllmConfig cases of vLLM's tests: how
``VllmConfig.__post_init__`` drives a ``CompilationConfig`` on each platform: optimization levels, default
mode, custom ops, cudagraph sizes, compile ranges, splitting ops, sequence parallelism, DeepEP, tensor
parallelism and the tiny model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from diff_harness import (
    ATTENTION_OPS,
    FIELDS,
    HASH,
    POST_INIT,
    RANGES,
    REPR,
    call,
    enum,
    get,
    op,
    scheduler,
    tiny_model,
    tiny_moe_model,
    vllm_request,
)

# Compared after every VllmConfig build (the final compilation-config fields are always compared).
AFTER = [
    HASH,
    RANGES,
    REPR,
    call("splitting_ops_contain_attention"),
    call("is_attention_compiled_piecewise"),
    call("is_custom_op_enabled", "rms_norm"),
    call("is_custom_op_enabled", "quant_fp8"),
    get("optimization_level", on=""),
    op("same_compilation_config"),
    op("hash", on="compilation_config.pass_config"),
    op("hash", on="compilation_config.dynamic_shapes_config"),
    *[call("pad_for_cudagraph", n, on="") for n in (0, 1, 3, 17, 256, 257)],
    call("compile_debug_dump_path", on=""),
    POST_INIT,
    FIELDS,
    HASH,
]


# The scheduler and parallel configs VllmConfig planned with (not with data parallelism above 1: vLLM then
# picks free network ports for its master, which differ from run to run).
SUB_FIELDS = [op("fields", on="scheduler_config"), op("fields", on="parallel_config")]


def check_vllm(check: Any, platform: str, cc: dict[str, Any] | None = None, **kw: Any) -> Any:
    dp = (kw.get("parallel_config") or {}).get("data_parallel_size", 1)
    return check(platform, vllm_request(cc, ops=AFTER + (SUB_FIELDS if dp == 1 else []), **kw))


MODELS = {"no-model": None, "tiny": tiny_model()}
LEVELS = [0, 1, 2, 3, None]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("model", list(MODELS))
def test_optimization_levels(check: Any, platform: str, model: str, level: int | None) -> None:
    """Optimization-level defaults: ``VllmConfig()`` and the tiny model at O0-O3 (and the default O2)."""
    check_vllm(check, platform, {}, model=MODELS[model], optimization_level=level)


SCENARIOS: dict[str, dict[str, Any]] = {
    "mode 0": {"mode": 0},
    "mode 1": {"mode": 1},
    "mode 2": {"mode": 2},
    "mode 3": {"mode": 3},
    "level 3 (raw int)": {"level": 3},
    "level 0": {"level": 0},
    "mode 0 + FULL": {"mode": 0, "cudagraph_mode": "FULL"},
    "mode 0 + PIECEWISE": {"mode": 0, "cudagraph_mode": "PIECEWISE"},
    "mode 2 + FULL_DECODE_ONLY": {"mode": 2, "cudagraph_mode": "FULL_DECODE_ONLY"},
    "mode 1 + FULL_AND_PIECEWISE": {"mode": 1, "cudagraph_mode": "FULL_AND_PIECEWISE"},
    "backend eager": {"backend": "eager"},
    "backend eager mode 0": {"backend": "eager", "mode": 0},
    "backend openxla mode 2": {"backend": "openxla", "mode": 2},
    "uigp + unified_attention": {
        "mode": 3,
        "use_inductor_graph_partition": True,
        "splitting_ops": ["vllm::unified_attention"],
    },
    "fuse_attn_quant PIECEWISE": {
        "mode": 3,
        "pass_config": {"fuse_attn_quant": True, "eliminate_noops": True},
        "custom_ops": ["+quant_fp8"],
        "cudagraph_mode": "PIECEWISE",
    },
    "fuse_attn_quant PIECEWISE with attention ops": {
        "mode": 3,
        "pass_config": {"fuse_attn_quant": True, "eliminate_noops": True},
        "custom_ops": ["+quant_fp8"],
        "cudagraph_mode": "PIECEWISE",
        "splitting_ops": ATTENTION_OPS,
    },
    "fuse_attn_quant PIECEWISE uigp": {
        "mode": 3,
        "pass_config": {"fuse_attn_quant": True, "eliminate_noops": True},
        "custom_ops": ["+quant_fp8"],
        "cudagraph_mode": "PIECEWISE",
        "use_inductor_graph_partition": True,
    },
    "fuse_attn_quant default cudagraph": {"mode": 3, "pass_config": {"fuse_attn_quant": True}},
    "splitting_ops [] PIECEWISE": {"mode": 3, "splitting_ops": [], "cudagraph_mode": "PIECEWISE"},
    "splitting_ops [] default": {"mode": 3, "splitting_ops": []},
    "splitting_ops [] FULL_DECODE_ONLY": {
        "mode": 3,
        "splitting_ops": [],
        "cudagraph_mode": "FULL_DECODE_ONLY",
    },
    "user splitting ops": {"mode": 3, "splitting_ops": ["silly::attention"]},
    "cudagraph NONE": {"cudagraph_mode": "NONE"},
    "cudagraph FULL": {"cudagraph_mode": "FULL"},
    "cudagraph FULL_DECODE_ONLY": {"cudagraph_mode": "FULL_DECODE_ONLY"},
    "custom_ops all": {"custom_ops": ["all"]},
    "custom_ops +quant_fp8": {"custom_ops": ["+quant_fp8"]},
    "custom_ops -rms_norm enable_sp": {"custom_ops": ["-rms_norm"], "pass_config": {"enable_sp": True}},
    "enable_sp": {"pass_config": {"enable_sp": True}},
    "fuse_gemm_comms": {"pass_config": {"fuse_gemm_comms": True}},
    "fuse_gemm_comms uigp": {"pass_config": {"fuse_gemm_comms": True}, "use_inductor_graph_partition": True},
    "eliminate_noops False": {"pass_config": {"eliminate_noops": False}},
    "explicit pass flags": {"pass_config": {"eliminate_noops": True, "fuse_attn_quant": True}},
    "fuse_allreduce_rms": {"pass_config": {"fuse_allreduce_rms": True}},
    "fuse_allreduce_rms 1MB": {
        "pass_config": {"fuse_allreduce_rms": True, "fi_allreduce_fusion_max_size_mb": 1}
    },
    "qk_norm_rope": {"pass_config": {"enable_qk_norm_rope_fusion": True}},
    "compile_sizes with capture sizes": {"compile_sizes": [3, "cudagraph_capture_sizes", 3, 1000]},
    "compile_sizes raw": {"compile_sizes": [4]},
    "split points": {"compile_ranges_split_points": [8, 32, 1, 5000, 8]},
    "split point 0": {"compile_ranges_split_points": [0]},
    "split point negative": {"compile_ranges_split_points": [-4, 16]},
    "split points large": {"compile_ranges_split_points": [2048, 2047, 4096]},
    "debug dump path": {"debug_dump_path": "dump"},
    "inductor config": {"inductor_compile_config": {"max_autotune": True, "combo_kernels": False}},
    "dynamic shapes": {"dynamic_shapes_config": {"type": "unbacked", "evaluate_guards": True}},
}


@pytest.mark.parametrize("level", [0, 2])
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scenarios(check: Any, platform: str, scenario: str, model: str, level: int) -> None:
    """``VllmConfig.__post_init__`` end states and the cases of vLLM's test_config.py files, with and without
    the tiny model, at O0 and O2."""
    check_vllm(check, platform, SCENARIOS[scenario], model=MODELS[model], optimization_level=level)


SIZES_CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default": ({}, {}),
    "user max 100": ({"max_cudagraph_capture_size": 100}, {}),
    "user max 300": ({"max_cudagraph_capture_size": 300}, {}),
    "user max 6": ({"max_cudagraph_capture_size": 6}, {}),
    "user max 0": ({"max_cudagraph_capture_size": 0}, {}),
    "mbt 100": ({}, {"max_num_batched_tokens": 100, "max_num_seqs": 100}),
    "sizes with 3000": ({"cudagraph_capture_sizes": [4, 2, 2, 1, 3000]}, {}),
    "sizes and max mismatch": ({"cudagraph_capture_sizes": [1, 2, 4], "max_cudagraph_capture_size": 8}, {}),
    "sizes and max agree": ({"cudagraph_capture_sizes": [1, 2, 4], "max_cudagraph_capture_size": 4}, {}),
    "empty sizes": ({"cudagraph_capture_sizes": []}, {}),
    "max_num_seqs 256": ({}, {"max_num_seqs": 256}),
    "max_num_seqs 1": ({}, {"max_num_seqs": 1}),
    "mbt 8": ({}, {"max_num_batched_tokens": 8, "max_num_seqs": 8}),
    "mbt 8192": ({}, {"max_num_batched_tokens": 8192, "max_num_seqs": 256}),
    "mbt 600 sizes above": ({"cudagraph_capture_sizes": [512, 700, 64]}, {"max_num_batched_tokens": 600}),
    "max above mbt": (
        {"max_cudagraph_capture_size": 4096},
        {"max_num_batched_tokens": 1024, "max_num_seqs": 512},
    ),
}


@pytest.mark.parametrize("mode", [None, "FULL_DECODE_ONLY", "PIECEWISE", "NONE"])
@pytest.mark.parametrize("case", list(SIZES_CASES))
def test_cudagraph_sizes(check: Any, platform: str, case: str, mode: str | None) -> None:
    """``VllmConfig._set_cudagraph_sizes`` (with the tiny model, where sizes are planned on CUDA)."""
    cc, sched = SIZES_CASES[case]
    cc = {**cc, "cudagraph_mode": mode} if mode else cc
    check_vllm(check, platform, cc, model=tiny_model(), scheduler_config=scheduler(**sched))


# vLLM's test_cudagraph_sizes_post_init: (sizes, max, tp, enable_sp, max_num_batched_tokens, cudagraph_mode)
POST_INIT_ROWS: list[tuple[list[int] | None, int | None, int, bool, int, str]] = [
    (None, None, 1, False, 2048, "FULL_AND_PIECEWISE"),
    ([1, 2, 4], 4, 1, False, 2048, "FULL_AND_PIECEWISE"),
    ([1, 2, 4], 8, 1, False, 2048, "FULL_AND_PIECEWISE"),
    ([1, 256], None, 1, False, 2048, "FULL_AND_PIECEWISE"),
    ([], None, 1, False, 2048, "NONE"),
    (None, 0, 1, False, 2048, "NONE"),
    (None, 257, 1, False, 2048, "FULL_AND_PIECEWISE"),
    ([1, 2, 4, 15], None, 1, False, 2048, "FULL_AND_PIECEWISE"),
    ([1, 2, 4, 15], None, 2, True, 2048, "FULL_AND_PIECEWISE"),
    ([1, 2, 4, 15], None, 1, False, 8, "FULL_AND_PIECEWISE"),
    ([], None, 1, False, 2048, "FULL_AND_PIECEWISE"),
    (None, 0, 1, False, 2048, "FULL_AND_PIECEWISE"),
]


@pytest.mark.parametrize(("sizes", "mx", "tp", "sp", "mbt", "cg"), POST_INIT_ROWS, ids=repr)
def test_cudagraph_sizes_post_init(
    check: Any, platform: str, sizes: list[int] | None, mx: int | None, tp: int, sp: bool, mbt: int, cg: str
) -> None:
    """vLLM's ``test_cudagraph_sizes_post_init``, all twelve rows, with the tiny model in place of
    opt-125m."""
    cc: dict[str, Any] = {
        "cudagraph_capture_sizes": sizes,
        "max_cudagraph_capture_size": mx,
        "cudagraph_mode": cg,
        "pass_config": {
            "enable_sp": sp,
            "fuse_norm_quant": True,
            "fuse_act_quant": True,
            "eliminate_noops": True,
        },
    }
    check_vllm(
        check,
        platform,
        cc,
        model=tiny_model(),
        scheduler_config=scheduler(max_num_batched_tokens=mbt, max_num_seqs=min(mbt, 128)),
        parallel_config={"tensor_parallel_size": tp},
    )


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("model", list(MODELS))
def test_tensor_parallel(check: Any, platform: str, tp: int, sp: bool, model: str) -> None:
    """Tensor parallelism on the stand-in node of 8 GPUs: up to 8 plans (sizes not multiple of tp dropped
    with sequence parallelism), above 8 the world-size ValidationError; the tiny model's 4 heads limit tp."""
    cc = {"pass_config": {"enable_sp": sp}}
    check_vllm(check, platform, cc, model=MODELS[model], parallel_config={"tensor_parallel_size": tp})


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("mb", [None, 1, 0.25])
def test_allreduce_fusion_ranges(check: Any, platform: str, tp: int, mb: float | None) -> None:
    """``VllmConfig._set_compile_ranges``: with ``fuse_allreduce_rms`` the flashinfer size limit adds a split
    point (hidden size 64, bfloat16)."""
    cc = {"pass_config": {"fuse_allreduce_rms": True, "fi_allreduce_fusion_max_size_mb": mb}}
    check_vllm(
        check,
        platform,
        cc,
        model=None if tp > 2 else tiny_model(),
        scheduler_config=scheduler(max_num_batched_tokens=8192, max_num_seqs=256),
        parallel_config={"tensor_parallel_size": tp},
    )


@pytest.mark.parametrize("dp", [1, 2, 8])
@pytest.mark.parametrize(
    "all2all", ["deepep_high_throughput", "deepep_low_latency", "allgather_reducescatter"]
)
@pytest.mark.parametrize("uigp", [False, True])
def test_deepep(check: Any, platform: str, dp: int, all2all: str, uigp: bool) -> None:
    """vLLM's ``test_moe_splitting_ops_deepep_ht_inductor_partition`` and ``set_splitting_ops_for_v1`` through
    VllmConfig (no model, so the data-parallel size is used)."""
    cc = {
        "mode": 3,
        "use_inductor_graph_partition": uigp,
        "splitting_ops": ["vllm::unified_attention", "vllm::moe_forward", "vllm::moe_forward_shared"],
    }
    check_vllm(check, platform, cc, parallel_config={"all2all_backend": all2all, "data_parallel_size": dp})
    check_vllm(check, platform, {}, parallel_config={"all2all_backend": all2all, "data_parallel_size": dp})


@pytest.mark.parametrize("dp", [1, 2])
def test_deepep_dense_model(check: Any, platform: str, dp: int) -> None:
    """With a (dense) model, VllmConfig passes data-parallel size 1 to ``set_splitting_ops_for_v1``."""
    check_vllm(
        check,
        platform,
        {"mode": 3, "cudagraph_mode": "PIECEWISE"},
        model=tiny_model(),
        parallel_config={"all2all_backend": "deepep_high_throughput", "data_parallel_size": dp},
    )


@pytest.mark.parametrize(
    ("backend", "custom_ops"),
    [
        ("eager", []),
        ("eager", ["+fused_layernorm"]),
        ("eager", ["all", "-fused_layernorm"]),
        ("inductor", []),
        ("inductor", ["none", "+fused_layernorm"]),
        ("inductor", ["none", "-fused_layernorm"]),
    ],
)
def test_is_custom_op_enabled_vllm(check: Any, platform: str, backend: str, custom_ops: list[str]) -> None:
    """vLLM's ``test_is_custom_op_enabled``."""
    req = vllm_request(
        {"backend": backend, "custom_ops": custom_ops},
        ops=[call("is_custom_op_enabled", "fused_layernorm"), get("custom_ops")],
    )
    check(platform, req)


ENABLED_OPS_ROWS: list[tuple[str, int, str]] = [
    ("", 0, "eager"),
    ("", 3, "eager"),
    ("", 0, "inductor"),
    ("", 1, "inductor"),
    ("", 2, "inductor"),
    ("", 3, "inductor"),
    ("+rms_norm,-silu_and_mul", 0, "inductor"),
    ("none,-rms_norm,+relu3", 1, "eager"),
    ("all,-silu_and_mul", 2, "inductor"),
    ("-relu3,+relu2", 3, "eager"),
    ("none,-relu3,+rms_norm,+silu_and_mul", 3, "eager"),
    ("-rms_norm", 3, "eager"),
    ("none,+relu3", 3, "inductor"),
    ("all,-rms_norm", 3, "inductor"),
    ("all,none", 3, "inductor"),
    ("all,+rms_norm,all", 3, "inductor"),
    ("+rms_norm,-rms_norm", 3, "inductor"),
]


@pytest.mark.parametrize(("ops", "mode", "backend"), ENABLED_OPS_ROWS, ids=repr)
def test_enabled_custom_ops(check: Any, platform: str, ops: str, mode: int, backend: str) -> None:
    """vLLM's ``test_enabled_ops``: the config side (which ops the defaulted custom_ops enable)."""
    custom_ops = [o for o in ops.split(",") if o]
    names = ("rms_norm", "silu_and_mul", "gelu_and_mul", "relu3")
    req = vllm_request(
        {"custom_ops": custom_ops, "mode": mode, "backend": backend},
        ops=[*[call("is_custom_op_enabled", n) for n in names], get("custom_ops")],
    )
    check(platform, req)


def test_compile_ranges_example(check: Any, platform: str) -> None:
    """vLLM's ``test_compile_config_get_compile_ranges``: the same object is mutated."""
    req = vllm_request(
        {"compile_ranges_split_points": [8, 32]},
        scheduler_config=scheduler(max_num_batched_tokens=8192, max_model_len=8192),
        ops=[RANGES, op("same_compilation_config"), HASH],
    )
    check(platform, req)


@pytest.mark.parametrize(
    "model_kwargs",
    [
        {"enforce_eager": True},
        {"enforce_eager": False},
        {"max_model_len": 128},
        {"dtype": "float32"},
        {"dtype": "float16"},
        {"runner": "pooling"},
        {"convert": "embed"},
        {"max_model_len": 1024},
        {"max_model_len": 0},
    ],
    ids=repr,
)
@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_model_options(check: Any, platform: str, model_kwargs: dict[str, Any], level: int) -> None:
    """``VllmConfig.__post_init__`` with a model and ``enforce_eager`` (level forced to O0), and model
    variants."""
    check_vllm(check, platform, {}, model=tiny_model(**model_kwargs), optimization_level=level)
    check_vllm(check, platform, {"mode": 3}, model=tiny_model(**model_kwargs), optimization_level=level)


@pytest.mark.parametrize(
    "level",
    [4, -1, "2", "O2", None, 2.0, enum("OptimizationLevel", "O1")],
    ids=repr,
)
def test_optimization_level_values(check: Any, platform: str, level: Any) -> None:
    """Values given to ``optimization_level`` go through pydantic validation."""
    req = vllm_request({}, ops=[get("optimization_level", on="")])
    if level is not None:
        req["build"]["optimization_level"] = level
    check(platform, req)


def test_compilation_config_as_dict(check: Any, platform: str) -> None:
    """``VllmConfig(compilation_config={...})`` validates the dict into a CompilationConfig."""
    for cc in ({"mode": 3}, {"mode": "bogus"}, {"cudagraph_mode": "bogus"}, {"bogus": 1}, {}):
        req = {"build": {"kind": "vllm", "compilation_config": cc}, "ops": [HASH, RANGES]}
        check(platform, req)


@pytest.mark.parametrize(
    "sched",
    [
        {"max_num_batched_tokens": 64, "max_num_seqs": 128},
        {"max_num_batched_tokens": 0},
        {
            "max_num_batched_tokens": 256,
            "max_num_seqs": 256,
            "enable_chunked_prefill": False,
            "max_model_len": 512,
        },
    ],
    ids=repr,
)
def test_scheduler_errors(check: Any, platform: str, sched: dict[str, Any]) -> None:
    """SchedulerConfig's own checks, as a stage of building the VllmConfig."""
    check_vllm(check, platform, {}, scheduler_config=scheduler(**sched))


SUB_CONFIGS = (
    "model_config",
    "scheduler_config",
    "parallel_config",
    "device_config",
    "cache_config",
    "load_config",
    "observability_config",
    "attention_config",
    "structured_outputs_config",
    "profiler_config",
)


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize(
    "cc",
    [{}, {"mode": 3}, {"mode": 0}, {"custom_ops": ["all"]}, {"debug_dump_path": "dump"}],
    ids=repr,
)
def test_vllm_config_hash(check: Any, platform: str, model: str, cc: dict[str, Any]) -> None:
    """``VllmConfig.compute_hash()`` (10 hex characters over vLLM's version and every sub-config's hash)
    and the hashes of the sub-configs it combines; with a model, ModelConfig's hash folds in transformers'
    JSON of its config object."""
    hashed = [c for c in SUB_CONFIGS if MODELS[model] or c != "model_config"]
    ops = [call("compute_hash", on=""), *[op("hash", on=c) for c in hashed]]
    check(platform, vllm_request(cc, model=MODELS[model], ops=ops))


@pytest.mark.parametrize("dp", [1, 2])
@pytest.mark.parametrize("all2all", ["deepep_high_throughput", "allgather_reducescatter"])
@pytest.mark.parametrize("cudagraph_mode", [None, "PIECEWISE", "FULL_DECODE_ONLY"])
def test_moe_model(check: Any, platform: str, dp: int, all2all: str, cudagraph_mode: str | None) -> None:
    """A mixture-of-experts model: VllmConfig passes the data-parallel size to ``set_splitting_ops_for_v1``
    (DeepEP high-throughput with dp > 1 disables CUDA graphs), and ``is_moe_model`` reaches ParallelConfig."""
    cc = {"mode": 3} if cudagraph_mode is None else {"mode": 3, "cudagraph_mode": cudagraph_mode}
    parallel = {"all2all_backend": all2all, "data_parallel_size": dp}
    check_vllm(check, platform, cc, model=tiny_moe_model(), parallel_config=parallel)
    check_vllm(check, platform, {}, model=tiny_moe_model(), parallel_config={"tensor_parallel_size": 2})


@pytest.mark.parametrize("pp", [2, 4])
@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("sp", [False, True])
def test_pipeline_parallel(check: Any, platform: str, pp: int, tp: int, sp: bool) -> None:
    """``VllmConfig.__post_init__`` with pipeline parallelism, sequence parallelism appends ``+rms_norm``
    again; world sizes above the node's 8 GPUs fail on CUDA."""
    cc = {"pass_config": {"enable_sp": sp}}
    parallel = {"pipeline_parallel_size": pp, "tensor_parallel_size": tp}
    check_vllm(check, platform, cc, parallel_config=parallel)
    check_vllm(check, platform, cc, model=tiny_model(), parallel_config=parallel)


# --- the rest of VllmConfig's functions, called again on a built config ----------------------------------

ROOT = ""  # ops "on" the VllmConfig itself
TINY_MAMBA = str(Path(__file__).resolve().parent / "models" / "tiny-mamba")
# What a built config's own calls touch: compared after them (the compilation config's fields always are).
# (CacheConfig's fields one by one: the CPU platform's KV-cache space is the planning host's, a departure.)
CACHE_FIELDS = (
    "block_size",
    "enable_prefix_caching",
    "mamba_block_size",
    "mamba_page_size_padded",
    "cache_dtype",
    "mamba_ssm_cache_dtype",
)
AFTER_CALLS = [
    *[get(name, on="cache_config") for name in CACHE_FIELDS],
    op("fields", on="structured_outputs_config"),
    get("lora_config", on=ROOT),
    get("kv_events_config", on=ROOT),
    RANGES,
    HASH,
]
AGAIN = [
    get("needs_dp_coordinator", on=ROOT),
    get("quant_config", on=ROOT),
    call("get_quantization_config", {"__root__": "model_config"}, {"__root__": "load_config"}, on=ROOT),
    call("_get_quantization_config", {"__root__": "model_config"}, {"__root__": "load_config"}, on=ROOT),
    call("enable_trace_function_call_for_thread", on=ROOT),
    call("try_verify_and_update_config", on=ROOT),
    get("config_updated", on="model_config"),
    call("_set_cudagraph_sizes", on=ROOT),
    call("_set_compile_ranges", on=ROOT),
    POST_INIT,
]
DEFAULTS_CALLS = [
    call("_set_config_default", {"__root__": "compilation_config"}, "max_cudagraph_capture_size", 7, on=ROOT),
    call("_set_config_default", {"__root__": "compilation_config"}, "debug_dump_path", None, on=ROOT),
    call("_set_config_default", {"__root__": "compilation_config"}, "no_such_field", 1, on=ROOT),
    call("_set_config_default", {"__root__": "compilation_config"}, 3, 1, on=ROOT),
    call(
        "_apply_optimization_level_defaults",
        {
            "compilation_config": {"cudagraph_mode": "NONE", "pass_config": {"fuse_norm_quant": True}},
            "no_such_config": {"x": 1},
            "kv_events_config": "set by a default",
        },
        on=ROOT,
    ),
    call(
        "_apply_optimization_level_defaults", {"compilation_config": {"inductor_compile_config": 5}}, on=ROOT
    ),
    call("_apply_optimization_level_defaults", {}, on=ROOT),
    call("_apply_optimization_level_defaults", [], on=ROOT),
]
AGAIN_CASES: dict[str, dict[str, Any]] = {
    "no model": {},
    "tiny": {"model": tiny_model()},
    "tiny eager": {"model": tiny_model(enforce_eager=True)},
    "tiny dp 2": {"model": tiny_model(), "parallel_config": {"data_parallel_size": 2}},
    "tiny dp 2 external lb": {
        "model": tiny_model(),
        "parallel_config": {"data_parallel_size": 2, "data_parallel_external_lb": True},
    },
    "moe dp 2 external lb": {
        "model": tiny_moe_model(),
        "parallel_config": {"data_parallel_size": 2, "data_parallel_external_lb": True},
    },
    "no model dp 2": {"parallel_config": {"data_parallel_size": 2}},
    "sizes and max": {"cc": {"cudagraph_capture_sizes": [1, 2, 4, 64], "max_cudagraph_capture_size": 64}},
    "split points": {"model": tiny_model(), "cc": {"compile_ranges_split_points": [8, 32, 1, 8]}},
}


@pytest.mark.parametrize("case", list(AGAIN_CASES))
def test_functions_on_a_built_config(check: Any, platform: str, case: str) -> None:
    """``needs_dp_coordinator``, ``quant_config`` and ``get_quantization_config`` (None: unquantized),
    ``enable_trace_function_call_for_thread`` without ``VLLM_TRACE_FUNCTION``,
    ``try_verify_and_update_config`` (once per model config: the post-init ran it), and the post-init's own
    steps called again: the results, and the configs they touch afterwards."""
    kw = dict(AGAIN_CASES[case])
    req = vllm_request(kw.pop("cc", {}), ops=AGAIN + AFTER_CALLS, **kw)
    req["env"] = {"VLLM_TRACE_FUNCTION": None}
    check(platform, req)
    check(
        platform, vllm_request({}, ops=[*AGAIN, *AFTER_CALLS], **kw) | {"env": {"VLLM_TRACE_FUNCTION": "0"}}
    )


@pytest.mark.parametrize("model", ["no-model", "tiny"])
def test_defaults_written_again(check: Any, platform: str, model: str) -> None:
    """``_set_config_default`` and ``_apply_optimization_level_defaults`` on a built config: a default is
    written only where the field is still None, nested dicts reach sub-configs, unknown names are skipped,
    a missing attribute or a name that is no string fails as in vLLM."""
    check(platform, vllm_request({}, model=MODELS[model], ops=DEFAULTS_CALLS + AFTER_CALLS))


def test_trace_variable_not_an_integer(check: Any, platform: str) -> None:
    """``VLLM_TRACE_FUNCTION`` is read as vLLM reads it: a value that is no integer is int()'s ValueError."""
    req = vllm_request({}, ops=[call("enable_trace_function_call_for_thread", on=ROOT)])
    check(platform, req | {"env": {"VLLM_TRACE_FUNCTION": "yes"}})


WITH_HF = [
    get("architectures", on="@model_config"),
    get("architecture", on="@model_config"),
    op("fields", on="@model_config.model_arch_config"),
    get("config_updated", on="@model_config"),
    op("fields", on="@compilation_config"),
    *[get(name, on="@cache_config") for name in CACHE_FIELDS],
    op("same_compilation_config"),
    get("architectures", on="model_config"),
]


@pytest.mark.parametrize(
    "architectures",
    [None, ["MistralForCausalLM"], ["MixtralForCausalLM"], ["NoSuchForCausalLM"], []],
    ids=repr,
)
def test_with_hf_config(check: Any, platform: str, architectures: list[str] | None) -> None:
    """``with_hf_config``: a copy of the config whose model config holds the model's own Hugging Face config
    (a transformers config in vLLM, a dict here) with its architectures replaced; its post-init runs again
    on the same sub-configs, and the original's model config is untouched."""
    hf = {"__root__": "model_config.hf_config"}
    args = [hf] if architectures is None else [hf, architectures]
    ops = [{"op": "keep", "name": "with_hf_config", "args": args, "on": ROOT}, *WITH_HF]
    check(platform, vllm_request({}, model=tiny_model(), ops=ops))


def test_with_hf_config_without_a_model(check: Any, platform: str) -> None:
    """Without a model there is no model config to copy: vLLM's AttributeError."""
    ops = [{"op": "keep", "name": "with_hf_config", "args": [{}], "on": ROOT}]
    check(platform, vllm_request({}, ops=ops))


@pytest.mark.parametrize("prefix_caching", [None, True, False])
@pytest.mark.parametrize("mamba_block_size", [None, 16])
def test_mamba_update(
    check: Any, platform: str, prefix_caching: bool | None, mamba_block_size: int | None
) -> None:
    """vLLM's ``MambaModelConfig`` update, which ``try_verify_and_update_config`` runs in the post-init: the
    mamba block size follows prefix caching, else the model length."""
    cache = {
        k: v
        for k, v in (("enable_prefix_caching", prefix_caching), ("mamba_block_size", mamba_block_size))
        if v is not None
    }
    req = vllm_request({}, model={"model": TINY_MAMBA, "skip_tokenizer_init": True}, ops=AGAIN + AFTER_CALLS)
    req["build"]["cache_config"] = cache
    check(platform, req)
