"""Ref states: config objects come back exactly, and nothing but allowlisted types ever comes back."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compilation_bridge.refs import state as refstate
from compilation_bridge.vllm_config import (
    AsyncEngineArgs,
    AttentionConfig,
    BeamSearchParams,
    CacheConfig,
    CompilationConfig,
    CompilationMode,
    CUDAGraphMode,
    DynamicShapesConfig,
    ECTransferConfig,
    EngineArgs,
    EPLBConfig,
    KVEventsConfig,
    KVTransferConfig,
    LoadConfig,
    LoRAConfig,
    ModelConfig,
    MultiModalConfig,
    ObservabilityConfig,
    ParallelConfig,
    PassConfig,
    PoolerConfig,
    PoolingParams,
    ProfilerConfig,
    Range,
    RequestOutputKind,
    SamplingParams,
    SamplingType,
    SchedulerConfig,
    SpeculativeConfig,
    SpeechToTextConfig,
    StructuredOutputsConfig,
    StructuredOutputsParams,
    UsageContext,
    VllmConfig,
)


def _configs() -> list[object]:
    sized = CompilationConfig(mode=3, cudagraph_capture_sizes=[1, 2, 4], max_cudagraph_capture_size=4)
    sized.post_init_cudagraph_sizes()  # fills init=False fields (bs_to_padded_graph_size)
    sized.compilation_time = 1.5
    sized.enabled_custom_ops.update(["rms_norm", "rms_norm"])
    sized.traced_files.add("/x.py")
    sized.debug_dump_path = Path("/tmp/dump")
    return [
        CompilationConfig(),
        CompilationConfig(mode=3, compile_ranges_split_points=[8, 32]),
        sized,
        VllmConfig(compilation_config=CompilationConfig(mode=3)),
        PassConfig(),
        DynamicShapesConfig(),
        *_cache_load_observability(),
        SpeechToTextConfig(),
        SpeechToTextConfig(sample_rate=22_050.5, max_audio_clip_s=None, min_energy_split_window_size=None),
        StructuredOutputsConfig(backend="guidance", disable_any_whitespace=True, reasoning_parser="qwen3"),
        VllmConfig(structured_outputs_config=StructuredOutputsConfig(backend="xgrammar")),
        ProfilerConfig(
            profiler="torch", torch_profiler_dir="/traces", delay_iterations=2, ignore_frontend=True
        ),
        VllmConfig(profiler_config=ProfilerConfig(profiler="cuda", max_iterations=5)),
        PoolerConfig(pooling_type="STEP", activation=0.5, returned_token_ids=[648, 387]),
        PoolerConfig(seq_pooling_type="CLS", dimensions=16, normalize=True),
        EPLBConfig(window_size=10, num_redundant_experts=2, use_async=True),
        KVEventsConfig(enable_kv_cache_events=True, replay_endpoint="tcp://*:5558"),
        VllmConfig(kv_events_config=KVEventsConfig(publisher="null", topic="t")),
        KVTransferConfig(
            kv_connector="NixlConnector", kv_role="kv_both", kv_connector_extra_config={"a": [1]}
        ),
        VllmConfig(kv_transfer_config=KVTransferConfig(kv_role="kv_consumer", kv_buffer_size=2)),
        VllmConfig(cache_config=CacheConfig(kv_offloading_size=2.0, kv_offloading_backend="lmcache")),
        ECTransferConfig(
            ec_connector="ECExampleConnector", ec_role="ec_producer", ec_connector_extra_config={"a": 1}
        ),
        VllmConfig(ec_transfer_config=ECTransferConfig(ec_buffer_device=None, ec_port=20000)),
        MultiModalConfig(
            limit_per_prompt={"image": 2, "video": {"count": 1, "num_frames": 4}, "other": {"count": 0}},
            mm_encoder_attn_backend="TORCH_SDPA",
            mm_processor_kwargs={"n": [1]},
        ),
        LoRAConfig(max_lora_rank=64, max_cpu_loras=4, default_mm_loras={"image": "a"}),
        VllmConfig(lora_config=LoRAConfig(lora_dtype="bfloat16", max_loras=2)),
        *_parallel_scheduler(),
        *_request_params(),
        *_engine_args(),
        *_speculative(),
    ]


def _speculative() -> list[object]:
    """A draft model's config holds vLLM's override function (stored by name) and an EAGLE head's
    config, which holds its base model's."""
    target = ModelConfig(model="tiny-llama", skip_tokenizer_init=True)
    parallel = ParallelConfig()
    eagle = SpeculativeConfig(
        method="eagle3",
        model="tiny-llama",
        num_speculative_tokens=2,
        target_model_config=target,
        target_parallel_config=parallel,
    )
    return [
        SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_max=4),
        eagle,
        VllmConfig(model_config=target, parallel_config=parallel, speculative_config=eagle),
    ]


