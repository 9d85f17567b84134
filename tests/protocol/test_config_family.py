"""CacheConfig, LoadConfig and ObservabilityConfig over the wire, in-process: every function the `vllm` hex
package's generated modules (Vllm.Config.*) call, with their call types, answers as the class itself does;
VllmConfig takes them as sub-configs; the names still refused stay refused."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import pytest
from tests.generated_getters import GETTERS
from tests.workers import payload

import compilation_bridge.vllm_config
from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.vllm_config import (
    AttentionConfig,
    CacheConfig,
    ECTransferConfig,
    EPLBConfig,
    KVEventsConfig,
    KVTransferConfig,
    LoadConfig,
    LoRAConfig,
    ModelConfig,
    MultiModalConfig,
    ObservabilityConfig,
    ParallelConfig,
    PoolerConfig,
    ProfilerConfig,
    SchedulerConfig,
    SpeculativeConfig,
    SpeechToTextConfig,
    StructuredOutputsConfig,
    VllmConfig,
)

# Per class: the keywords it is built with, the attributes the generated module reads (get_attr) and the
# methods it calls (call_method) with this test's arguments.
GENERATED: dict[str, tuple[dict[str, Any], tuple[str, ...], dict[str, list[Any]]]] = {
    "CacheConfig": (
        {"block_size": 32, "cache_dtype": "fp8", "swap_space": 2},
        GETTERS["CacheConfig"],
        {"_validate_cache_dtype": ["fp8_e5m2"], "compute_hash": [], "metrics_info": []},
    ),
    "LoadConfig": (
        {"load_format": "SafeTensors", "ignore_patterns": ["*.bin"]},
        GETTERS["LoadConfig"],
        {"_lowercase_load_format": ["GGUF"], "_validate_ignore_patterns": [["x"]], "compute_hash": []},
    ),
    "ObservabilityConfig": (
        {"show_hidden_metrics_for_version": "0.13", "kv_cache_metrics": True},
        GETTERS["ObservabilityConfig"],
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
    GETTERS["AttentionConfig"],
    {"_set_from_env_if_set": ["use_cudnn_prefill", "VLLM_USE_CUDNN_PREFILL"], "compute_hash": []},
)
GENERATED["SpeechToTextConfig"] = (
    {"sample_rate": 8000, "min_energy_split_window_size": None},
    GETTERS["SpeechToTextConfig"],
    {},
)
GENERATED["StructuredOutputsConfig"] = (
    {"backend": "guidance", "disable_additional_properties": True},
    GETTERS["StructuredOutputsConfig"],
    {"_validate_structured_output_config": [], "compute_hash": []},
)
GENERATED["ProfilerConfig"] = (
    {"profiler": "cuda", "max_iterations": 3},
    GETTERS["ProfilerConfig"],
    {
        "_get_from_env_if_set": ["max_iterations", "VLLM_PROFILER_MAX_ITERS"],
        "_set_from_env_if_set": ["delay_iterations", "VLLM_PROFILER_DELAY_ITERS", False, True],
        "_validate_profiler_config": [],
        "compute_hash": [],
    },
)
GENERATED["PoolerConfig"] = (
    {"seq_pooling_type": "MEAN", "tok_pooling_type": "STEP", "softmax": 1.0, "returned_token_ids": [3, 5]},
    GETTERS["PoolerConfig"],
    {"compute_hash": [], "get_seq_pooling_type": [], "get_tok_pooling_type": []},
)
GENERATED["EPLBConfig"] = (
    {"window_size": 100, "log_balancedness": True, "log_balancedness_interval": 5},
    GETTERS["EPLBConfig"],
    {"_validate_eplb_config": []},
)
GENERATED["KVEventsConfig"] = (
    {"enable_kv_cache_events": True, "topic": "kv"},
    GETTERS["KVEventsConfig"],
    {},
)
GENERATED["KVTransferConfig"] = (  # an engine id given: the default one is random
    {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_producer",
        "engine_id": "e0",
        "kv_connector_extra_config": {"n": 2},
    },
    GETTERS["KVTransferConfig"],
    {"compute_hash": [], "get_from_extra_config": ["n", None]},
)
GENERATED["ECTransferConfig"] = (  # an engine id given: the default one is random
    {
        "ec_connector": "ECExampleConnector",
        "ec_role": "ec_consumer",
        "engine_id": "e1",
        "ec_connector_extra_config": {"n": 3},
    },
    GETTERS["ECTransferConfig"],
    {"compute_hash": [], "get_from_extra_config": ["n", None]},
)
GENERATED["MultiModalConfig"] = (  # limit_per_prompt's options come back as refs: see the test below
    {"mm_encoder_attn_backend": "FLASH_ATTN", "mm_processor_kwargs": {"n": 1}, "video_pruning_rate": 0.25},
    GETTERS["MultiModalConfig"],
    {
        "_validate_limit_per_prompt": [{}],
        "_validate_mm_encoder_attn_backend": [None],
        "_validate_multimodal_config": [],
        "compute_hash": [],
        "get_dummy_options": ["image"],
        "get_limit_per_prompt": ["image"],
        "is_multimodal_pruning_enabled": [],
        "merge_mm_processor_kwargs": [{"m": 2}],
    },
)
GENERATED["LoRAConfig"] = (  # a named dtype: settling it reads no model, so None stands for one
    {"max_lora_rank": 64, "max_loras": 2, "lora_dtype": "float16", "default_mm_loras": {"image": "a"}},
    GETTERS["LoRAConfig"],
    {"_validate_lora_config": [], "compute_hash": [], "verify_with_model_config": [None]},
)
GENERATED["SpeculativeConfig"] = (  # n-gram: the methods needing a model are proven by the tests below
    {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "disable_by_batch_size": 4},
    GETTERS["SpeculativeConfig"],
    {
        "_maybe_override_draft_max_model_len": [None, 512, 256],
        "_verify_args": [],
        "compute_hash": [],
        "use_eagle": [],
    },
)
GENERATED["ParallelConfig"] = (  # ports given: vLLM would pick free ones, different on each side
    {
        "tensor_parallel_size": 2,
        "data_parallel_size": 2,
        "enable_expert_parallel": True,
        "nnodes": 2,
        "_data_parallel_master_port_list": [29600, 29601],
        "_api_process_count": 2,
    },
    GETTERS["ParallelConfig"],
    {
        "_skip_none_validation": [None, None],
        "_validate_parallel_config": [],
        "_verify_args": [],
        "compute_hash": [],
        "get_next_dp_init_port": [],
    },
)
GENERATED["SchedulerConfig"] = (
    {"max_model_len": 4096, "is_encoder_decoder": False, "async_scheduling": True, "max_num_seqs": 16},
    GETTERS["SchedulerConfig"],
    {
        "_skip_none_validation": [None, None],
        "compute_hash": [],
        "default_factory": [],
        "get_scheduler_cls": [],
        "verify_max_model_len": [2048],
    },
)
CLASSES = {
    "AttentionConfig": AttentionConfig,
    "CacheConfig": CacheConfig,
    "ECTransferConfig": ECTransferConfig,
    "EPLBConfig": EPLBConfig,
    "KVEventsConfig": KVEventsConfig,
    "KVTransferConfig": KVTransferConfig,
    "LoadConfig": LoadConfig,
    "LoRAConfig": LoRAConfig,
    "MultiModalConfig": MultiModalConfig,
    "ObservabilityConfig": ObservabilityConfig,
    "ParallelConfig": ParallelConfig,
    "PoolerConfig": PoolerConfig,
    "ProfilerConfig": ProfilerConfig,
    "SpeculativeConfig": SpeculativeConfig,
    "SchedulerConfig": SchedulerConfig,
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
        elif dataclasses.is_dataclass(expected):  # a config it holds (ParallelConfig.eplb_config) is a ref
            assert got["type_name"] == type(expected).__name__, attr
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
    fields = {"call_type": "class", "function": "__init__", "class": "ConfigType"}
    reply = dispatcher.execute("snakebridge.call", payload("S", **fields), "worker-session")
    assert not reply.success
    assert "ConfigType" in reply.error["message"]


def get_attr(dispatcher: Dispatcher, ref: dict[str, Any], attr: str) -> Any:
    return call(dispatcher, call_type="get_attr", attr=attr, function=attr, instance=ref_of(ref))


def test_speculative_config_drafts_against_a_target_held_as_refs(dispatcher: Dispatcher) -> None:
    """An EAGLE-3 head on the bundled tiny Llama: the draft model's config and parallel layout are refs
    whose facts read as the local object's, and VllmConfig takes the config as a sub-config."""
    target = construct(dispatcher, "ModelConfig", model="tiny-llama", skip_tokenizer_init=True)
    layout = construct(dispatcher, "ParallelConfig", tensor_parallel_size=1)
    kwargs = {"method": "eagle3", "model": "tiny-llama", "num_speculative_tokens": 2}
    spec = construct(
        dispatcher,
        "SpeculativeConfig",
        "vllm.config.speculative",
        target_model_config=ref_of(target),
        target_parallel_config=ref_of(layout),
        **kwargs,
    )
    local_target = ModelConfig(model="tiny-llama", skip_tokenizer_init=True)
    local = SpeculativeConfig(
        target_model_config=local_target, target_parallel_config=ParallelConfig(), **kwargs
    )
    draft = get_attr(dispatcher, spec, "draft_model_config")
    assert get_attr(dispatcher, draft, "architectures") == local.draft_model_config.architectures
    assert get_attr(dispatcher, draft, "architecture") == "LlamaForCausalLM"
    assert get_attr(dispatcher, spec, "speculative_token_tree") == local.speculative_token_tree
    hashed = call(dispatcher, call_type="method", function="compute_hash", args=[], instance=ref_of(spec))
    assert hashed == local.compute_hash()
    engine = construct(
        dispatcher,
        "VllmConfig",
        model_config=ref_of(target),
        parallel_config=ref_of(layout),
        speculative_config=ref_of(spec),
    )
    held = get_attr(dispatcher, engine, "speculative_config")
    assert get_attr(dispatcher, held, "method") == "eagle3"


