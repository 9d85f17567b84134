"""`EngineArgs` (vLLM 0.14.0's `vllm.engine.arg_utils`): the arguments a user gives `vllm serve` or
`vllm.LLM`, and `create_engine_config()`, which turns them into the whole `VllmConfig` as vLLM's engine
would before it starts.

Like vLLM's, `EngineArgs` is a plain dataclass (no validation of its own: each config validates its part
when `create_engine_config` builds it), its defaults are the configs' own, and building the engine config
mutates the arguments the way vLLM's does (defaults resolved into `max_num_seqs`, `enable_chunked_prefill`,
...). What vLLM does there that needs its runtime is not part of the plan: no plugins are loaded, no Ray
cluster is asked for its runtime environment or placement group (as when none is running), and a
speculators-format checkpoint is refused instead of rewritten (see `_speculators_override`).
"""

# ruff: noqa: RUF009 (defaults taken from the configs' own fields by get_field, as vLLM's EngineArgs does)
from __future__ import annotations

import copy
import os
import platform
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any

from pydantic.fields import FieldInfo

from compilation_bridge.vllm_config.attention import AttentionBackendEnum, AttentionConfig
from compilation_bridge.vllm_config.cache import CacheConfig
from compilation_bridge.vllm_config.compilation import CompilationConfig
from compilation_bridge.vllm_config.device import DeviceConfig
from compilation_bridge.vllm_config.ec_transfer import ECTransferConfig
from compilation_bridge.vllm_config.enums import OptimizationLevel
from compilation_bridge.vllm_config.kv_events import KVEventsConfig
from compilation_bridge.vllm_config.kv_transfer import KVTransferConfig
from compilation_bridge.vllm_config.load import LoadConfig
from compilation_bridge.vllm_config.logs import logger, warning_once
from compilation_bridge.vllm_config.lora import LoRAConfig
from compilation_bridge.vllm_config.model import ModelConfig
from compilation_bridge.vllm_config.multimodal import MultiModalConfig
from compilation_bridge.vllm_config.observability import ObservabilityConfig
from compilation_bridge.vllm_config.parallel import EPLBConfig, ParallelConfig
from compilation_bridge.vllm_config.platforms import current_platform
from compilation_bridge.vllm_config.pooler import PoolerConfig
from compilation_bridge.vllm_config.profiler import ProfilerConfig
from compilation_bridge.vllm_config.scheduler import SchedulerConfig
from compilation_bridge.vllm_config.speculative import SpeculativeConfig
from compilation_bridge.vllm_config.structured_outputs import StructuredOutputsConfig
from compilation_bridge.vllm_config.usage import UsageContext
from compilation_bridge.vllm_config.vllm import VllmConfig

GiB_bytes = 1 << 30
# vLLM's map of ModelOpt's KV-cache quantization names to its cache dtypes.
MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP = {"fp8": "fp8_e4m3"}
# CPUs on which vLLM's V1 engine runs without chunked prefill and prefix caching.
_NO_CHUNKED_PREFILL_CPU_PREFIXES = ("ppc", "s390x", "riscv")


def get_field(cls: type, name: str) -> Any:
    """A dataclass field whose default is `cls.name`'s default (vLLM's `vllm.config.utils.get_field`)."""
    if not is_dataclass(cls):
        raise TypeError("The given class is not a dataclass.")
    cls_fields = {f.name: f for f in fields(cls)}
    if name not in cls_fields:
        raise ValueError(f"Field '{name}' not found in {cls.__name__}.")
    named_field = cls_fields[name]
    if (default_factory := named_field.default_factory) is not MISSING:
        return field(default_factory=default_factory)
    if (default := named_field.default) is not MISSING:
        if isinstance(default, FieldInfo):  # a pydantic Field
            if default.default_factory is not None:
                return field(default_factory=default.default_factory)
            default = default.default
        return field(default=default)
    raise ValueError(f"{cls.__name__}.{name} must have a default value or default factory.")