def _engine_args() -> list[object]:
    """vllm.engine.arg_utils: the arguments as given, and after `create_engine_config` resolved their
    defaults, with the VllmConfig it made (model, scheduler, parallel, LoRA and all)."""
    given = EngineArgs(model="tiny-llama", compilation_config={"mode": 3}, additional_config={"a": [1]})
    created = EngineArgs(model="tiny-llama", enable_lora=True, max_model_len=256)
    engine = created.create_engine_config(UsageContext.OPENAI_API_SERVER)
    return [given, AsyncEngineArgs(model="tiny-llama", enable_log_requests=True), created, engine]


def _parallel_scheduler() -> list[object]:
    """ParallelConfig with its private fields (the master ports, some handed out) and any value a caller gave
    for Ray's fields; SchedulerConfig with a scheduler named or given as a class."""
    parallel = ParallelConfig(
        data_parallel_size=2,
        _data_parallel_master_port_list=[29600, 29601, 29602],
        _api_process_count=2,
        _api_process_rank=1,
        placement_group={"bundles": [1, 2]},
        ray_runtime_env="env",
        enable_dbo=True,
        nnodes=2,
    )
    parallel.get_next_dp_init_port()
    return [
        ParallelConfig(),
        parallel,
        ParallelConfig(
            tensor_parallel_size=2, distributed_executor_backend="mp", disable_custom_all_reduce=True
        ),
        SchedulerConfig(max_model_len=512, is_encoder_decoder=False, scheduler_cls="my.sched.Scheduler"),
        SchedulerConfig(max_model_len=512, is_encoder_decoder=True, scheduler_cls=CacheConfig),
        SchedulerConfig(
            max_model_len=4096, is_encoder_decoder=False, async_scheduling=True, max_num_partial_prefills=2
        ),
        VllmConfig(
            parallel_config=parallel, scheduler_config=SchedulerConfig.default_factory(max_num_seqs=8)
        ),
    ]


def _request_params() -> list[object]:
    """vllm.sampling_params: msgspec Structs in vLLM, whose state includes a cached property."""
    sampled = SamplingParams(
        seed=7,
        stop="END",
        stop_token_ids=[2],
        logit_bias={5: -1.5},
        extra_args={"k": (1, None)},
        output_kind=RequestOutputKind.DELTA,
        structured_outputs=StructuredOutputsParams(json={"a": [1]}),
    )
    sampled.update_from_generation_config({"eos_token_id": [9]}, 3)
    assert sampled.sampling_type is SamplingType.RANDOM_SEED  # cached in the instance
    pooled = PoolingParams(softmax=True, extra_kwargs={"a": [1]}, returned_token_ids=None)
    pooled.verify("classify")
    return [
        SamplingParams(),
        sampled,
        BeamSearchParams(4, 64, length_penalty=0.5),
        StructuredOutputsParams(),
        pooled,
    ]


def _cache_load_observability() -> list[object]:
    cache = CacheConfig(block_size=32, cache_dtype="fp8", kv_offloading_size=1.5, sliding_window=64)
    cache.num_gpu_blocks = 100  # init=False, set after profiling
    load = LoadConfig(
        load_format="Dummy", model_loader_extra_config={"n": [1, (2, 3)]}, ignore_patterns="*.pt"
    )
    observed = ObservabilityConfig(show_hidden_metrics_for_version="0.13")
    observed.collect_detailed_traces = ["all"]  # as set_attr would (construction needs an OTLP endpoint)
    assert observed.show_hidden_metrics and observed.collect_model_forward_time  # cached in the instance
    engine = VllmConfig(
        cache_config=CacheConfig(swap_space=1),
        load_config=load,
        observability_config=ObservabilityConfig(kv_cache_metrics=True),
    )
    attention = AttentionConfig(backend="flashinfer", flash_attn_version=3)
    engine.attention_config = attention
    return [CacheConfig(), cache, LoadConfig(), load, ObservabilityConfig(), observed, engine, attention]


@pytest.mark.parametrize("config", _configs(), ids=lambda c: type(c).__name__)
def test_configs_come_back_exactly(config: object) -> None:
    restored = refstate.decode(refstate.encode(config))
    assert type(restored) is type(config)
    assert restored == config
    assert repr(restored) == repr(config)
    assert vars(restored) == vars(config)
    if hasattr(config, "compute_hash"):
        assert restored.compute_hash() == config.compute_hash()  # type: ignore[attr-defined]


def test_values_keep_their_types() -> None:
    value = [Range(1, 8), CompilationMode.VLLM_COMPILE, CUDAGraphMode.FULL, (1, 2.5), {3: float("inf")}]
    value.append(Counter(a=2))
    restored = refstate.decode(refstate.encode(value))
    assert restored == value
    assert [type(x) for x in restored] == [type(x) for x in value]
    assert restored[1] is CompilationMode.VLLM_COMPILE


def test_config_classes_come_back_as_themselves() -> None:
    assert refstate.decode(refstate.encode([CompilationConfig, CUDAGraphMode])) == [
        CompilationConfig,
        CUDAGraphMode,
    ]
    with pytest.raises(refstate.NotStorable):
        refstate.encode(dict)