@pytest.mark.parametrize(
    ("cls", "kwargs", "error"),
    [
        ("SpeculativeConfig", {"method": "suffix"}, "ImportError"),  # vLLM without arctic-inference
        ("SupportsMetricsInfo", {}, "TypeError"),  # a Protocol
    ],
)
def test_constructions_vllm_refuses(
    dispatcher: Dispatcher, cls: str, kwargs: dict[str, Any], error: str
) -> None:
    fields = {"call_type": "class", "function": "__init__", "class": cls, "kwargs": kwargs}
    reply = dispatcher.execute("snakebridge.call", payload("S", **fields), "worker-session")
    assert not reply.success and reply.error["type"] == error
    with pytest.raises(Exception) as raised:
        getattr(compilation_bridge.vllm_config, cls)(**kwargs)
    assert reply.error["message"] == str(raised.value)


def test_multimodal_dummy_options_are_readable_refs(dispatcher: Dispatcher) -> None:
    """What get_dummy_options answers (a dataclass the generated modules have no module for) is a ref whose
    fields can be read."""
    config = construct(
        dispatcher, "MultiModalConfig", limit_per_prompt={"video": {"count": 2, "num_frames": 8}}
    )
    options = call(
        dispatcher, call_type="method", function="get_dummy_options", args=["video"], instance=ref_of(config)
    )
    assert options["type_name"] == "VideoDummyOptions"
    for attr, expected in (("count", 2), ("num_frames", 8), ("width", None)):
        got = call(dispatcher, call_type="get_attr", attr=attr, function=attr, instance=ref_of(options))
        assert got == expected, attr
    limit = call(
        dispatcher,
        call_type="method",
        function="get_limit_per_prompt",
        args=["video"],
        instance=ref_of(config),
    )
    assert limit == 2


