"""The worker's concrete surface: vLLM's module names mapped onto our implementations.

Callers (SnakeBridge-generated Elixir code) name vLLM's modules, for example `python_module:
"vllm.config"`, class "CompilationConfig". They resolve here to `compilation_bridge.vllm_config`;
vLLM itself is never imported. `compilation_bridge.compile` (which imports torch) is loaded only when
a call names it.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from compilation_bridge.settings import conformance_hooks_enabled
from compilation_bridge.surface.registry import ExposedModule, ExposedType, Surface

FunctionWrapper = Callable[[Callable[..., Any]], Callable[..., Any]]

log = logging.getLogger("compilation_bridge.surface")

CONFIG_PACKAGE = "compilation_bridge.vllm_config"
COMPILE_PACKAGE = "compilation_bridge.compile"

# vLLM module -> the names of it we expose (each exported by compilation_bridge.vllm_config).
VLLM_MODULES: dict[str, tuple[str, ...]] = {
    "vllm.config": (
        "AttentionConfig",
        "CacheConfig",
        "CompilationConfig",
        "CompilationMode",
        "CUDAGraphMode",
        "PassConfig",
        "DeviceConfig",
        "ECTransferConfig",
        "EPLBConfig",
        "KVEventsConfig",
        "KVTransferConfig",
        "LoadConfig",
        "LoRAConfig",
        "ModelConfig",
        "MultiModalConfig",
        "ObservabilityConfig",
        "ParallelConfig",
        "PoolerConfig",
        "ProfilerConfig",
        "SchedulerConfig",
        "SpeculativeConfig",
        "SpeechToTextConfig",
        "StructuredOutputsConfig",
        "SupportsMetricsInfo",
        "VllmConfig",
    ),
    "vllm.config.compilation": (
        "CompilationConfig",
        "CompilationMode",
        "CUDAGraphMode",
        "PassConfig",
        "DynamicShapesType",
        "DynamicShapesConfig",
        "Range",
    ),
    "vllm.config.utils": ("Range", "SupportsMetricsInfo"),
    "vllm.config.vllm": (
        "VllmConfig",
        "OptimizationLevel",
        "AttentionConfig",
        "CacheConfig",
        "CompilationConfig",
        "CompilationMode",
        "CUDAGraphMode",
        "DeviceConfig",
        "ECTransferConfig",
        "KVEventsConfig",
        "KVTransferConfig",
        "LoadConfig",
        "LoRAConfig",
        "ModelConfig",
        "ObservabilityConfig",
        "ParallelConfig",
        "ProfilerConfig",
        "SchedulerConfig",
        "SpeculativeConfig",
        "StructuredOutputsConfig",
    ),
    "vllm.config.attention": ("AttentionConfig",),
    "vllm.config.cache": ("CacheConfig",),
    "vllm.config.device": ("DeviceConfig",),
    "vllm.config.ec_transfer": ("ECTransferConfig",),
    "vllm.config.kv_events": ("KVEventsConfig",),
    "vllm.config.kv_transfer": ("KVTransferConfig",),
    "vllm.config.load": ("LoadConfig",),
    "vllm.config.lora": ("LoRAConfig",),
    "vllm.config.model": ("ModelConfig",),
    "vllm.config.multimodal": ("MultiModalConfig",),
    "vllm.config.observability": ("ObservabilityConfig",),
    "vllm.config.parallel": ("EPLBConfig", "ParallelConfig"),
    "vllm.config.pooler": ("PoolerConfig",),
    "vllm.config.profiler": ("ProfilerConfig",),
    "vllm.config.scheduler": ("SchedulerConfig",),
    "vllm.config.speculative": ("SpeculativeConfig",),
    "vllm.config.speech_to_text": ("SpeechToTextConfig",),
    "vllm.config.structured_outputs": ("StructuredOutputsConfig",),
    # vLLM's top level: the engine's arguments and the request parameters; its engine's names are refused
    "vllm": ("AsyncEngineArgs", "EngineArgs", "PoolingParams", "SamplingParams"),
    "vllm.engine.arg_utils": ("AsyncEngineArgs", "EngineArgs"),
    "vllm.usage.usage_lib": ("UsageContext",),
    "vllm.sampling_params": (
        "BeamSearchParams",
        "RequestOutputKind",
        "SamplingParams",
        "SamplingType",
        "StructuredOutputsParams",
    ),
    "vllm.pooling_params": ("PoolingParams", "RequestOutputKind"),
}

# Public names of vLLM 0.14.0's `vllm.config` that this worker does not serve: refused by name.
VLLM_CONFIG_NOT_EXPOSED = frozenset(
    {
        "iter_architecture_defaults",
        "str_dtype_to_torch_dtype",
        "try_match_architecture_defaults",
        "ConfigType",
        "config",
        "get_attr_docs",
        "is_init_field",
        "update_config",
        "get_cached_compilation_config",
        "get_current_vllm_config",
        "get_current_vllm_config_or_none",
        "set_current_vllm_config",
        "get_layers_from_vllm_config",
    }
)

# vLLM 0.14.0's top-level names (`vllm.__all__`) that need its engine or runtime: refused by name.
VLLM_TOP_LEVEL_NOT_EXPOSED = frozenset(
    {
        "AsyncLLMEngine",
        "ClassificationOutput",
        "ClassificationRequestOutput",
        "CompletionOutput",
        "EmbeddingOutput",
        "EmbeddingRequestOutput",
        "LLM",
        "LLMEngine",
        "ModelRegistry",
        "PoolingOutput",
        "PoolingRequestOutput",
        "PromptType",
        "RequestOutput",
        "ScoringOutput",
        "ScoringRequestOutput",
        "TextPrompt",
        "TokensPrompt",
        "initialize_ray_cluster",
    }
)
NOT_EXPOSED_BY_MODULE = {"vllm.config": VLLM_CONFIG_NOT_EXPOSED, "vllm": VLLM_TOP_LEVEL_NOT_EXPOSED}

# Config dataclasses: fields may be set on an instance. Underscore names are the ones the generated
# Elixir modules call (`_skip_none_validation` is a pydantic wrap validator, `_attention_ops` a ClassVar).
CONFIG_TYPES: dict[str, frozenset[str]] = {
    "CompilationConfig": frozenset({"_skip_none_validation", "_attention_ops"}),
    "PassConfig": frozenset({"_skip_none_validation"}),
    "DynamicShapesConfig": frozenset(),
    "VllmConfig": frozenset(
        {
            "_apply_optimization_level_defaults",
            "_get_quantization_config",
            "_post_init_kv_transfer_config",
            "_set_compile_ranges",
            "_set_config_default",
            "_set_cudagraph_sizes",
        }
    ),
    "SchedulerConfig": frozenset({"_skip_none_validation"}),
    "ParallelConfig": frozenset(
        {
            "_api_process_count",
            "_api_process_rank",
            "_data_parallel_master_port_list",
            "_skip_none_validation",
            "_validate_parallel_config",
            "_verify_args",
        }
    ),
    "ModelConfig": frozenset(
        {
            "_apply_dict_overrides",
            "_get_convert_type",
            "_get_default_convert_type",
            "_get_default_runner_type",
            "_get_encoder_config",
            "_get_runner_type",
            "_get_transformers_backend_cls",
            "_lowercase_tokenizer_mode",
            "_skip_none_validation",
            "_try_verify_and_update_model_config",
            "_update_nested",
            "_verify_bnb_config",
            "_verify_cuda_graph",
            "_verify_quantization",
            "_verify_with_expert_parallelism",
        }
    ),
    # What ModelConfig.model_arch_config and get_model_arch_config() hold: readable as a ref (the vllm hex
    # package generates no module for it).
    "ModelArchitectureConfig": frozenset(),
    "DeviceConfig": frozenset(),
    "AttentionConfig": frozenset({"_set_from_env_if_set"}),
    "CacheConfig": frozenset({"_validate_cache_dtype"}),
    "LoadConfig": frozenset({"_lowercase_load_format", "_validate_ignore_patterns"}),
    "ObservabilityConfig": frozenset(
        {
            "_validate_collect_detailed_traces",
            "_validate_otlp_traces_endpoint",
            "_validate_show_hidden_metrics_for_version",
            "_validate_tracing_config",
        }
    ),
    "SpeechToTextConfig": frozenset(),
    "PoolerConfig": frozenset(),
    "EPLBConfig": frozenset({"_validate_eplb_config"}),
    "KVEventsConfig": frozenset(),
    "KVTransferConfig": frozenset(),
    "ECTransferConfig": frozenset(),
    "LoRAConfig": frozenset({"_validate_lora_config"}),
    "SpeculativeConfig": frozenset(
        {
            "_maybe_override_draft_max_model_len",
            "_validate_suffix_decoding",
            "_verify_and_get_draft_tp",
            "_verify_args",
        }
    ),
    "MultiModalConfig": frozenset(
        {"_validate_limit_per_prompt", "_validate_mm_encoder_attn_backend", "_validate_multimodal_config"}
    ),
    # What MultiModalConfig.limit_per_prompt holds (get_dummy_options answers one): readable as a ref, and
    # named by no module, as the vllm hex package generates none for them.
    "BaseDummyOptions": frozenset(),
    "VideoDummyOptions": frozenset(),
    "ImageDummyOptions": frozenset(),
    "AudioDummyOptions": frozenset(),
    "StructuredOutputsConfig": frozenset({"_validate_structured_output_config"}),
    "ProfilerConfig": frozenset(
        {"_get_from_env_if_set", "_set_from_env_if_set", "_validate_profiler_config"}
    ),
    "Range": frozenset(),
    # Request parameters (vllm.sampling_params, vllm.pooling_params): msgspec Structs and a pydantic
    # dataclass in vLLM.
    "SamplingParams": frozenset(
        {
            "_validate_msgspec",
            "_verify_args",
            "_verify_greedy_sampling",
            "_all_stop_token_ids",
            "_bad_words_token_ids",
        }
    ),
    "BeamSearchParams": frozenset(),
    "PoolingParams": frozenset(
        {
            "_merge_default_parameters",
            "_set_default_parameters",
            "_verify_step_pooling",
            "_verify_valid_parameters",
        }
    ),
    "StructuredOutputsParams": frozenset({"_backend", "_backend_was_auto"}),
    # The engine's arguments (vllm.engine.arg_utils): a plain dataclass, as in vLLM.
    "EngineArgs": frozenset(),
    "AsyncEngineArgs": frozenset(),
}
# Protocols vLLM exports: named so that constructing one answers vLLM's TypeError; no instance exists.
PROTOCOL_TYPES = ("SupportsMetricsInfo",)
# Functions of served classes that need what a configuration worker does not hold: refused with the reason.
NEEDS_DP_PEERS = (
    "needs a live torch.distributed process group of the data-parallel ranks (peer processes on the master's "
    "address and port): that belongs to vLLM's engine, which this worker does not run"
)
CONFIG_REFUSED: dict[str, dict[str, str]] = {
    "ParallelConfig": {
        "stateless_init_dp_group": NEEDS_DP_PEERS,
        "has_unfinished_dp": NEEDS_DP_PEERS,
        "sync_kv_cache_memory_size": NEEDS_DP_PEERS,
    },
}
# AttentionBackendEnum: what `AttentionConfig.backend` holds (its own vLLM module is not served).
ENUM_TYPES = (
    "CompilationMode",
    "CUDAGraphMode",
    "DynamicShapesType",
    "OptimizationLevel",
    "AttentionBackendEnum",
    "SamplingType",
    "RequestOutputKind",
    "UsageContext",
)
# Besides the fields construction caps, set_attr can write the padding table: capped the same way.
PADDING_TABLE_FIELD = "bs_to_padded_graph_size"


def _config_package() -> Any:
    return importlib.import_module(CONFIG_PACKAGE)


def _vllm_loader(names: tuple[str, ...]) -> Any:
    def load() -> dict[str, Any]:
        package = _config_package()
        # A name the configuration model does not (yet) provide is simply absent.
        return {name: getattr(package, name) for name in names if hasattr(package, name)}

    return load


def _config_types() -> Iterable[ExposedType]:
    package = _config_package()
    for name, extras in CONFIG_TYPES.items():
        cls = getattr(package, name, None)
        if isinstance(cls, type):
            yield ExposedType(cls, extra_names=extras, settable=True, refused=CONFIG_REFUSED.get(name, {}))
    for name in ENUM_TYPES:
        cls = getattr(package, name, None)
        if isinstance(cls, type):
            yield ExposedType(cls)
    for name in PROTOCOL_TYPES:
        cls = getattr(package, name, None)
        if isinstance(cls, type):
            yield ExposedType(cls, names=frozenset())


def _compile_loader(wrap_compile: FunctionWrapper) -> Callable[[], dict[str, Any]]:
    def load() -> dict[str, Any]:
        module = importlib.import_module(COMPILE_PACKAGE)  # imports torch: only when a call needs it
        return {"compile_model": wrap_compile(module.compile_model)}

    return load


def _unwrapped(function: Callable[..., Any]) -> Callable[..., Any]:
    return function


def _compile_progress() -> Any:
    return importlib.import_module(f"{COMPILE_PACKAGE}.progress").collect


def _compile_warm() -> None:
    importlib.import_module(COMPILE_PACKAGE).preload()


def _compile_types() -> Iterable[ExposedType]:
    module = importlib.import_module(COMPILE_PACKAGE)
    compiled = getattr(module, "CompiledModel", None)
    if isinstance(compiled, type):
        yield ExposedType(compiled, names=frozenset({"run", "report"}))
    yield from _config_types()  # compile_model accepts and returns config objects


def check_size_value(field: str, value: Any) -> None:
    """Fields that make the worker allocate or loop in proportion to their value (docs/design.md#size-caps):
    set_attr bypasses pydantic's validators, so the cap construction applies is applied here too."""
    # Imported here: the configuration model loads after readiness, not with the surface.
    from compilation_bridge.vllm_config.compilation import CAPPED_SIZE_FIELDS
    from compilation_bridge.vllm_config.limits import check_size, check_sizes

    if field not in CAPPED_SIZE_FIELDS and field != PADDING_TABLE_FIELD:
        return
    if isinstance(value, list | tuple | set | frozenset):
        check_sizes(field, value)
    else:
        check_size(field, value)


# The conformance suite's long-running calls (compilation_bridge/testing/hooks.py), exposed under the
# testing package's name only when the operator switches them on at start-up; never in production.
TEST_HOOKS_MODULE = "compilation_bridge.testing"


def _test_hooks_loader() -> dict[str, Any]:
    from compilation_bridge.testing import hooks

    return {"sleep": hooks.sleep, "spin": hooks.spin, "count": hooks.count, "heap": hooks.heap}


# vLLM's engine and runtime (`vllm.LLM`, `LLMEngine`, `AsyncLLMEngine`, outputs, inputs, ...) need vLLM
# itself: the refusal says where such calls belong instead of only that they are refused.
ENGINE_HINT = (
    ". This worker serves vLLM's configuration; vLLM's engine and runtime (vllm.LLM, LLMEngine, "
    "AsyncLLMEngine, generate, chat, embed, ...) need vLLM itself: run them in a second Snakepit pool "
    "whose workers run vLLM, and route those calls there with `__runtime__: [pool_name: ...]` "
    '(docs/worker.md, "Configuration here, the engine in vLLM")'
)


def _engine_hint(module_name: str) -> str:
    return ENGINE_HINT if module_name == "vllm" or module_name.startswith("vllm.") else ""


def default_surface(wrap_compile: FunctionWrapper = _unwrapped) -> Surface:
    """The worker's surface. `wrap_compile` wraps `compile_model` when it loads: the protocol layer
    passes its recorder, so that another worker can rebuild a compiled model from the ref store
    (protocol/refcompiled.py) without this layer importing the protocol above it."""
    modules = [
        ExposedModule(
            name,
            _vllm_loader(names),
            _config_types,
            NOT_EXPOSED_BY_MODULE.get(name, frozenset()),
            implements=CONFIG_PACKAGE,
            refusal_hint=ENGINE_HINT if name == "vllm" else "",
        )
        for name, names in VLLM_MODULES.items()
    ]
    progress = _compile_progress
    modules.append(
        ExposedModule(
            COMPILE_PACKAGE,
            _compile_loader(wrap_compile),
            _compile_types,
            progress=progress,
            warm=_compile_warm,
            implements=COMPILE_PACKAGE,
        )
    )
    if conformance_hooks_enabled():
        modules.append(ExposedModule(TEST_HOOKS_MODULE, _test_hooks_loader))
    return Surface(modules, value_check=check_size_value, unexposed_hint=_engine_hint)


def warm_up(surface: Surface, *, config_model: bool = True, compile_stack: bool = False) -> None:
    """Import the configuration model and/or torch, Dynamo and Inductor ahead of the first call that needs
    them. Never raises: a call that needs what failed reports the error itself."""
    try:
        for name in surface.module_names() if config_model else ():
            if name.startswith("vllm."):
                surface.load_module(name)
        if compile_stack:
            surface.load_module(COMPILE_PACKAGE, warm=True)
    except Exception:
        log.exception("warm-up failed; calls that need it will report the error")
