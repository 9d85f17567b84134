"""CacheConfig, LoadConfig and ObservabilityConfig over the wire, in-process: every function the `vllm` hex
package's generated modules (Vllm.Config.*) call, with their call types, answers as the class itself does;
VllmConfig takes them as sub-configs; the names still refused stay refused."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from tests.workers import payload

from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.vllm_config import (
    AttentionConfig,
    CacheConfig,
    EPLBConfig,
    KVEventsConfig,
    LoadConfig,
    ObservabilityConfig,
    ParallelConfig,
    PoolerConfig,
    ProfilerConfig,
    SpeechToTextConfig,
    StructuredOutputsConfig,
)

# Per class: the keywords it is built with, the attributes the generated module reads (get_attr) and the
# methods it calls (call_method) with this test's arguments.
GENERATED: dict[str, tuple[dict[str, Any], tuple[str, ...], dict[str, list[Any]]]] = {
    "CacheConfig": (
        {"block_size": 32, "cache_dtype": "fp8", "swap_space": 2},
        (
            "block_size",
            "cache_dtype",
            "calculate_kv_scales",
            "cpu_kvcache_space_bytes",
            "cpu_offload_gb",
            "enable_prefix_caching",
            "gpu_memory_utilization",
            "is_attention_free",
            "kv_cache_memory_bytes",
            "kv_offloading_backend",
            "kv_offloading_size",
            "kv_sharing_fast_prefill",
            "mamba_block_size",
            "mamba_cache_dtype",
            "mamba_page_size_padded",
            "mamba_ssm_cache_dtype",
            "num_cpu_blocks",
            "num_gpu_blocks",
            "num_gpu_blocks_override",
            "prefix_caching_hash_algo",
            "sliding_window",
            "swap_space",
        ),
        {"_validate_cache_dtype": ["fp8_e5m2"], "compute_hash": [], "metrics_info": []},
    ),
    "LoadConfig": (
        {"load_format": "SafeTensors", "ignore_patterns": ["*.bin"]},
        (
            "device",
            "download_dir",
            "ignore_patterns",
            "load_format",
            "model_loader_extra_config",
            "pt_load_map_location",
            "safetensors_load_strategy",
            "use_tqdm_on_load",
        ),
        {"_lowercase_load_format": ["GGUF"], "_validate_ignore_patterns": [["x"]], "compute_hash": []},
    ),
    "ObservabilityConfig": (
        {"show_hidden_metrics_for_version": "0.13", "kv_cache_metrics": True},
        (
            "collect_detailed_traces",
            "collect_model_execute_time",
            "collect_model_forward_time",
            "cudagraph_metrics",
            "enable_layerwise_nvtx_tracing",
            "enable_logging_iteration_details",
            "enable_mfu_metrics",
            "enable_mm_processor_stats",
            "kv_cache_metrics",
            "kv_cache_metrics_sample",
            "otlp_traces_endpoint",
            "show_hidden_metrics",
            "show_hidden_metrics_for_version",
        ),
        {
            "_validate_collect_detailed_traces": [["model,worker"]],
            "_validate_otlp_traces_endpoint": [None],
            "_validate_show_hidden_metrics_for_version": ["0.12"],
            "_validate_tracing_config": [],
            "compute_hash": [],
        },
    ),
}
GENERATED["AttentionConfig"] = (
    {"backend": "flash_attn", "use_trtllm_attention": False},
    (
        "backend",
        "disable_flashinfer_prefill",
        "disable_flashinfer_q_quantization",
        "flash_attn_max_num_splits_for_cuda_graph",
        "flash_attn_version",
        "use_cudnn_prefill",
        "use_prefill_decode_attention",
        "use_trtllm_attention",
        "use_trtllm_ragged_deepseek_prefill",
    ),
    {"_set_from_env_if_set": ["use_cudnn_prefill", "VLLM_USE_CUDNN_PREFILL"], "compute_hash": []},
)
GENERATED["SpeechToTextConfig"] = (
    {"sample_rate": 8000, "min_energy_split_window_size": None},
    (
        "allow_audio_chunking",
        "max_audio_clip_s",
        "min_energy_split_window_size",
        "overlap_chunk_second",
        "sample_rate",
    ),
    {},
)
GENERATED["StructuredOutputsConfig"] = (
    {"backend": "guidance", "disable_additional_properties": True},
    (
        "backend",
        "disable_additional_properties",
        "disable_any_whitespace",
        "disable_fallback",
        "enable_in_reasoning",
        "reasoning_parser",
        "reasoning_parser_plugin",
    ),
    {"_validate_structured_output_config": [], "compute_hash": []},
)
GENERATED["ProfilerConfig"] = (
    {"profiler": "cuda", "max_iterations": 3},
    (
        "delay_iterations",
        "ignore_frontend",
        "max_iterations",
        "profiler",
        "torch_profiler_dir",
        "torch_profiler_dump_cuda_time_total",
        "torch_profiler_record_shapes",
        "torch_profiler_use_gzip",
        "torch_profiler_with_flops",
        "torch_profiler_with_memory",
        "torch_profiler_with_stack",
    ),
    {
        "_get_from_env_if_set": ["max_iterations", "VLLM_PROFILER_MAX_ITERS"],
        "_set_from_env_if_set": ["delay_iterations", "VLLM_PROFILER_DELAY_ITERS", False, True],
        "_validate_profiler_config": [],
        "compute_hash": [],
    },
)
GENERATED["PoolerConfig"] = (
    {"seq_pooling_type": "MEAN", "tok_pooling_type": "STEP", "softmax": 1.0, "returned_token_ids": [3, 5]},
    (
        "activation",
        "dimensions",
        "enable_chunked_processing",
        "logit_bias",
        "max_embed_len",
        "normalize",
        "pooling_type",
        "returned_token_ids",
        "seq_pooling_type",
        "softmax",
        "step_tag_id",
        "tok_pooling_type",
        "use_activation",
    ),
    {"compute_hash": [], "get_seq_pooling_type": [], "get_tok_pooling_type": []},
)
GENERATED["EPLBConfig"] = (
    {"window_size": 100, "log_balancedness": True, "log_balancedness_interval": 5},
    (
        "log_balancedness",
        "log_balancedness_interval",
        "num_redundant_experts",
        "policy",
        "step_interval",
        "use_async",
        "window_size",
    ),
    {"_validate_eplb_config": []},
)
GENERATED["KVEventsConfig"] = (
    {"enable_kv_cache_events": True, "topic": "kv"},
    (
        "buffer_steps",
        "enable_kv_cache_events",
        "endpoint",
        "hwm",
        "max_queue_size",
        "publisher",
        "replay_endpoint",
        "topic",
    ),
    {},
)
CLASSES = {
    "AttentionConfig": AttentionConfig,
    "CacheConfig": CacheConfig,
    "EPLBConfig": EPLBConfig,
    "KVEventsConfig": KVEventsConfig,
    "LoadConfig": LoadConfig,
    "ObservabilityConfig": ObservabilityConfig,
    "PoolerConfig": PoolerConfig,
    "ProfilerConfig": ProfilerConfig,
    "SpeechToTextConfig": SpeechToTextConfig,
    "StructuredOutputsConfig": StructuredOutputsConfig,
}


def call(dispatcher: Dispatcher, **fields: Any) -> Any:
    reply = dispatcher.execute("snakebridge.call", payload("S", **fields), "worker-session")
    assert reply.success, reply.error
    return reply.result


def construct(dispatcher: Dispatcher, cls: str, module: str = "vllm.config", **kwargs: Any) -> dict[str, Any]:
    fields = {"call_type": "class", "function": "__init__", "kwargs": kwargs, "class": cls}
    return call(dispatcher, python_module=module, **fields)  # type: ignore[no-any-return]


def ref_of(ref: dict[str, Any]) -> dict[str, Any]:
    return {k: ref[k] for k in ("__type__", "__schema__", "id", "session_id", "python_module", "library")}


def plain(value: Any) -> Any:
    """What the wire gives back for a plain value (tuples travel as lists)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