MODEL_REFS = ("dtype", "head_dtype")  # torch dtypes travel as refs (docs/wire.md)
MODEL_METHODS: dict[str, list[Any]] = {
    "get_diff_sampling_param": [],
    "try_get_generation_config": [],
    "get_sliding_window": [],
    "get_num_experts": [],
    "get_mamba_chunk_size": [],
    "get_inputs_embeds_size": [],
    "using_transformers_backend": [],
    "_get_transformers_backend_cls": [],
    "_get_runner_type": [["BertModel"], "auto"],
    "_get_convert_type": [["LlamaForCausalLM"], "pooling", "auto"],
    "_lowercase_tokenizer_mode": ["HF"],
    "validate_quantization_before": ["FP8"],
    "get_and_verify_max_len": [128],
    "_verify_quantization": [],
    "_verify_cuda_graph": [],
    "_verify_bnb_config": [],
    "_try_verify_and_update_model_config": [],
    "_get_encoder_config": [],
    "_update_nested": [{"a": {"b": 1}}, {"a": {"c": 2}}],
}


def test_model_config_serves_every_generated_function(dispatcher: Dispatcher) -> None:
    """ModelConfig over the wire answers as the class does; its architecture facts come back as a
    readable ModelArchitectureConfig ref."""
    from compilation_bridge.vllm_config import ModelConfig

    kwargs = {"model": "tiny-llama", "skip_tokenizer_init": True, "max_model_len": 256}
    local = ModelConfig(**kwargs)
    ref = construct(dispatcher, "ModelConfig", **kwargs)
    for attr in GETTERS["ModelConfig"]:
        got = call(dispatcher, call_type="get_attr", attr=attr, function=attr, instance=ref_of(ref))
        if attr in MODEL_REFS:
            assert got["type_name"] == "DType", attr
        else:
            assert got == plain(getattr(local, attr)), attr
    for method, args in MODEL_METHODS.items():
        got = call(dispatcher, call_type="method", function=method, args=args, instance=ref_of(ref))
        assert got == plain(getattr(local, method)(*args)), method
    arch = call(
        dispatcher, call_type="method", function="get_model_arch_config", args=[], instance=ref_of(ref)
    )
    assert arch["type_name"] == "ModelArchitectureConfig"
    size = call(
        dispatcher, call_type="get_attr", attr="hidden_size", function="hidden_size", instance=ref_of(arch)
    )
    assert size == local.get_hidden_size() == 64
    for refused in ("registry", "maybe_pull_model_tokenizer_for_runai"):
        fields = {"call_type": "get_attr", "attr": refused, "function": refused, "instance": ref_of(ref)}
        assert not dispatcher.execute("snakebridge.call", payload("S", **fields), "w").success, refused


