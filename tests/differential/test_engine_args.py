"""``EngineArgs``: the arguments of ``vllm serve`` / ``vllm.LLM`` and ``create_engine_config()``, which
turns them into a whole ``VllmConfig``. Each request builds the arguments, creates the engine config for a
usage context, and compares every sub-config field by field and its hash, the model facts the plan reads, and
the arguments afterwards (``create_engine_config`` resolves defaults into them, as vLLM's does) with what
vLLM 0.14.0 answers, on both platforms; invalid sets are compared error for error.

Every request names a model folder that exists: vLLM run offline (as the oracle runs) resolves a model
name that is not a local folder to its hub cache while constructing the arguments, and fails there; this
worker has no hub, constructs the arguments as vLLM does online, and refuses such a model when
`create_engine_config` builds its ModelConfig (tests/vllm_config/test_cfg_engine_args.py)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from diff_harness import FIELDS, REPR, TINY_LLAMA, TINY_MIXTRAL, build_new, enum, get, op
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.generated_getters import GETTERS

EXAMPLES = int(os.environ.get("DIFFERENTIAL_EXAMPLES", "1000"))
SETTINGS = settings(
    max_examples=max(EXAMPLES // 20, 1),
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

# Read field by field; `device_config` (vLLM's `torch.device`, a type name here: a listed departure) only by
# its hash, `instance_id` (the creation time in nanoseconds) not at all.
SUB_CONFIGS = (
    "cache_config",
    "parallel_config",
    "scheduler_config",
    "load_config",
    "attention_config",
    "lora_config",
    "speculative_config",
    "structured_outputs_config",
    "observability_config",
    "compilation_config",
    "profiler_config",
    "kv_transfer_config",
    "kv_events_config",
    "ec_transfer_config",
    "additional_config",
    "optimization_level",
)
# The sub-configs' own hashes, ModelConfig's (over transformers' JSON of its config object) among them.
HASHED = ("model_config", "device_config", *(name for name in SUB_CONFIGS[:13] if name != "kv_events_config"))
# The CPU platform sizes the KV cache from the machine's memory unless told: told here, on both sides.
ENV = {"VLLM_CPU_KVCACHE_SPACE": "4"}
# What the plan reads of the model (its hf_config is a transformers object in vLLM, a dict here).
MODEL_FACTS = ("model", "tokenizer", "max_model_len", "dtype", "runner_type", "skip_tokenizer_init", "is_moe")
USAGES = (None, "LLM_CLASS", "OPENAI_API_SERVER", "ENGINE_CONTEXT")


# Ports vLLM picks free when data parallelism has none given: different on each side, read by count.
PORTS = ("_data_parallel_master_port_list", "data_parallel_master_port")
# A speculative config holds the target's and the draft's ModelConfig (a transformers config inside).
SPECULATIVE_MODELS = ("target_model_config", "draft_model_config")
# What create_engine_config writes back into the arguments (read one by one where the whole can't be).
RESOLVED = (
    "model",
    "tokenizer",
    "max_num_batched_tokens",
    "max_num_seqs",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "data_parallel_rank",
    "data_parallel_size_local",
    "data_parallel_hybrid_lb",
    "quantization",
    "load_format",
)


def create(usage: str | None = "LLM_CLASS", **kwargs: Any) -> dict[str, Any]:
    """The ops: `create_engine_config(usage_context)` kept, then everything of the config it returned."""
    context = enum("UsageContext", usage) if usage else None
    data_parallel = kwargs.get("data_parallel_size", 1) > 1
    speculative = kwargs.get("speculative_config") is not None
    ops = [op("keep", name="create_engine_config", args=[context])]
    for name in SUB_CONFIGS:
        if name == "parallel_config" and data_parallel:
            ops += [get(a, on="@parallel_config") for a in GETTERS["ParallelConfig"] if a not in PORTS]
            ops += [op("len", on="@parallel_config._data_parallel_master_port_list")]
        elif name == "speculative_config" and speculative:
            getters = GETTERS["SpeculativeConfig"]
            ops += [get(a, on="@speculative_config") for a in getters if a not in SPECULATIVE_MODELS]
        else:
            ops.append(get(name, on="@"))
    ops += [op("hash", on=f"@{name}") for name in HASHED if not (data_parallel and name == "parallel_config")]
    ops += [get(name, on="@model_config") for name in MODEL_FACTS]
    if speculative:  # the arguments' speculative dict now holds the target's configs too
        return {
            "build": build_new("EngineArgs", **kwargs),
            "ops": [*ops, *map(get, RESOLVED)],
            "final": False,
            "env": ENV,
        }
    ops += [REPR]  # the arguments after creation
    return {"build": build_new("EngineArgs", **kwargs), "ops": ops, "env": ENV}


MODELS_DIR = TINY_MIXTRAL.parent


def llama(**kwargs: Any) -> dict[str, Any]:
    return {"model": str(TINY_LLAMA), **kwargs}


def mixtral(**kwargs: Any) -> dict[str, Any]:
    return {"model": str(TINY_MIXTRAL), **kwargs}


CASES: list[dict[str, Any]] = [
    llama(),
    llama(skip_tokenizer_init=True),
    mixtral(),
    mixtral(enable_expert_parallel=True, tensor_parallel_size=2),
    llama(max_model_len=256),
    llama(max_model_len=64, enable_chunked_prefill=False),
    llama(enable_chunked_prefill=False),
    llama(enable_prefix_caching=False),
    llama(max_num_seqs=8),
    llama(max_num_batched_tokens=512),
    llama(max_num_batched_tokens=64, max_num_seqs=128),
    llama(tensor_parallel_size=2),
    llama(pipeline_parallel_size=2),
    llama(tensor_parallel_size=2, pipeline_parallel_size=2, data_parallel_size=2),
    llama(data_parallel_size=2, data_parallel_size_local=1),
    llama(data_parallel_size=4, data_parallel_size_local=2, data_parallel_start_rank=2),
    llama(data_parallel_size=2, data_parallel_rank=1),
    llama(data_parallel_size=2, nnodes=2, node_rank=1),
    llama(data_parallel_size=2, nnodes=2, node_rank=1, data_parallel_external_lb=True),
    llama(data_parallel_address="10.0.0.2", data_parallel_rpc_port=13345),
    llama(enable_lora=True),
    llama(enable_lora=True, max_loras=4, max_cpu_loras=8, max_lora_rank=64),
    llama(enable_lora=True, max_cpu_loras=0),
    llama(enforce_eager=True),
    llama(compilation_config={"mode": 3}),
    llama(compilation_config={"mode": 0}),
    llama(compilation_config={"cudagraph_capture_sizes": [1, 2, 4]}),
    llama(cudagraph_capture_sizes=[1, 2, 4, 8]),
    llama(max_cudagraph_capture_size=16),
    llama(optimization_level=0),
    llama(optimization_level=3),
    llama(kv_cache_dtype="fp8"),
    llama(block_size=32),
    llama(attention_backend="FLASH_ATTN"),
    llama(attention_backend="flex_attention"),
    llama(reasoning_parser="deepseek_r1"),
    llama(additional_config={"b": [1, 2], "a": "x"}),
    llama(dtype="float32"),
    llama(seed=7, served_model_name="tiny"),
    llama(tokens_only=True),
    llama(scheduling_policy="priority", stream_interval=4),
    llama(async_scheduling=True),
    llama(kv_sharing_fast_prefill=True),
    llama(collect_detailed_traces=["model"]),
    llama(load_format="dummy"),
    llama(runner="pooling"),
    llama(speculative_config={"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}),
    llama(speculative_config={"method": "eagle3", "model": str(TINY_LLAMA), "num_speculative_tokens": 2}),
    llama(
        enable_lora=True,
        speculative_config={"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4},
    ),
    # What vLLM refuses, error for error.
    llama(logits_processor_pattern="x.*"),
    llama(max_num_partial_prefills=2),
    llama(speculative_config={"method": "draft_model", "model": str(TINY_LLAMA)}),
    llama(pipeline_parallel_size=2, distributed_executor_backend="uni"),
    llama(
        enable_lora=True,
        max_num_batched_tokens=64,
        max_num_seqs=32,
        speculative_config={"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4},
    ),
    llama(speculative_config={"method": "ngram"}),
    llama(default_mm_loras={"image": "/adapters/a"}),
    llama(decode_context_parallel_size=3, tensor_parallel_size=2),
    llama(data_parallel_hybrid_lb=True, data_parallel_external_lb=True),
    llama(data_parallel_hybrid_lb=True),
    llama(data_parallel_rank=1, data_parallel_size_local=2),
    llama(nnodes=2, node_rank=2),
    llama(nnodes=2, data_parallel_backend="ray"),
    llama(data_parallel_backend="bogus"),
    llama(attention_backend="FLASH_ATTN", attention_config={"backend": "FLEX_ATTENTION"}),
    llama(cudagraph_capture_sizes=[1], compilation_config={"cudagraph_capture_sizes": [2]}),
    llama(max_cudagraph_capture_size=8, compilation_config={"max_cudagraph_capture_size": 8}),
    llama(max_model_len=-5),
    llama(gpu_memory_utilization=1.5),
    llama(block_size=7),
    llama(tensor_parallel_size=0),
    llama(attention_backend="no_such_backend"),
    # config.json files that leave their sizes to the transformers class (docs/configuration.md).
    {"model": str(MODELS_DIR / "minimal-mistral")},
    {"model": str(MODELS_DIR / "minimal-qwen2"), "max_model_len": 4096},
    {"model": str(MODELS_DIR / "minimal-gpt2"), "tensor_parallel_size": 2},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_create_engine_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, create(**kwargs))


@pytest.mark.parametrize("usage", USAGES)
@pytest.mark.parametrize(
    "kwargs", [llama(), llama(max_model_len=128), llama(tensor_parallel_size=2)], ids=repr
)
def test_usage_contexts(check: Any, platform: str, usage: str | None, kwargs: dict[str, Any]) -> None:
    """The batch defaults depend on where the engine is made (the LLM class, the API server, ...)."""
    check(platform, create(usage, **kwargs))


@pytest.mark.parametrize(
    "kwargs",
    [llama(), llama(bogus=1), llama(compilation_config={"mode": 9}), llama(eplb_config={"window_size": 5})],
    ids=repr,
)
def test_construction(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """The arguments alone: their fields, repr, and the dict forms `__post_init__` turns into configs."""
    check(platform, {"build": build_new("EngineArgs", **kwargs), "ops": [REPR, FIELDS]})


def test_async_engine_args(check: Any, platform: str) -> None:
    req = create(**llama(enable_log_requests=True))
    req["build"]["cls"] = "AsyncEngineArgs"
    check(platform, req)


def test_the_engine_config_is_kept_and_hashes_alike(check: Any, platform: str) -> None:
    """The config it returns reads back as a VllmConfig: its compilation plan and hash."""
    ops = [
        op("keep", name="create_engine_config"),
        op("hash", on="@compilation_config"),
        op("fields", on="@compilation_config"),
    ]
    ops += [
        op("call", on="@compilation_config", name="get_compile_ranges"),
        op("repr", on="@parallel_config"),
    ]
    check(platform, {"build": build_new("EngineArgs", **llama()), "ops": ops, "env": ENV})


KEYWORDS = {
    "max_model_len": st.sampled_from([None, 32, 128, 2048, 0]),
    "max_num_seqs": st.sampled_from([None, 1, 16, 256]),
    "max_num_batched_tokens": st.sampled_from([None, 16, 1024, 8192]),
    "enable_chunked_prefill": st.sampled_from([None, True, False]),
    "enable_prefix_caching": st.sampled_from([None, True, False]),
    "tensor_parallel_size": st.sampled_from([1, 2, 4]),
    "pipeline_parallel_size": st.sampled_from([1, 2]),
    "data_parallel_size": st.sampled_from([1, 2]),
    "enforce_eager": st.booleans(),
    "enable_lora": st.booleans(),
    "block_size": st.sampled_from([None, 16, 32, 64]),
    "kv_cache_dtype": st.sampled_from(["auto", "fp8", "bfloat16"]),
    "optimization_level": st.sampled_from([0, 1, 2, 3]),
    "compilation_config": st.sampled_from([{}, {"mode": 0}, {"mode": 3}, {"cudagraph_mode": "NONE"}]),
    "dtype": st.sampled_from(["auto", "float16", "float32"]),
}


@SETTINGS
@given(
    kwargs=st.fixed_dictionaries({}, optional=KEYWORDS),
    usage=st.sampled_from(USAGES),
    model=st.sampled_from([TINY_LLAMA, TINY_MIXTRAL]),
)
def test_random_argument_sets(
    check: Any, platform: str, kwargs: dict[str, Any], usage: str | None, model: Any
) -> None:
    check(platform, create(usage, model=str(model), **kwargs))