@pytest.mark.parametrize("name", list(GENERATED))
def test_every_generated_function_is_served(dispatcher: Dispatcher, name: str) -> None:
    kwargs, attrs, methods = GENERATED[name]
    local = CLASSES[name](**kwargs)
    ref = construct(dispatcher, name, **kwargs)
    assert ref["type_name"] == name
    for attr in attrs:
        got = call(dispatcher, call_type="get_attr", attr=attr, function=attr, instance=ref_of(ref))
        expected = getattr(local, attr)
        if isinstance(expected, enum.Enum):  # a plain enum member travels as a ref: its name tells it
            name_of = call(
                dispatcher, call_type="get_attr", attr="name", function="name", instance=ref_of(got)
            )
            assert (got["type_name"], name_of) == (type(expected).__name__, expected.name), attr
        else:
            assert got == plain(expected), attr
    for method, args in methods.items():
        got = call(dispatcher, call_type="method", function=method, args=args, instance=ref_of(ref))
        expected = getattr(local, method)(*args)
        if isinstance(expected, CLASSES[name]):  # a model validator returns the instance: a ref comes back
            assert got["type_name"] == name, method
        else:
            assert got == plain(expected), method


def test_cache_config_checks_swap_space_against_a_parallel_config(dispatcher: Dispatcher) -> None:
    cache = construct(dispatcher, "CacheConfig", swap_space=200)
    parallel = construct(dispatcher, "ParallelConfig", tensor_parallel_size=8)
    fields = {"call_type": "method", "function": "verify_with_parallel_config", "instance": ref_of(cache)}
    reply = dispatcher.execute("snakebridge.call", payload("S", args=[ref_of(parallel)], **fields), "w")
    assert not reply.success and reply.error["type"] == "ValueError"
    with pytest.raises(ValueError) as raised:
        CacheConfig(swap_space=200).verify_with_parallel_config(ParallelConfig(tensor_parallel_size=8))
    assert reply.error["message"] == str(raised.value)