@pytest.mark.parametrize(
    "function", ["stateless_init_dp_group", "has_unfinished_dp", "sync_kv_cache_memory_size"]
)
def test_data_parallel_process_groups_are_refused_saying_why(dispatcher: Dispatcher, function: str) -> None:
    """What needs torch.distributed peers is answered in band: a PermissionError that says why."""
    parallel = construct(dispatcher, "ParallelConfig")
    fields = {"call_type": "method", "function": function, "instance": ref_of(parallel)}
    reply = dispatcher.execute("snakebridge.call", payload("S", args=[None, 1], **fields), "w")
    assert not reply.success and reply.error["type"] == "PermissionError"
    assert reply.error["message"].startswith(
        f"ParallelConfig.{function} is not served by compilation-bridge: "
    )
    assert "torch.distributed process group" in reply.error["message"]


def test_scheduler_class_given_as_a_class_is_answered_by_name(dispatcher: Dispatcher) -> None:
    """vLLM takes a class as scheduler_cls; the only classes a caller can pass are those the worker hands
    out, and get_scheduler_cls answers vLLM's name of it."""
    cache_cls = call(dispatcher, python_module="vllm.config", call_type="module_attr", attr="CacheConfig")
    config = construct(
        dispatcher, "SchedulerConfig", max_model_len=512, is_encoder_decoder=False, scheduler_cls=cache_cls
    )
    fields = {"call_type": "method", "function": "get_scheduler_cls", "instance": ref_of(config)}
    assert call(dispatcher, **fields) == "vllm.config.cache.CacheConfig"


def method(dispatcher: Dispatcher, ref: dict[str, Any], name: str, *args: Any) -> Any:
    return call(dispatcher, call_type="method", function=name, args=list(args), instance=ref_of(ref))


def test_vllm_configs_own_functions_over_the_wire(dispatcher: Dispatcher) -> None:
    """The rest of VllmConfig's generated functions on a ref: what the local object answers, a sub-config
    or the copy with another Hugging Face config coming back as a ref."""
    model = construct(dispatcher, "ModelConfig", model="tiny-llama", skip_tokenizer_init=True)
    engine = construct(dispatcher, "VllmConfig", model_config=ref_of(model))
    local = VllmConfig(model_config=ModelConfig(model="tiny-llama", skip_tokenizer_init=True))
    assert get_attr(dispatcher, engine, "needs_dp_coordinator") is local.needs_dp_coordinator is False
    assert get_attr(dispatcher, engine, "quant_config") is None
    load = get_attr(dispatcher, engine, "load_config")
    for name in ("get_quantization_config", "_get_quantization_config"):
        assert method(dispatcher, engine, name, ref_of(model), ref_of(load)) is None
    for name in ("enable_trace_function_call_for_thread", "try_verify_and_update_config"):
        assert method(dispatcher, engine, name) is None
    for name in ("_set_cudagraph_sizes", "_set_compile_ranges"):
        assert method(dispatcher, engine, name) is None
    compiled = get_attr(dispatcher, engine, "compilation_config")
    assert (
        method(dispatcher, engine, "_set_config_default", ref_of(compiled), "max_cudagraph_capture_size", 9)
        is None
    )
    assert method(dispatcher, engine, "_apply_optimization_level_defaults", {"lora_config": None}) is None
    hf = get_attr(dispatcher, model, "hf_config")
    other = method(dispatcher, engine, "with_hf_config", hf, ["MistralForCausalLM"])
    other_model = get_attr(dispatcher, other, "model_config")
    assert get_attr(dispatcher, other_model, "architectures") == ["MistralForCausalLM"]
    assert get_attr(dispatcher, model, "architectures") == ["LlamaForCausalLM"]


def test_vllm_configs_defaults_stay_in_fields_over_the_wire(dispatcher: Dispatcher) -> None:
    engine = construct(dispatcher, "VllmConfig")
    fields = {"call_type": "method", "function": "_apply_optimization_level_defaults"}
    fields |= {"args": [{"__class__": {"lora_config": 1}}], "instance": ref_of(engine)}
    reply = dispatcher.execute("snakebridge.call", payload("S", **fields), "worker-session")
    assert not reply.success and reply.error["type"] == "ValueError"
    assert "'__class__' is not a field of VllmConfig" in reply.error["message"]