def test_shared_objects_stay_shared() -> None:
    inner = [1, 2]
    restored = refstate.decode(refstate.encode({"a": inner, "b": inner}))
    assert restored["a"] is restored["b"]


def test_objects_that_are_not_data_are_not_storable() -> None:
    with pytest.raises(refstate.NotStorable):
        refstate.encode(iter([1]))
    with pytest.raises(refstate.NotStorable):
        refstate.encode({"f": print})


@pytest.mark.parametrize(
    "tree",
    [
        {"format": 1, "value": {"t": "obj", "c": "os.system", "v": {}}},
        {"format": 1, "value": {"t": "obj", "c": "builtins.object", "v": {}}},
        {"format": 1, "value": {"t": "enum", "c": "compilation_bridge.vllm_config.range.Range", "v": 1}},
        {"format": 1, "value": {"t": "pickle", "v": "gASV"}},
        {"format": 1, "value": {"t": "same", "i": 5}},
        {"format": 1, "value": {"t": "dtype", "v": "int8"}},  # only the dtypes the config model knows
        {"format": 1, "value": {"t": "dtype", "v": ["float16"]}},
        {"format": 1, "value": {"t": "hf_override", "v": "os.system"}},  # only vLLM's MTP override
        {"format": 2, "value": 1},
        [1, 2],
    ],
)
def test_foreign_states_are_refused(tree: object) -> None:
    with pytest.raises(refstate.CorruptState):
        refstate.decode(orjson.dumps(tree))


def test_garbage_is_refused() -> None:
    with pytest.raises(refstate.CorruptState):
        refstate.decode(b"\x80\x04\x95 not json")


def test_local_only_marker_names_the_worker() -> None:
    with pytest.raises(refstate.HeldElsewhere, match=r"list_iterator.*worker host-a pid 7"):
        refstate.decode(refstate.local_only(iter([1]), "host-a pid 7"))


_SIZES = st.lists(st.integers(1, 512), max_size=5)
_CONFIG_KWARGS = st.fixed_dictionaries(
    {},
    optional={
        "mode": st.sampled_from([0, 1, 2, 3]),
        "backend": st.sampled_from(["", "inductor", "eager"]),
        "custom_ops": st.lists(st.sampled_from(["all", "none", "+rms_norm", "-silu_and_mul"]), max_size=3),
        "cudagraph_mode": st.sampled_from(["NONE", "PIECEWISE", "FULL", "FULL_AND_PIECEWISE"]),
        "compile_sizes": _SIZES,
        "compile_ranges_split_points": st.lists(st.integers(2, 4096), max_size=3, unique=True).map(sorted),
        "cudagraph_capture_sizes": st.lists(st.integers(1, 256), min_size=1, max_size=5),
        "cache_dir": st.sampled_from(["", "/tmp/cache"]),
        "pass_config": st.builds(PassConfig, fuse_norm_quant=st.booleans(), eliminate_noops=st.booleans()),
    },
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(kwargs=_CONFIG_KWARGS, inside_vllm=st.booleans())
def test_random_configs_come_back_exactly(kwargs: dict[str, Any], inside_vllm: bool) -> None:
    try:
        config: Any = CompilationConfig(**kwargs)
        if inside_vllm:
            config = VllmConfig(compilation_config=config)
    except Exception:
        return  # invalid combinations are the differential suite's business
    restored = refstate.decode(refstate.encode(config))
    assert restored == config and repr(restored) == repr(config)
    assert restored.compute_hash() == config.compute_hash()


def test_derived_fields_are_computed_again_not_stored() -> None:
    """A few bytes of request (a large maximum size) must not make megabytes of stored state."""
    config = CompilationConfig(
        mode=3, cudagraph_capture_sizes=[1, 2, 4, 1 << 20], max_cudagraph_capture_size=1 << 20
    )
    config.post_init_cudagraph_sizes()
    state = refstate.encode(config)
    assert len(config.bs_to_padded_graph_size) == (1 << 20) + 1 and len(state) < 4096
    back = refstate.decode(state)
    assert back.bs_to_padded_graph_size == config.bs_to_padded_graph_size
    assert back == config and back.compute_hash() == config.compute_hash() and repr(back) == repr(config)
    config.bs_to_padded_graph_size = [7, 7]  # set by a caller: no longer derived, so stored as it is
    assert refstate.decode(refstate.encode(config)).bs_to_padded_graph_size == [7, 7]


def test_vllm_config_with_another_hf_config_comes_back() -> None:
    """What `with_hf_config` answers (a copy whose model config holds another architecture list) and the
    model config's mark that vLLM's model-specific updates ran, which keeps a later call from running them
    again."""
    config = VllmConfig(model_config=ModelConfig(model="tiny-llama", skip_tokenizer_init=True))
    other = config.with_hf_config(config.model_config.hf_config, ["MistralForCausalLM"])
    restored = refstate.decode(refstate.encode(other))
    assert restored == other and repr(restored) == repr(other)
    assert restored.compute_hash() == other.compute_hash()
    assert restored.model_config.architectures == ["MistralForCausalLM"]
    assert restored.model_config.config_updated is True