@dataclass
class EngineArgs:
    """Arguments for vLLM engine."""

    model: str = ModelConfig.model
    enable_return_routed_experts: bool = ModelConfig.enable_return_routed_experts
    model_weights: str = ModelConfig.model_weights
    served_model_name: str | list[str] | None = ModelConfig.served_model_name
    tokenizer: str | None = ModelConfig.tokenizer
    hf_config_path: str | None = ModelConfig.hf_config_path
    runner: str = ModelConfig.runner
    convert: str = ModelConfig.convert
    skip_tokenizer_init: bool = ModelConfig.skip_tokenizer_init
    enable_prompt_embeds: bool = ModelConfig.enable_prompt_embeds
    tokenizer_mode: str = ModelConfig.tokenizer_mode
    trust_remote_code: bool = ModelConfig.trust_remote_code
    allowed_local_media_path: str = ModelConfig.allowed_local_media_path
    allowed_media_domains: list[str] | None = ModelConfig.allowed_media_domains
    download_dir: str | None = LoadConfig.download_dir
    safetensors_load_strategy: str = LoadConfig.safetensors_load_strategy
    load_format: str = LoadConfig.load_format
    config_format: str = ModelConfig.config_format
    dtype: Any = ModelConfig.dtype
    kv_cache_dtype: str = CacheConfig.cache_dtype
    seed: int = ModelConfig.seed
    max_model_len: int | None = ModelConfig.max_model_len
    cudagraph_capture_sizes: list[int] | None = CompilationConfig.cudagraph_capture_sizes
    max_cudagraph_capture_size: int | None = get_field(CompilationConfig, "max_cudagraph_capture_size")
    # vLLM also takes an executor class here (expert use); over the wire only its names can arrive.
    distributed_executor_backend: str | None = ParallelConfig.distributed_executor_backend
    pipeline_parallel_size: int = ParallelConfig.pipeline_parallel_size
    master_addr: str = ParallelConfig.master_addr
    master_port: int = ParallelConfig.master_port
    nnodes: int = ParallelConfig.nnodes
    node_rank: int = ParallelConfig.node_rank
    tensor_parallel_size: int = ParallelConfig.tensor_parallel_size
    prefill_context_parallel_size: int = ParallelConfig.prefill_context_parallel_size
    decode_context_parallel_size: int = ParallelConfig.decode_context_parallel_size
    dcp_kv_cache_interleave_size: int = ParallelConfig.dcp_kv_cache_interleave_size
    cp_kv_cache_interleave_size: int = ParallelConfig.cp_kv_cache_interleave_size
    data_parallel_size: int = ParallelConfig.data_parallel_size
    data_parallel_rank: int | None = None
    data_parallel_start_rank: int | None = None
    data_parallel_size_local: int | None = None
    data_parallel_address: str | None = None
    data_parallel_rpc_port: int | None = None
    data_parallel_hybrid_lb: bool = False
    data_parallel_external_lb: bool = False
    data_parallel_backend: str = ParallelConfig.data_parallel_backend
    enable_expert_parallel: bool = ParallelConfig.enable_expert_parallel
    all2all_backend: str = ParallelConfig.all2all_backend
    enable_dbo: bool = ParallelConfig.enable_dbo
    ubatch_size: int = ParallelConfig.ubatch_size
    dbo_decode_token_threshold: int = ParallelConfig.dbo_decode_token_threshold
    dbo_prefill_token_threshold: int = ParallelConfig.dbo_prefill_token_threshold
    disable_nccl_for_dp_synchronization: bool | None = ParallelConfig.disable_nccl_for_dp_synchronization
    eplb_config: EPLBConfig = get_field(ParallelConfig, "eplb_config")
    enable_eplb: bool = ParallelConfig.enable_eplb
    expert_placement_strategy: str = ParallelConfig.expert_placement_strategy
    _api_process_count: int = ParallelConfig._api_process_count
    _api_process_rank: int = ParallelConfig._api_process_rank
    max_parallel_loading_workers: int | None = ParallelConfig.max_parallel_loading_workers
    block_size: int | None = CacheConfig.block_size
    enable_prefix_caching: bool | None = None
    prefix_caching_hash_algo: str = CacheConfig.prefix_caching_hash_algo
    disable_sliding_window: bool = ModelConfig.disable_sliding_window
    disable_cascade_attn: bool = ModelConfig.disable_cascade_attn
    swap_space: float = CacheConfig.swap_space
    cpu_offload_gb: float = CacheConfig.cpu_offload_gb
    gpu_memory_utilization: float = CacheConfig.gpu_memory_utilization
    kv_cache_memory_bytes: int | None = CacheConfig.kv_cache_memory_bytes
    max_num_batched_tokens: int | None = None
    max_num_partial_prefills: int = SchedulerConfig.max_num_partial_prefills
    max_long_partial_prefills: int = SchedulerConfig.max_long_partial_prefills
    long_prefill_token_threshold: int = SchedulerConfig.long_prefill_token_threshold
    max_num_seqs: int | None = None
    max_logprobs: int = ModelConfig.max_logprobs
    logprobs_mode: str = ModelConfig.logprobs_mode
    disable_log_stats: bool = False
    aggregate_engine_logging: bool = False
    revision: str | None = ModelConfig.revision
    code_revision: str | None = ModelConfig.code_revision
    hf_token: bool | str | None = ModelConfig.hf_token
    hf_overrides: Any = get_field(ModelConfig, "hf_overrides")
    tokenizer_revision: str | None = ModelConfig.tokenizer_revision
    quantization: str | None = ModelConfig.quantization
    allow_deprecated_quantization: bool = ModelConfig.allow_deprecated_quantization
    enforce_eager: bool = ModelConfig.enforce_eager
    disable_custom_all_reduce: bool = ParallelConfig.disable_custom_all_reduce
    limit_mm_per_prompt: dict[str, Any] = get_field(MultiModalConfig, "limit_per_prompt")
    enable_mm_embeds: bool = MultiModalConfig.enable_mm_embeds
    interleave_mm_strings: bool = MultiModalConfig.interleave_mm_strings
    media_io_kwargs: dict[str, dict[str, Any]] = get_field(MultiModalConfig, "media_io_kwargs")
    mm_processor_kwargs: dict[str, Any] | None = MultiModalConfig.mm_processor_kwargs
    mm_processor_cache_gb: float = MultiModalConfig.mm_processor_cache_gb
    mm_processor_cache_type: str | None = MultiModalConfig.mm_processor_cache_type
    mm_shm_cache_max_object_size_mb: int = MultiModalConfig.mm_shm_cache_max_object_size_mb
    mm_encoder_tp_mode: str = MultiModalConfig.mm_encoder_tp_mode
    mm_encoder_attn_backend: AttentionBackendEnum | str | None = MultiModalConfig.mm_encoder_attn_backend
    io_processor_plugin: str | None = None
    skip_mm_profiling: bool = MultiModalConfig.skip_mm_profiling
    video_pruning_rate: float = MultiModalConfig.video_pruning_rate
    # LoRA fields
    enable_lora: bool = False
    max_loras: int = LoRAConfig.max_loras
    max_lora_rank: int = LoRAConfig.max_lora_rank
    default_mm_loras: dict[str, str] | None = LoRAConfig.default_mm_loras
    fully_sharded_loras: bool = LoRAConfig.fully_sharded_loras
    max_cpu_loras: int | None = LoRAConfig.max_cpu_loras
    lora_dtype: Any = LoRAConfig.lora_dtype
    enable_tower_connector_lora: bool = LoRAConfig.enable_tower_connector_lora

    ray_workers_use_nsight: bool = ParallelConfig.ray_workers_use_nsight
    num_gpu_blocks_override: int | None = CacheConfig.num_gpu_blocks_override
    model_loader_extra_config: dict[str, Any] = get_field(LoadConfig, "model_loader_extra_config")
    ignore_patterns: str | list[str] = get_field(LoadConfig, "ignore_patterns")

    enable_chunked_prefill: bool | None = None
    disable_chunked_mm_input: bool = SchedulerConfig.disable_chunked_mm_input

    disable_hybrid_kv_cache_manager: bool | None = SchedulerConfig.disable_hybrid_kv_cache_manager

    structured_outputs_config: StructuredOutputsConfig = get_field(VllmConfig, "structured_outputs_config")
    reasoning_parser: str = StructuredOutputsConfig.reasoning_parser
    reasoning_parser_plugin: str | None = None

    logits_processor_pattern: str | None = ModelConfig.logits_processor_pattern

    speculative_config: dict[str, Any] | None = None

    show_hidden_metrics_for_version: str | None = ObservabilityConfig.show_hidden_metrics_for_version
    otlp_traces_endpoint: str | None = ObservabilityConfig.otlp_traces_endpoint
    collect_detailed_traces: list[str] | None = ObservabilityConfig.collect_detailed_traces
    kv_cache_metrics: bool = ObservabilityConfig.kv_cache_metrics
    kv_cache_metrics_sample: float = get_field(ObservabilityConfig, "kv_cache_metrics_sample")
    cudagraph_metrics: bool = ObservabilityConfig.cudagraph_metrics
    enable_layerwise_nvtx_tracing: bool = ObservabilityConfig.enable_layerwise_nvtx_tracing
    enable_mfu_metrics: bool = ObservabilityConfig.enable_mfu_metrics
    enable_logging_iteration_details: bool = ObservabilityConfig.enable_logging_iteration_details
    enable_mm_processor_stats: bool = ObservabilityConfig.enable_mm_processor_stats
    scheduling_policy: str = SchedulerConfig.policy
    scheduler_cls: str | None = SchedulerConfig.scheduler_cls

    pooler_config: PoolerConfig | None = ModelConfig.pooler_config
    compilation_config: CompilationConfig = get_field(VllmConfig, "compilation_config")
    attention_config: AttentionConfig = get_field(VllmConfig, "attention_config")
    worker_cls: str = ParallelConfig.worker_cls
    worker_extension_cls: str = ParallelConfig.worker_extension_cls

    profiler_config: ProfilerConfig = get_field(VllmConfig, "profiler_config")

    kv_transfer_config: KVTransferConfig | None = None
    kv_events_config: KVEventsConfig | None = None

    ec_transfer_config: ECTransferConfig | None = None

    generation_config: str = ModelConfig.generation_config
    enable_sleep_mode: bool = ModelConfig.enable_sleep_mode
    override_generation_config: dict[str, Any] = get_field(ModelConfig, "override_generation_config")
    model_impl: str = ModelConfig.model_impl
    override_attention_dtype: str = ModelConfig.override_attention_dtype
    attention_backend: AttentionBackendEnum | None = AttentionConfig.backend

    calculate_kv_scales: bool = CacheConfig.calculate_kv_scales
    mamba_cache_dtype: str = CacheConfig.mamba_cache_dtype
    mamba_ssm_cache_dtype: str = CacheConfig.mamba_ssm_cache_dtype
    mamba_block_size: int | None = get_field(CacheConfig, "mamba_block_size")

    additional_config: dict[str, Any] = get_field(VllmConfig, "additional_config")

    use_tqdm_on_load: bool = LoadConfig.use_tqdm_on_load
    pt_load_map_location: str = LoadConfig.pt_load_map_location

    logits_processors: list[str] | None = ModelConfig.logits_processors
    """Custom logitproc types"""

    async_scheduling: bool | None = SchedulerConfig.async_scheduling

    stream_interval: int = SchedulerConfig.stream_interval

    kv_sharing_fast_prefill: bool = CacheConfig.kv_sharing_fast_prefill
    optimization_level: OptimizationLevel = VllmConfig.optimization_level

    kv_offloading_size: float | None = CacheConfig.kv_offloading_size
    kv_offloading_backend: str = CacheConfig.kv_offloading_backend
    tokens_only: bool = False

    def __post_init__(self) -> None:
        # support `EngineArgs(compilation_config={...})`
        # without having to manually construct a
        # CompilationConfig object
        if isinstance(self.compilation_config, dict):
            self.compilation_config = CompilationConfig(**self.compilation_config)
        if isinstance(self.attention_config, dict):
            self.attention_config = AttentionConfig(**self.attention_config)
        if isinstance(self.eplb_config, dict):
            self.eplb_config = EPLBConfig(**self.eplb_config)
        # vLLM loads its general plugins here and, offline, resolves a hub id to its cached folder: this
        # worker loads no plugins and reads models from local folders only, so both leave the values as given.

    def create_model_config(self) -> ModelConfig:
        # gguf file needs a specific model loader
        if _is_gguf(self.model):
            self.quantization = self.load_format = "gguf"
        return ModelConfig(
            model=self.model,
            model_weights=self.model_weights,
            hf_config_path=self.hf_config_path,
            runner=self.runner,
            convert=self.convert,
            tokenizer=self.tokenizer,
            tokenizer_mode=self.tokenizer_mode,
            trust_remote_code=self.trust_remote_code,
            allowed_local_media_path=self.allowed_local_media_path,
            allowed_media_domains=self.allowed_media_domains,
            dtype=self.dtype,
            seed=self.seed,
            revision=self.revision,
            code_revision=self.code_revision,
            hf_token=self.hf_token,
            hf_overrides=self.hf_overrides,
            tokenizer_revision=self.tokenizer_revision,
            max_model_len=self.max_model_len,
            quantization=self.quantization,
            allow_deprecated_quantization=self.allow_deprecated_quantization,
            enforce_eager=self.enforce_eager,
            enable_return_routed_experts=self.enable_return_routed_experts,
            max_logprobs=self.max_logprobs,
            logprobs_mode=self.logprobs_mode,
            disable_sliding_window=self.disable_sliding_window,
            disable_cascade_attn=self.disable_cascade_attn,
            skip_tokenizer_init=self.skip_tokenizer_init,
            enable_prompt_embeds=self.enable_prompt_embeds,
            served_model_name=self.served_model_name,
            limit_mm_per_prompt=self.limit_mm_per_prompt,
            enable_mm_embeds=self.enable_mm_embeds,
            interleave_mm_strings=self.interleave_mm_strings,
            media_io_kwargs=self.media_io_kwargs,
            skip_mm_profiling=self.skip_mm_profiling,
            config_format=self.config_format,
            mm_processor_kwargs=self.mm_processor_kwargs,
            mm_processor_cache_gb=self.mm_processor_cache_gb,
            mm_processor_cache_type=self.mm_processor_cache_type,
            mm_shm_cache_max_object_size_mb=self.mm_shm_cache_max_object_size_mb,
            mm_encoder_tp_mode=self.mm_encoder_tp_mode,
            mm_encoder_attn_backend=self.mm_encoder_attn_backend,
            pooler_config=self.pooler_config,
            logits_processor_pattern=self.logits_processor_pattern,
            generation_config=self.generation_config,
            override_generation_config=self.override_generation_config,
            enable_sleep_mode=self.enable_sleep_mode,
            model_impl=self.model_impl,
            override_attention_dtype=self.override_attention_dtype,
            logits_processors=self.logits_processors,
            video_pruning_rate=self.video_pruning_rate,
            io_processor_plugin=self.io_processor_plugin,
        )

    def create_load_config(self) -> LoadConfig:
        if self.quantization == "bitsandbytes":
            self.load_format = "bitsandbytes"
        if self.load_format == "tensorizer":
            # vLLM fills the tensorizer's options from model_loader_extra_config here, with classes of its
            # tensorizer loader: a loader of weights, which this worker has none of.
            raise NotImplementedError(
                "load_format='tensorizer' needs vLLM's tensorizer loader, which this worker does not have: "
                "create this engine config where vLLM runs"
            )
        return LoadConfig(
            load_format=self.load_format,
            download_dir=self.download_dir,
            safetensors_load_strategy=self.safetensors_load_strategy,
            device="cpu" if _is_online_quantization(self.quantization) else None,
            model_loader_extra_config=self.model_loader_extra_config,
            ignore_patterns=self.ignore_patterns,
            use_tqdm_on_load=self.use_tqdm_on_load,
            pt_load_map_location=self.pt_load_map_location,
        )

    def create_speculative_config(
        self, target_model_config: ModelConfig, target_parallel_config: ParallelConfig
    ) -> SpeculativeConfig | None:
        """Initializes and returns a SpeculativeConfig object based on
        `speculative_config`.

        This function utilizes `speculative_config` to create a
        SpeculativeConfig object. The `speculative_config` can either be
        provided as a JSON string input via CLI arguments or directly as a
        dictionary from the engine.
        """
        if self.speculative_config is None:
            return None
        # Note(Shangming): These parameters are not obtained from the cli arg
        # '--speculative-config' and must be passed in when creating the engine
        # config.
        self.speculative_config.update(
            {"target_model_config": target_model_config, "target_parallel_config": target_parallel_config}
        )
        return SpeculativeConfig(**self.speculative_config)

    def create_engine_config(
        self, usage_context: UsageContext | str | None = None, headless: bool = False
    ) -> VllmConfig:
        """
        Create the VllmConfig.

        NOTE: If VllmConfig is incompatible, we raise an error.
        """
        usage_context = _usage_context(usage_context)
        device_config = DeviceConfig(device=current_platform.device_type)
        self._speculators_override()

        model_config = self.create_model_config()
        self.model = model_config.model
        self.model_weights = model_config.model_weights
        self.tokenizer = model_config.tokenizer

        self._check_feature_supported(model_config)
        self._set_default_chunked_prefill_and_prefix_caching_args(model_config)
        self._set_default_max_num_seqs_and_batched_tokens_args(usage_context, model_config)

        # Note(hc): In the current implementation of decode context
        # parallel(DCP), tp_size needs to be divisible by dcp_size,
        # because the world size does not change by dcp, it simply
        # reuses the GPUs of TP group, and split one TP group into
        # tp_size//dcp_size DCP groups.
        assert self.tensor_parallel_size % self.decode_context_parallel_size == 0, (
            f"tp_size={self.tensor_parallel_size} must be divisible by"
            f"dcp_size={self.decode_context_parallel_size}."
        )
        cache_config = self._create_cache_config(model_config)
        parallel_config = self._create_parallel_config(model_config, headless)
        speculative_config = self.create_speculative_config(
            target_model_config=model_config, target_parallel_config=parallel_config
        )
        scheduler_config = self._create_scheduler_config(model_config)
        lora_config = self._create_lora_config(model_config)
        if (
            lora_config is not None
            and speculative_config is not None
            and scheduler_config.max_num_batched_tokens
            < (scheduler_config.max_num_seqs * (speculative_config.num_speculative_tokens + 1))
        ):
            raise ValueError(
                "Consider increasing max_num_batched_tokens or decreasing num_speculative_tokens"
            )

        # bitsandbytes pre-quantized model need a specific model loader
        if model_config.quantization == "bitsandbytes":
            self.quantization = self.load_format = "bitsandbytes"

        attention_config = self._create_attention_config()
        load_config = self.create_load_config()

        # Pass reasoning_parser into StructuredOutputsConfig
        if self.reasoning_parser:
            self.structured_outputs_config.reasoning_parser = self.reasoning_parser
        if self.reasoning_parser_plugin:
            self.structured_outputs_config.reasoning_parser_plugin = self.reasoning_parser_plugin

        return VllmConfig(
            model_config=model_config,
            cache_config=cache_config,
            parallel_config=parallel_config,
            scheduler_config=scheduler_config,
            device_config=device_config,
            load_config=load_config,
            attention_config=attention_config,
            lora_config=lora_config,
            speculative_config=speculative_config,
            structured_outputs_config=self.structured_outputs_config,
            observability_config=self._create_observability_config(),
            compilation_config=self._create_compilation_config(),
            kv_transfer_config=self.kv_transfer_config,
            kv_events_config=self.kv_events_config,
            ec_transfer_config=self.ec_transfer_config,
            profiler_config=self.profiler_config,
            additional_config=self.additional_config,
            optimization_level=self.optimization_level,
        )

    def _speculators_override(self) -> None:
        """vLLM rewrites model, tokenizer and speculative config when the model folder holds a
        speculators-format checkpoint (its config.json has `speculators_config`). That rewrite reads the
        speculator's own classes, which this worker does not have: such a model is refused by name."""
        if _is_cloud_storage(self.model):
            return
        from compilation_bridge.vllm_config.model_files import load_hf_config

        if load_hf_config(self.model).get("speculators_config") is not None:
            raise NotImplementedError(
                f"{self.model!r} is a speculators-format checkpoint, which this worker does not read: "
                "pass the target model and speculative_config={'method': ..., 'model': ...} instead"
            )

    def _create_cache_config(self, model_config: ModelConfig) -> CacheConfig:
        sliding_window: int | None = None
        if not _is_interleaved(model_config.hf_text_config):
            # Only set CacheConfig.sliding_window if the model is all sliding
            # window. Otherwise CacheConfig.sliding_window will override the
            # global layers in interleaved sliding window models.
            sliding_window = model_config.get_sliding_window()
        return CacheConfig(
            block_size=self.block_size,
            gpu_memory_utilization=self.gpu_memory_utilization,
            kv_cache_memory_bytes=self.kv_cache_memory_bytes,
            swap_space=self.swap_space,
            cache_dtype=resolve_kv_cache_dtype_string(self.kv_cache_dtype, model_config),
            is_attention_free=model_config.is_attention_free,
            num_gpu_blocks_override=self.num_gpu_blocks_override,
            sliding_window=sliding_window,
            enable_prefix_caching=self.enable_prefix_caching,
            prefix_caching_hash_algo=self.prefix_caching_hash_algo,
            cpu_offload_gb=self.cpu_offload_gb,
            calculate_kv_scales=self.calculate_kv_scales,
            kv_sharing_fast_prefill=self.kv_sharing_fast_prefill,
            mamba_cache_dtype=self.mamba_cache_dtype,
            mamba_ssm_cache_dtype=self.mamba_ssm_cache_dtype,
            mamba_block_size=self.mamba_block_size,
            kv_offloading_size=self.kv_offloading_size,
            kv_offloading_backend=self.kv_offloading_backend,
        )

    def _create_parallel_config(self, model_config: ModelConfig, headless: bool) -> ParallelConfig:
        data_parallel_external_lb, data_parallel_size_local = self._resolve_data_parallel(headless)
        if self.tokens_only and not model_config.skip_tokenizer_init:
            model_config.skip_tokenizer_init = True
            logger.info("Skipping tokenizer initialization for tokens-only mode.")
        return ParallelConfig(
            pipeline_parallel_size=self.pipeline_parallel_size,
            tensor_parallel_size=self.tensor_parallel_size,
            prefill_context_parallel_size=self.prefill_context_parallel_size,
            data_parallel_size=self.data_parallel_size,
            data_parallel_rank=self.data_parallel_rank or 0,
            data_parallel_external_lb=data_parallel_external_lb,
            data_parallel_size_local=data_parallel_size_local,
            master_addr=self.master_addr,
            master_port=self.master_port,
            nnodes=self.nnodes,
            node_rank=self.node_rank,
            data_parallel_master_ip=self._data_parallel_address(),
            data_parallel_rpc_port=(
                self.data_parallel_rpc_port
                if self.data_parallel_rpc_port is not None
                else ParallelConfig.data_parallel_rpc_port
            ),
            data_parallel_backend=self.data_parallel_backend,
            data_parallel_hybrid_lb=self.data_parallel_hybrid_lb,
            is_moe_model=model_config.is_moe,
            enable_expert_parallel=self.enable_expert_parallel,
            all2all_backend=self.all2all_backend,
            enable_dbo=self.enable_dbo,
            ubatch_size=self.ubatch_size,
            dbo_decode_token_threshold=self.dbo_decode_token_threshold,
            dbo_prefill_token_threshold=self.dbo_prefill_token_threshold,
            disable_nccl_for_dp_synchronization=self.disable_nccl_for_dp_synchronization,
            enable_eplb=self.enable_eplb,
            eplb_config=self.eplb_config,
            expert_placement_strategy=self.expert_placement_strategy,
            max_parallel_loading_workers=self.max_parallel_loading_workers,
            disable_custom_all_reduce=self.disable_custom_all_reduce,
            ray_workers_use_nsight=self.ray_workers_use_nsight,
            ray_runtime_env=None,  # vLLM asks a running Ray cluster; a plan has none
            placement_group=None,
            distributed_executor_backend=self.distributed_executor_backend,
            worker_cls=self.worker_cls,
            worker_extension_cls=self.worker_extension_cls,
            decode_context_parallel_size=self.decode_context_parallel_size,
            dcp_kv_cache_interleave_size=self.dcp_kv_cache_interleave_size,
            cp_kv_cache_interleave_size=self.cp_kv_cache_interleave_size,
            _api_process_count=self._api_process_count,
            _api_process_rank=self._api_process_rank,
        )

    def _resolve_data_parallel(self, headless: bool) -> tuple[bool, int]:
        """Data-parallel ranks and load-balancing mode, as vLLM infers them from the arguments (it updates
        `data_parallel_rank`, `data_parallel_size_local` and `data_parallel_hybrid_lb` on the way)."""
        assert not headless or not self.data_parallel_hybrid_lb, (
            "data_parallel_hybrid_lb is not applicable in headless mode"
        )
        assert not (self.data_parallel_hybrid_lb and self.data_parallel_external_lb), (
            "data_parallel_hybrid_lb and data_parallel_external_lb cannot both be True."
        )
        assert self.data_parallel_backend == "mp" or self.nnodes == 1, (
            "nnodes > 1 is only supported with data_parallel_backend=mp"
        )
        inferred_data_parallel_rank = self._infer_multi_node_ranks()
        data_parallel_external_lb = self.data_parallel_external_lb or self.data_parallel_rank is not None
        # Local DP rank = 1, use pure-external LB.
        if data_parallel_external_lb:
            assert self.data_parallel_rank is not None, (
                "data_parallel_rank or node_rank must be specified if data_parallel_external_lb is enable."
            )
            assert self.data_parallel_size_local in (1, None), (
                "data_parallel_size_local must be 1 or None when data_parallel_rank is set"
            )
            # Use full external lb if we have local_size of 1.
            self.data_parallel_hybrid_lb = False
            return data_parallel_external_lb, 1
        if self.data_parallel_size_local is not None:
            data_parallel_size_local = self.data_parallel_size_local
            if self.data_parallel_start_rank and not headless:
                # Infer hybrid LB mode.
                self.data_parallel_hybrid_lb = True
            if self.data_parallel_hybrid_lb and data_parallel_size_local == 1:
                # Use full external lb if we have local_size of 1.
                logger.warning(
                    "data_parallel_hybrid_lb is not eligible when "
                    "data_parallel_size_local = 1, autoswitch to "
                    "data_parallel_external_lb."
                )
                data_parallel_external_lb = True
                self.data_parallel_hybrid_lb = False
            if data_parallel_size_local == self.data_parallel_size:
                # Disable hybrid LB mode if set for a single node
                self.data_parallel_hybrid_lb = False
            self.data_parallel_rank = self.data_parallel_start_rank or inferred_data_parallel_rank
            if self.nnodes > 1:
                logger.info(
                    "Inferred data_parallel_rank %d from node_rank %d",
                    self.data_parallel_rank,
                    self.node_rank,
                )
            return data_parallel_external_lb, data_parallel_size_local
        assert not self.data_parallel_hybrid_lb, (
            "data_parallel_size_local must be set to use data_parallel_hybrid_lb."
        )
        if self.data_parallel_backend == "ray" and _ray_dp_pack_strategy() == "span":
            # Data parallel size defaults to 1 if DP ranks are spanning
            # multiple nodes
            return data_parallel_external_lb, 1
        # Otherwise local DP size defaults to global DP size if not set
        return data_parallel_external_lb, self.data_parallel_size

    def _infer_multi_node_ranks(self) -> int:
        if self.nnodes <= 1:
            return 0
        world_size = self.data_parallel_size * self.pipeline_parallel_size * self.tensor_parallel_size
        world_size_within_dp = self.pipeline_parallel_size * self.tensor_parallel_size
        local_world_size = world_size // self.nnodes
        assert world_size % self.nnodes == 0, (
            f"world_size={world_size} must be divisible by nnodes={self.nnodes}."
        )
        assert self.node_rank < self.nnodes, (
            f"node_rank={self.node_rank} must be less than nnodes={self.nnodes}."
        )
        inferred_data_parallel_rank = (self.node_rank * local_world_size) // world_size_within_dp
        if self.data_parallel_size > 1 and self.data_parallel_external_lb:
            self.data_parallel_rank = inferred_data_parallel_rank
            logger.info(
                "Inferred data_parallel_rank %d from node_rank %d for external lb",
                self.data_parallel_rank,
                self.node_rank,
            )
        elif self.data_parallel_size_local is None:
            # Infer data parallel size local for internal dplb:
            self.data_parallel_size_local = max(local_world_size // world_size_within_dp, 1)
        return inferred_data_parallel_rank

    def _data_parallel_address(self) -> str:
        """DP address, used in multi-node case for torch distributed group and ZMQ sockets."""
        if self.data_parallel_address is not None:
            return self.data_parallel_address
        if self.data_parallel_backend == "ray":
            # vLLM answers this host's IP address: the address of the machine that plans, not of the one
            # that will run the engine, so a plan has to be told it.
            raise ValueError(
                "data_parallel_backend='ray' without data_parallel_address: vLLM would take the address of "
                "the host creating the engine config; give data_parallel_address explicitly"
            )
        assert self.data_parallel_backend == "mp", (
            "data_parallel_backend can only be ray or mp, got %s",
            self.data_parallel_backend,
        )
        return self.master_addr or ParallelConfig.data_parallel_master_ip

    def _create_scheduler_config(self, model_config: ModelConfig) -> SchedulerConfig:
        return SchedulerConfig(
            runner_type=model_config.runner_type,
            max_num_batched_tokens=self.max_num_batched_tokens,
            max_num_seqs=self.max_num_seqs,
            max_model_len=model_config.max_model_len,
            enable_chunked_prefill=self.enable_chunked_prefill,
            disable_chunked_mm_input=self.disable_chunked_mm_input,
            is_multimodal_model=model_config.is_multimodal_model,
            is_encoder_decoder=model_config.is_encoder_decoder,
            policy=self.scheduling_policy,
            scheduler_cls=self.scheduler_cls,
            max_num_partial_prefills=self.max_num_partial_prefills,
            max_long_partial_prefills=self.max_long_partial_prefills,
            long_prefill_token_threshold=self.long_prefill_token_threshold,
            disable_hybrid_kv_cache_manager=self.disable_hybrid_kv_cache_manager,
            async_scheduling=self.async_scheduling,
            stream_interval=self.stream_interval,
        )

    def _create_lora_config(self, model_config: ModelConfig) -> LoRAConfig | None:
        if not model_config.is_multimodal_model and self.default_mm_loras:
            raise ValueError("Default modality-specific LoRA(s) were provided for a non multimodal model")
        if not self.enable_lora:
            return None
        return LoRAConfig(
            max_lora_rank=self.max_lora_rank,
            max_loras=self.max_loras,
            default_mm_loras=self.default_mm_loras,
            fully_sharded_loras=self.fully_sharded_loras,
            lora_dtype=self.lora_dtype,
            enable_tower_connector_lora=self.enable_tower_connector_lora,
            max_cpu_loras=self.max_cpu_loras if self.max_cpu_loras and self.max_cpu_loras > 0 else None,
        )

    def _create_attention_config(self) -> AttentionConfig:
        """Attention config overrides"""
        attention_config = copy.deepcopy(self.attention_config)
        if self.attention_backend is not None:
            if attention_config.backend is not None:
                raise ValueError("attention_backend and attention_config.backend are mutually exclusive")
            # Convert string to enum if needed (CLI parsing returns a string)
            if isinstance(self.attention_backend, str):
                attention_config.backend = AttentionBackendEnum[self.attention_backend.upper()]
            else:
                attention_config.backend = self.attention_backend
        return attention_config

    def _create_observability_config(self) -> ObservabilityConfig:
        return ObservabilityConfig(
            show_hidden_metrics_for_version=self.show_hidden_metrics_for_version,
            otlp_traces_endpoint=self.otlp_traces_endpoint,
            collect_detailed_traces=self.collect_detailed_traces,
            kv_cache_metrics=self.kv_cache_metrics,
            kv_cache_metrics_sample=self.kv_cache_metrics_sample,
            cudagraph_metrics=self.cudagraph_metrics,
            enable_layerwise_nvtx_tracing=self.enable_layerwise_nvtx_tracing,
            enable_mfu_metrics=self.enable_mfu_metrics,
            enable_mm_processor_stats=self.enable_mm_processor_stats,
            enable_logging_iteration_details=self.enable_logging_iteration_details,
        )

    def _create_compilation_config(self) -> CompilationConfig:
        """Compilation config overrides"""
        compilation_config = copy.deepcopy(self.compilation_config)
        if self.cudagraph_capture_sizes is not None:
            if compilation_config.cudagraph_capture_sizes is not None:
                raise ValueError(
                    "cudagraph_capture_sizes and compilation_config."
                    "cudagraph_capture_sizes are mutually exclusive"
                )
            compilation_config.cudagraph_capture_sizes = self.cudagraph_capture_sizes
        if self.max_cudagraph_capture_size is not None:
            if compilation_config.max_cudagraph_capture_size is not None:
                raise ValueError(
                    "max_cudagraph_capture_size and compilation_config."
                    "max_cudagraph_capture_size are mutually exclusive"
                )
            compilation_config.max_cudagraph_capture_size = self.max_cudagraph_capture_size
        return compilation_config

    def _check_feature_supported(self, model_config: ModelConfig) -> None:
        """Raise an error if the feature is not supported."""
        if self.logits_processor_pattern != EngineArgs.logits_processor_pattern:
            _raise_unsupported_error(feature_name="--logits-processor-pattern")

        # No Concurrent Partial Prefills so far.
        if (
            self.max_num_partial_prefills != SchedulerConfig.max_num_partial_prefills
            or self.max_long_partial_prefills != SchedulerConfig.max_long_partial_prefills
        ):
            _raise_unsupported_error(feature_name="Concurrent Partial Prefill")

        # N-gram, Medusa, and Eagle are supported for speculative decoding.
        if self.speculative_config is not None:
            # speculative_config could still be a dict at this point
            if isinstance(self.speculative_config, dict):
                method = self.speculative_config.get("method", None)
            else:
                method = self.speculative_config.method
            if method == "draft_model":
                raise NotImplementedError(
                    "Draft model speculative decoding is not supported yet. "
                    "Please consider using other speculative decoding methods "
                    "such as ngram, medusa, eagle, or mtp."
                )

        if self.pipeline_parallel_size > 1:
            supports_pp = getattr(self.distributed_executor_backend, "supports_pp", False)
            if not supports_pp and self.distributed_executor_backend not in (
                ParallelConfig.distributed_executor_backend,
                "ray",
                "mp",
                "external_launcher",
            ):
                name = (
                    "Pipeline Parallelism without Ray distributed "
                    "executor or multiprocessing executor or external "
                    "launcher"
                )
                _raise_unsupported_error(feature_name=name)

    @classmethod
    def get_batch_defaults(
        cls, world_size: int
    ) -> tuple[dict[UsageContext | None, int], dict[UsageContext | None, int]]:
        """The defaults of max_num_batched_tokens and max_num_seqs by usage context, for the platform."""
        if current_platform.is_cpu():  # cpu specific default values.
            return (
                {
                    UsageContext.LLM_CLASS: 4096 * world_size,
                    UsageContext.OPENAI_API_SERVER: 2048 * world_size,
                },
                {UsageContext.LLM_CLASS: 256 * world_size, UsageContext.OPENAI_API_SERVER: 128 * world_size},
            )
        # NOTE(Kuntai): Setting large `max_num_batched_tokens` for A100 reduces
        # throughput, see PR #17885 for more details.
        # So here we do an extra device name check to prevent such regression.
        device_memory, device_name = current_platform.device_total_memory(), current_platform.device_name()
        if device_memory >= 70 * GiB_bytes and "a100" not in device_name.lower():
            # For GPUs like H100 and MI300x, use larger default values.
            return (
                {UsageContext.LLM_CLASS: 16384, UsageContext.OPENAI_API_SERVER: 8192},
                {UsageContext.LLM_CLASS: 1024, UsageContext.OPENAI_API_SERVER: 1024},
            )
        return (
            {UsageContext.LLM_CLASS: 8192, UsageContext.OPENAI_API_SERVER: 2048},
            {UsageContext.LLM_CLASS: 256, UsageContext.OPENAI_API_SERVER: 256},
        )

    def _set_default_chunked_prefill_and_prefix_caching_args(self, model_config: ModelConfig) -> None:
        default_chunked_prefill = model_config.is_chunked_prefill_supported
        default_prefix_caching = model_config.is_prefix_caching_supported

        if self.enable_chunked_prefill is None:
            self.enable_chunked_prefill = default_chunked_prefill
        elif (
            model_config.runner_type == "generate"
            and not self.enable_chunked_prefill
            and default_chunked_prefill
        ):
            warning_once(
                "This model does not officially support disabling chunked prefill. "
                "Disabling this manually may cause the engine to crash "
                "or produce incorrect outputs."
            )
        elif (
            model_config.runner_type == "pooling"
            and self.enable_chunked_prefill
            and not default_chunked_prefill
        ):
            warning_once(
                "This model does not officially support chunked prefill. "
                "Enabling this manually may cause the engine to crash "
                "or produce incorrect outputs."
            )

        if self.enable_prefix_caching is None:
            self.enable_prefix_caching = default_prefix_caching
        elif (
            model_config.runner_type == "pooling"
            and self.enable_prefix_caching
            and not default_prefix_caching
        ):
            warning_once(
                "This model does not officially support prefix caching. "
                "Enabling this manually may cause the engine to crash "
                "or produce incorrect outputs."
            )

        # Disable chunked prefill and prefix caching for:
        # POWER (ppc64le)/s390x/RISCV CPUs in V1
        if current_platform.is_cpu() and platform.machine().lower().startswith(
            _NO_CHUNKED_PREFILL_CPU_PREFIXES
        ):
            logger.info(
                "Chunked prefill is not supported for ARM and POWER, "
                "S390X and RISC-V CPUs; disabling it for V1 backend."
            )
            self.enable_chunked_prefill = False
            logger.info(
                "Prefix caching is not supported for ARM and POWER, "
                "S390X and RISC-V CPUs; disabling it for V1 backend."
            )
            self.enable_prefix_caching = False

    def _set_default_max_num_seqs_and_batched_tokens_args(
        self, usage_context: UsageContext | None, model_config: ModelConfig
    ) -> None:
        world_size = self.pipeline_parallel_size * self.tensor_parallel_size
        default_max_num_batched_tokens, default_max_num_seqs = self.get_batch_defaults(world_size)

        orig_max_num_batched_tokens = self.max_num_batched_tokens
        orig_max_num_seqs = self.max_num_seqs

        if self.max_num_batched_tokens is None:
            self.max_num_batched_tokens = default_max_num_batched_tokens.get(
                usage_context, SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS
            )
        if self.max_num_seqs is None:
            self.max_num_seqs = default_max_num_seqs.get(usage_context, SchedulerConfig.DEFAULT_MAX_NUM_SEQS)

        if orig_max_num_batched_tokens is None:
            if not self.enable_chunked_prefill:
                # If max_model_len is too short, use the default for higher throughput.
                self.max_num_batched_tokens = max(model_config.max_model_len, self.max_num_batched_tokens)
            # When using default settings,
            # Ensure max_num_batched_tokens does not exceed model limit.
            # Some models (e.g., Whisper) have embeddings tied to max length.
            self.max_num_batched_tokens = min(
                self.max_num_seqs * model_config.max_model_len, self.max_num_batched_tokens
            )
            _log_default("max_num_batched_tokens", self.max_num_batched_tokens, usage_context)

        if orig_max_num_seqs is None:
            assert self.max_num_batched_tokens is not None  # For type checking
            self.max_num_seqs = min(self.max_num_seqs, self.max_num_batched_tokens)
            _log_default("max_num_seqs", self.max_num_seqs, usage_context)


@dataclass
class AsyncEngineArgs(EngineArgs):
    """Arguments for asynchronous vLLM engine."""

    enable_log_requests: bool = False


def resolve_kv_cache_dtype_string(kv_cache_dtype: str, model_config: ModelConfig) -> str:
    """Resolve 'auto' kv_cache_dtype to the actual string value from model config.
    Returns the resolved cache_dtype string.
    """
    if kv_cache_dtype != "auto":
        return kv_cache_dtype
    quant_cfg = model_config.hf_config.get("quantization_config")
    if isinstance(quant_cfg, dict) and (kv_algo_str := _kv_cache_quant_algo_string(quant_cfg)) is not None:
        return kv_algo_str
    # Default to auto (will be handled by downstream code)
    return "auto"


def _kv_cache_quant_algo_string(quant_cfg: dict[str, Any]) -> str | None:
    """The KV-cache quantization a ModelOpt checkpoint declares, as a cache dtype (vLLM's
    `get_kv_cache_quant_algo_string`): None when it declares none, "auto" when vLLM does not know it."""
    if not str(quant_cfg.get("quant_method", "")).startswith("modelopt"):
        return None
    quantization_inner = quant_cfg.get("quantization", quant_cfg)
    kv_algo = (
        quantization_inner.get("kv_cache_scheme")
        or quant_cfg.get("kv_cache_scheme")
        or quantization_inner.get("kv_cache_quant_algo")
        or quant_cfg.get("kv_cache_quant_algo")
    )
    if isinstance(kv_algo, dict):
        if (
            kv_algo.get("dynamic") is False
            and kv_algo.get("num_bits") == 8
            and kv_algo.get("type") == "float"
        ):
            kv_algo = "fp8"
        else:
            _warn_unknown_kv_algo(kv_algo)
            return "auto"
    if isinstance(kv_algo, str):
        if kv_algo.lower() in MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP:
            return MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP[kv_algo.lower()]
        _warn_unknown_kv_algo(kv_algo)
        return "auto"
    return None


def _warn_unknown_kv_algo(kv_algo: Any) -> None:
    logger.warning(
        "WARNING: Unknown kv_cache_quant_algo '%s' in model "
        "config. Supported values: %s. Falling back to 'auto'.",
        f"{kv_algo}",
        list(MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP.keys()),
    )


def _usage_context(usage_context: UsageContext | str | None) -> UsageContext | None:
    """A member of UsageContext (a str enum) reaches this worker over the wire as its string, so a string
    names the member here (vLLM, given a plain string, fails formatting its debug line)."""
    if usage_context is None or isinstance(usage_context, UsageContext):
        return usage_context
    return UsageContext(usage_context)


def _log_default(name: str, value: int, usage_context: UsageContext | None) -> None:
    context = usage_context.value if usage_context else None
    logger.debug("Defaulting %s to %d for %s usage context.", name, value, context)


def _is_interleaved(text_config: dict[str, Any]) -> bool:
    """Detect if the model with this config is used with interleaved attention."""
    if layer_types := text_config.get("layer_types"):
        return len(set(layer_types)) > 1
    return False


def _is_gguf(model: str) -> bool:
    """A GGUF checkpoint named by its `.gguf` file (vLLM also takes a hub `repo:quant` name, refused here as
    every hub name is). vLLM reads such a file's header, which this worker does not: ModelConfig then
    refuses it as it refuses any path that is no model folder."""
    return str(model).endswith(".gguf")


def _is_cloud_storage(model: str) -> bool:
    return model.startswith(("s3://", "gs://"))


def _is_online_quantization(quantization: Any) -> bool:
    return quantization in ["inc"]


def _ray_dp_pack_strategy() -> str:
    """vLLM's `envs.VLLM_RAY_DP_PACK_STRATEGY`."""
    return os.getenv("VLLM_RAY_DP_PACK_STRATEGY", "strict")


def _raise_unsupported_error(feature_name: str) -> None:
    msg = f"{feature_name} is not supported. We recommend to remove {feature_name} from your config."
    raise NotImplementedError(msg)