@pytest.mark.parametrize(
    "module", ["vllm.config", "vllm.config.vllm", "vllm.config.cache", "vllm.config.load"]
)
def test_the_classes_resolve_under_vllms_module_names(dispatcher: Dispatcher, module: str) -> None:
    name = {"vllm.config.load": "LoadConfig"}.get(module, "CacheConfig")
    assert construct(dispatcher, name, module)["type_name"] == name


def test_vllm_config_takes_them_as_sub_configs(dispatcher: Dispatcher) -> None:
    cache = construct(dispatcher, "CacheConfig", block_size=64)
    load = construct(dispatcher, "LoadConfig", load_format="dummy")
    observed = construct(dispatcher, "ObservabilityConfig", cudagraph_metrics=True)
    kwargs = {
        "cache_config": ref_of(cache),
        "load_config": ref_of(load),
        "observability_config": ref_of(observed),
    }
    engine = construct(dispatcher, "VllmConfig", **kwargs)
    got = call(
        dispatcher,
        call_type="get_attr",
        attr="cache_config",
        function="cache_config",
        instance=ref_of(engine),
    )
    size = call(
        dispatcher, call_type="get_attr", attr="block_size", function="block_size", instance=ref_of(got)
    )
    assert size == 64


def test_names_not_served_are_still_refused(dispatcher: Dispatcher) -> None:
    fields = {"call_type": "class", "function": "__init__", "class": "LoRAConfig"}
    reply = dispatcher.execute("snakebridge.call", payload("S", **fields), "worker-session")
    assert not reply.success
    assert "LoRAConfig" in reply.error["message"]
