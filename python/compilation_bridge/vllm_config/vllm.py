"""`VllmConfig`: vLLM 0.14.0's engine config.

`__post_init__` follows vLLM's order step by step (the model-specific updates, the sub-configs' checks,
mode and cudagraph defaults, optimization-level defaults, cudagraph sizes, compile ranges, the platform's
update, splitting ops). Like vLLM it keeps and mutates the sub-configs it is given. Where vLLM answers
with objects of its engine (the quantization kernel's config, a function tracer) the worker refuses, saying
why (docs/configuration.md).
"""

import copy
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any, get_args

from pydantic import ConfigDict, Field, model_validator
from pydantic.dataclasses import dataclass

from compilation_bridge.vllm_config.attention import AttentionConfig
from compilation_bridge.vllm_config.cache import CacheConfig
from compilation_bridge.vllm_config.compilation import CAPPED_SIZE_FIELDS, CompilationConfig
from compilation_bridge.vllm_config.device import DeviceConfig
from compilation_bridge.vllm_config.ec_transfer import ECTransferConfig
from compilation_bridge.vllm_config.enums import CompilationMode, CUDAGraphMode, OptimizationLevel
from compilation_bridge.vllm_config.hashing import safe_hash, vllm_name
from compilation_bridge.vllm_config.kv_events import KVEventsConfig
from compilation_bridge.vllm_config.kv_transfer import KVTransferConfig
from compilation_bridge.vllm_config.limits import check_size, check_sizes
from compilation_bridge.vllm_config.load import LoadConfig
from compilation_bridge.vllm_config.logs import info_once, logger, warning_once
from compilation_bridge.vllm_config.lora import LoRAConfig
from compilation_bridge.vllm_config.model import ModelConfig
from compilation_bridge.vllm_config.model_updates import (
    VLLM_CONFIG_UPDATES,
    hybrid_attention_mamba,
    sequence_classification,
)
from compilation_bridge.vllm_config.observability import ObservabilityConfig
from compilation_bridge.vllm_config.optimization_levels import OPTIMIZATION_LEVEL_TO_CONFIG
from compilation_bridge.vllm_config.parallel import ParallelConfig
from compilation_bridge.vllm_config.platforms import current_platform
from compilation_bridge.vllm_config.profiler import ProfilerConfig
from compilation_bridge.vllm_config.scheduler import SchedulerConfig
from compilation_bridge.vllm_config.speculative import EagleModelTypes, SpeculativeConfig
from compilation_bridge.vllm_config.structured_outputs import StructuredOutputsConfig
from compilation_bridge.vllm_config.versions import VLLM_VERSION

_ASYNC_SCHEDULING_EXECUTORS = ("mp", "uni", "external_launcher")


# A default may only be written into a field of a config dataclass. vLLM reads and writes any attribute a
# key names; a caller's key naming something else (a method, a property, a private attribute) is refused,
# so that defaults never reach past a config's fields.
def _check_default_key(config_obj: Any, key: Any) -> None:
    if not isinstance(key, str):
        return  # getattr's own TypeError follows, as in vLLM
    if not hasattr(config_obj, key):
        return  # getattr's own AttributeError follows, as in vLLM
    is_field = (
        not isinstance(config_obj, type)
        and dataclasses.is_dataclass(config_obj)
        and any(f.name == key for f in dataclasses.fields(config_obj))
    )
    if not is_field or key.startswith("_"):
        raise ValueError(
            f"{key!r} is not a field of {type(config_obj).__name__}: optimization-level defaults are "
            "written into config fields only"
        )


def _check_default_size(key: str, value: Any) -> None:
    """A default bypasses pydantic's validators, as a caller's set_attr does: the sizes that make the worker
    allocate in proportion to them get the cap that construction applies (limits.py)."""
    if key not in CAPPED_SIZE_FIELDS:
        return
    if isinstance(value, list | tuple | set | frozenset):
        check_sizes(key, value)
    else:
        check_size(key, value)


_KV_TRANSFER_DISABLES_HYBRID = (
    "Turning off hybrid kv cache manager because "
    "`--kv-transfer-config` is set. This will reduce the "
    "performance of vLLM on LLMs with sliding window attention "
    "or Mamba attention. If you are a developer of kv connector"
    ", please consider supporting hybrid kv cache manager for "
    "your connector by making sure your connector is a subclass"
    " of `SupportsHMA` defined in kv_connector/v1/base.py and"
    " use --no-disable-hybrid-kv-cache-manager to start vLLM."
)


@vllm_name("vllm.config.vllm.VllmConfig")
@dataclass(config=ConfigDict(arbitrary_types_allowed=True))
class VllmConfig:
    """Dataclass which contains all vllm-related configuration. This
    simplifies passing around the distinct configurations in the codebase.
    """

    model_config: ModelConfig = Field(default=None)
    """Model configuration."""
    cache_config: CacheConfig = Field(default_factory=CacheConfig)
    """Cache configuration."""
    parallel_config: ParallelConfig = Field(default_factory=ParallelConfig)
    """Parallel configuration."""
    scheduler_config: SchedulerConfig = Field(default_factory=SchedulerConfig.default_factory)
    """Scheduler configuration."""
    device_config: DeviceConfig = Field(default_factory=DeviceConfig)
    """Device configuration."""
    load_config: LoadConfig = Field(default_factory=LoadConfig)
    """Load configuration."""
    attention_config: AttentionConfig = Field(default_factory=AttentionConfig)
    """Attention configuration."""
    lora_config: LoRAConfig | None = None
    """LoRA configuration."""
    speculative_config: SpeculativeConfig | None = None
    """Speculative decoding configuration."""
    structured_outputs_config: StructuredOutputsConfig = Field(default_factory=StructuredOutputsConfig)
    """Structured outputs configuration."""
    observability_config: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    """Observability configuration."""
    compilation_config: CompilationConfig = Field(default_factory=CompilationConfig)
    """`torch.compile` and cudagraph capture configuration for the model.

    As a shorthand, one can append compilation arguments via
    -cc.parameter=argument such as `-cc.mode=3` (same as `-cc='{"mode":3}'`).

    You can specify the full compilation config like so:
    `{"mode": 3, "cudagraph_capture_sizes": [1, 2, 4, 8]}`
    """
    profiler_config: ProfilerConfig = Field(default_factory=ProfilerConfig)
    """Profiling configuration."""
    kv_transfer_config: KVTransferConfig | None = None
    """The configurations for distributed KV cache transfer."""
    kv_events_config: KVEventsConfig | None = None
    """The configurations for event publishing."""
    ec_transfer_config: ECTransferConfig | None = None
    """The configurations for distributed EC cache transfer."""
    # some opaque config, only used to provide additional information
    # for the hash computation, mainly used for testing, debugging or out of
    # tree config registration.
    additional_config: dict[str, Any] = Field(default_factory=dict)
    """Additional config for specified platform. Different platforms may
    support different configs. Make sure the configs are valid for the platform
    you are using. Contents must be hashable."""
    instance_id: str = ""
    """The ID of the vLLM instance."""
    optimization_level: OptimizationLevel = OptimizationLevel.O2
    """The optimization level. These levels trade startup time cost for
    performance, with -O0 having the best startup time and -O3 having the best
    performance. -02 is used by defult. See  OptimizationLevel for full
    description."""

    def compute_hash(self) -> str:
        """vLLM's engine hash: md5 of every sub-config's hash, first 10 hex digits."""
        vllm_factors: list[Any] = [
            VLLM_VERSION,
            self.model_config.compute_hash() if self.model_config else "None",
            self.cache_config.compute_hash(),
            self.parallel_config.compute_hash(),
            self.scheduler_config.compute_hash(),
            self.device_config.compute_hash(),
            self.load_config.compute_hash(),
            self.attention_config.compute_hash(),
            self.lora_config.compute_hash() if self.lora_config else "None",
            self.speculative_config.compute_hash() if self.speculative_config else "None",
        ]
        # Unlike its neighbours, vLLM appends no "None" for an unset structured-outputs config.
        if self.structured_outputs_config:
            vllm_factors.append(self.structured_outputs_config.compute_hash())
        vllm_factors += [
            self.profiler_config.compute_hash() if self.profiler_config else "None",
            self.observability_config.compute_hash(),
            self.compilation_config.compute_hash(),
            self.kv_transfer_config.compute_hash() if self.kv_transfer_config else "None",
            self.ec_transfer_config.compute_hash() if self.ec_transfer_config else "None",
            self._additional_config_hash(),
        ]
        return safe_hash(str([vllm_factors]).encode()).hexdigest()[:10]

    def _additional_config_hash(self) -> str:
        # vLLM also takes an object with its own compute_hash here; over the wire only a dict can arrive.
        if not self.additional_config:
            return "None"
        return safe_hash(json.dumps(self.additional_config, sort_keys=True).encode()).hexdigest()

    def pad_for_cudagraph(self, batch_size: int) -> int:
        # An IndexError above the largest capture size, by design (as in vLLM).
        return self.compilation_config.bs_to_padded_graph_size[batch_size]

    @property
    def needs_dp_coordinator(self) -> bool:
        """
        Determine if the DPCoordinator process is needed.

        The DPCoordinator is needed in two cases:
        1. For MoE models with DP > 1: to handle wave coordination
           (even in external LB mode, since wave coordination runs in the coordinator)
        2. For non-MoE models in internal/hybrid LB mode: to collect and publish
           queue stats for load balancing across DP ranks

        Returns:
            True if DPCoordinator process is needed, False otherwise.
        """
        return self.parallel_config.data_parallel_size > 1 and (
            self.model_config is None
            or self.model_config.is_moe
            or not self.parallel_config.data_parallel_external_lb
        )

    def enable_trace_function_call_for_thread(self) -> None:
        """
        Set up function tracing for the current thread,
        if enabled via the `VLLM_TRACE_FUNCTION` environment variable.
        """
        # Read as vLLM reads it (a value that is no integer raises int()'s ValueError). Set, vLLM writes a
        # trace file under the temporary folder and installs a tracer on the calling thread: in a worker
        # that serves many callers that would trace (and write out) every caller's work, so it is refused
        # (a PermissionError, as the worker's other refusals, which Elixir maps to its permission error).
        if int(os.getenv("VLLM_TRACE_FUNCTION", "0")):
            raise PermissionError(
                "enable_trace_function_call_for_thread: VLLM_TRACE_FUNCTION is set in the worker's "
                "environment, and vLLM would then write a trace file and install a function tracer on "
                "the calling thread; this worker serves many callers and does neither (unset "
                "VLLM_TRACE_FUNCTION, or trace in vLLM's own engine process)"
            )

    @property
    def quant_config(self) -> None:
        """Quantization configuration: what vLLM's `__post_init__` sets from
        `_get_quantization_config(model_config, load_config)`, None without a model or for an unquantized
        one (a quantized one is refused, see `_get_quantization_config`)."""
        if self.model_config is None:
            return None
        return VllmConfig._get_quantization_config(self.model_config, self.load_config)

    @staticmethod
    def _get_quantization_config(model_config: ModelConfig, load_config: LoadConfig) -> None:
        """Get the quantization config."""
        # An object without `quantization` fails here as in vLLM (AttributeError).
        if model_config.quantization is not None:
            raise ValueError(
                f"quantization method {model_config.quantization!r}: vLLM answers an instance of its "
                "quantization kernel's config class (read from the checkpoint by its model loader and "
                "checked against the GPU's capability), which belongs to vLLM's model executor; this "
                "worker plans without kernels. The method and its checkpoint settings are "
                "model_config.quantization and model_config.model_arch_config.quantization_config"
            )
        return None

    @staticmethod
    def get_quantization_config(model_config: ModelConfig, load_config: LoadConfig) -> None:
        # vLLM deep-copies the model config because the private step may modify it.
        return VllmConfig._get_quantization_config(copy.deepcopy(model_config), load_config)

    def try_verify_and_update_config(self) -> None:
        """vLLM's model-specific updates of the whole config (model_updates.py), once per model config."""
        if self.model_config is None:
            return
        # Avoid running try_verify_and_update_config multiple times
        if getattr(self.model_config, "config_updated", False):
            return
        self.model_config.config_updated = True
        architecture = self.model_config.architecture
        if architecture is None:
            return
        update = VLLM_CONFIG_UPDATES.get(architecture)
        if update is not None:
            update(self)
        if self.model_config.is_hybrid:
            hybrid_attention_mamba(self)
        if self.model_config.convert_type == "classify":
            # Maybe convert ForCausalLM into ForSequenceClassification model.
            sequence_classification(self)
        # vLLM's Run:ai object-storage weights (load_format switched to runai_streamer) never arise: this
        # worker's models are local folders.

    def with_hf_config(
        self, hf_config: dict[str, Any], architectures: list[str] | None = None
    ) -> "VllmConfig":
        """A copy of this config whose model config holds `hf_config` (here a dict, as `ModelConfig.hf_config`
        is), optionally with its `architectures` replaced; the copy's post-init runs again, as in vLLM."""
        if not isinstance(hf_config, dict):
            raise TypeError(
                "with_hf_config: hf_config must be a model config dict (what ModelConfig.hf_config holds "
                f"here, where vLLM holds a transformers config), not {type(hf_config).__name__}"
            )
        if architectures is not None:
            hf_config = copy.deepcopy(hf_config)
            hf_config["architectures"] = architectures
        model_config = copy.deepcopy(self.model_config)
        model_config.hf_config = hf_config  # AttributeError without a model, as in vLLM
        model_config.model_arch_config = model_config.get_model_arch_config()
        return dataclasses.replace(self, model_config=model_config)

    def compile_debug_dump_path(self) -> Path | None:
        if self.compilation_config.debug_dump_path is None:
            return None
        rank, dp_rank = self.parallel_config.rank, self.parallel_config.data_parallel_index
        return self.compilation_config.debug_dump_path / f"rank_{rank}_dp_{dp_rank}"

    def __post_init__(self) -> None:
        cc = self.compilation_config
        self.instance_id = f"{time.time_ns()}"
        self.try_verify_and_update_config()
        if self.model_config is not None:
            self.model_config.verify_with_parallel_config(self.parallel_config)
            self.parallel_config.is_moe_model = self.model_config.is_moe
        self.cache_config.verify_with_parallel_config(self.parallel_config)
        if self.lora_config is not None:
            self.lora_config.verify_with_model_config(self.model_config)
        self._resolve_async_scheduling()

        if (
            self.optimization_level > OptimizationLevel.O0
            and self.model_config is not None
            and self.model_config.enforce_eager
        ):
            logger.warning("Enforce eager set, overriding optimization level to -O0")
            self.optimization_level = OptimizationLevel.O0
        if cc.backend == "eager" or (cc.mode is not None and cc.mode != CompilationMode.VLLM_COMPILE):
            logger.warning(
                "Inductor compilation was disabled by user settings, optimizations settings "
                "that are only active during inductor compilation will be ignored."
            )

        if cc.mode is None:
            cc.mode = (
                CompilationMode.VLLM_COMPILE
                if self.optimization_level > OptimizationLevel.O0
                else CompilationMode.NONE
            )
        if all(s not in cc.custom_ops for s in ("all", "none")):
            inductor_compiles = cc.backend == "inductor" and cc.mode != CompilationMode.NONE
            cc.custom_ops.append("none" if inductor_compiles else "all")

        self._apply_optimization_level_defaults(OPTIMIZATION_LEVEL_TO_CONFIG[self.optimization_level])

        if cc.cudagraph_mode.requires_piecewise_compilation() and cc.mode != CompilationMode.VLLM_COMPILE:
            logger.info(
                "Cudagraph mode %s is not compatible with compilation mode %s.Overriding to NONE.",
                cc.cudagraph_mode,
                cc.mode,
            )
            cc.cudagraph_mode = CUDAGraphMode.NONE

        if cc.pass_config.fuse_gemm_comms:
            cc.pass_config.enable_sp = True
        if cc.pass_config.enable_sp:
            if "-rms_norm" in cc.custom_ops:
                logger.warning("RMS norm force disabled, sequence parallelism might break")
            else:
                cc.custom_ops.append("+rms_norm")

        self._plan_cudagraphs()
        if self.cache_config.kv_sharing_fast_prefill:
            if self.speculative_config is not None and self.speculative_config.use_eagle():
                raise ValueError(
                    "Fast prefill optimization for KV sharing is not "
                    "compatible with EAGLE as EAGLE requires correct logits "
                    "for all tokens while fast prefill gives incorrect logits "
                    "for prompt tokens."
                )
            warning_once(
                "--kv-sharing-fast-prefill requires changes on model side for "
                "correctness and to realize prefill savings."
            )
        self._set_compile_ranges()
        self._warn_about_kv_events()
        current_platform.check_and_update_config(self)
        self._check_context_parallel_block_size()

        moe_or_no_model = self.model_config is None or self.model_config.is_moe
        effective_dp_size = self.parallel_config.data_parallel_size if moe_or_no_model else 1
        cc.set_splitting_ops_for_v1(
            all2all_backend=self.parallel_config.all2all_backend, data_parallel_size=effective_dp_size
        )
        self._add_rms_norm_for_sequence_parallelism()
        self._check_cuda_cudagraph_mode()
        self._check_microbatching()
        self._resolve_hybrid_kv_cache_manager()
        self._resolve_debug_dump_path()
        self._post_init_kv_transfer_config()

    @model_validator(mode="after")
    def validate_mamba_block_size(self) -> "VllmConfig":
        if self.model_config is None:
            return self
        mamba_block_size_is_set = (
            self.cache_config.mamba_block_size is not None
            and self.cache_config.mamba_block_size != self.model_config.max_model_len
        )
        if mamba_block_size_is_set and not self.cache_config.enable_prefix_caching:
            raise ValueError("--mamba-block-size can only be set with --enable-prefix-caching")
        return self

    def _post_init_kv_transfer_config(self) -> None:
        """Update KVTransferConfig based on top-level configs in VllmConfig.

        Right now, this function reads the offloading settings from
        CacheConfig and configures the KVTransferConfig accordingly.
        """
        kv_offloading_size = self.cache_config.kv_offloading_size
        if kv_offloading_size is None:  # offloading is on only with a size
            return
        kv_offloading_backend = self.cache_config.kv_offloading_backend
        if self.kv_transfer_config is None:
            self.kv_transfer_config = KVTransferConfig()
        transfer = self.kv_transfer_config
        num_kv_ranks = self.parallel_config.tensor_parallel_size * self.parallel_config.pipeline_parallel_size
        # Assigned without validation, as in vLLM: pydantic dataclasses validate only at construction.
        if kv_offloading_backend == "native":
            transfer.kv_connector = "OffloadingConnector"
            transfer.kv_connector_extra_config.update({"cpu_bytes_to_use": kv_offloading_size * (1 << 30)})
        elif kv_offloading_backend == "lmcache":
            transfer.kv_connector = "LMCacheConnectorV1"
            kv_gb_per_rank = kv_offloading_size / num_kv_ranks
            transfer.kv_connector_extra_config = {
                "lmcache.local_cpu": True,
                "lmcache.max_local_cpu_size": kv_gb_per_rank,
            }
        transfer.kv_role = "kv_both"  # whatever the backend

    def _resolve_async_scheduling(self) -> None:
        scheduler, parallel = self.scheduler_config, self.parallel_config
        executor_backend = parallel.distributed_executor_backend
        supports_async = executor_backend in _ASYNC_SCHEDULING_EXECUTORS
        if scheduler.async_scheduling:
            if parallel.pipeline_parallel_size > 1:
                raise ValueError("Async scheduling is not yet compatible with pipeline_parallel_size > 1.")
            self._check_async_speculation()
            if not supports_async:
                raise ValueError(
                    "Currently, async scheduling only supports `mp`, `uni`, or "
                    "`external_launcher` distributed executor backend, but you chose "
                    f"`{executor_backend}`."
                )
        elif scheduler.async_scheduling is None:
            scheduler.async_scheduling = (
                parallel.pipeline_parallel_size == 1 and self._speculation_allows_async() and supports_async
            )
        if parallel.disable_nccl_for_dp_synchronization is None:
            parallel.disable_nccl_for_dp_synchronization = bool(scheduler.async_scheduling)

    def _check_async_speculation(self) -> None:
        """Asynchronous scheduling asked for: only EAGLE/MTP speculation with padded drafter batches."""
        spec = self.speculative_config
        if spec is None:
            return
        if spec.method not in get_args(EagleModelTypes):
            raise ValueError(
                "Currently, async scheduling is only supported with EAGLE/MTP kind of speculative decoding."
            )
        if spec.disable_padded_drafter_batch:
            raise ValueError("Async scheduling is not compatible with disable_padded_drafter_batch=True.")

    def _speculation_allows_async(self) -> bool:
        spec = self.speculative_config
        if spec is not None and spec.method not in get_args(EagleModelTypes):
            warning_once(
                "Async scheduling not supported with %s-based speculative decoding and will be disabled.",
                spec.method,
            )
            return False
        if spec is not None and spec.disable_padded_drafter_batch:
            warning_once(
                "Async scheduling is not compatible with "
                "disable_padded_drafter_batch=True and will be disabled."
            )
            return False
        return True

    def _set_config_default(self, config_obj: Any, key: str, value: Any) -> None:
        """Set config attribute to default if not already set by user.

        Args:
            config_obj: Configuration object to update.
            key: Attribute name.
            value: Default value (static or callable).
        """
        _check_default_key(config_obj, key)
        if getattr(config_obj, key) is None:
            # Some config values are known before initialization and are
            # hard coded.
            # Other values depend on the user given configuration, so they are
            # implemented with lambda functions and decided at run time.
            value = value(self) if callable(value) else value
            _check_default_size(key, value)
            setattr(config_obj, key, value)

    def _apply_optimization_level_defaults(self, defaults: dict[str, Any]) -> None:
        """Apply optimization level defaults using self as root.

        Recursively applies values from defaults into nested config objects.
        Only fields present in defaults are overwritten.

        If the user configuration does not specify a value for a default field
        and if the default field is still None after all user selections are
        applied, then default values will be applied to the field. User speciied
        fields will not be overridden by the default.

        Args:
            defaults: Dictionary of default values to apply.
        """

        def apply_recursive(config_obj: Any, config_defaults: dict[str, Any]) -> None:
            for key, value in config_defaults.items():
                if not hasattr(config_obj, key):
                    continue
                _check_default_key(config_obj, key)  # before reading: never walk past a field
                current = getattr(config_obj, key)
                if isinstance(value, dict) and dataclasses.is_dataclass(current):
                    apply_recursive(current, value)
                else:
                    self._set_config_default(config_obj, key, value)

        apply_recursive(self, defaults)

    def _plan_cudagraphs(self) -> None:
        """Step 10 of vLLM's post-init: only static-graph platforms (CUDA) keep cudagraphs."""
        cc = self.compilation_config
        if not current_platform.support_static_graph_mode():
            cc.cudagraph_mode = CUDAGraphMode.NONE
            return
        model_config = self.model_config
        if model_config is not None:
            if cc.cudagraph_mode.has_full_cudagraphs() and model_config.pooler_config is not None:
                warning_once(
                    "Pooling models do not support full cudagraphs. Overriding cudagraph_mode to PIECEWISE."
                )
                cc.cudagraph_mode = CUDAGraphMode.PIECEWISE
            elif model_config.is_encoder_decoder and cc.cudagraph_mode not in (
                CUDAGraphMode.NONE,
                CUDAGraphMode.FULL_DECODE_ONLY,
            ):
                info_once(
                    "Encoder-decoder models do not support %s. "
                    "Overriding cudagraph_mode to FULL_DECODE_ONLY.",
                    cc.cudagraph_mode.name,
                )
                cc.cudagraph_mode = CUDAGraphMode.FULL_DECODE_ONLY
        if model_config is not None and model_config.enforce_eager:
            logger.info("Cudagraph is disabled under eager mode")
            cc.cudagraph_mode = CUDAGraphMode.NONE
            cc.max_cudagraph_capture_size = 0
            cc.cudagraph_capture_sizes = []
        else:
            cc.cudagraph_num_of_warmups = 1
        self._set_cudagraph_sizes()

    def update_sizes_for_sequence_parallelism(self, possible_sizes: list[int]) -> list[int]:
        tp = self.parallel_config.tensor_parallel_size
        removed_sizes = [size for size in possible_sizes if size % tp != 0]
        if removed_sizes:
            logger.warning(
                "Batch sizes %s are removed because they are not multiple of tp_size %d "
                "when sequence parallelism is enabled",
                removed_sizes,
                tp,
            )
        return [size for size in possible_sizes if size % tp == 0]

    def _set_cudagraph_sizes(self) -> None:
        """
        vLLM defines the default candidate list of batch sizes for CUDA graph
        capture as:

        ```python
        max_graph_size = min(max_num_seqs * 2, 512)
        # 1, 2, 4, then multiples of 8 up to 256 and then multiples of 16
        # up to max_graph_size
        cudagraph_capture_sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(
            range(256, max_graph_size + 1, 16))

        In the end, `vllm_config.compilation_config.cudagraph_capture_sizes`
        will be the final sizes to capture cudagraph (in ascending order).

        These sizes are used to capture and reuse CUDA graphs for
        performance-critical paths (e.g., decoding). Capturing enables
        significantly faster kernel dispatch by avoiding Python overhead. The
        list is then filtered based on `max_num_batched_tokens` (e.g., 8192 on
        most GPUs), which controls the total allowed number of tokens in a
        batch. Since each sequence may have a variable number of tokens, the
        maximum usable batch size will depend on actual sequence lengths.

        Example:
            With `max_num_batched_tokens = 8192`, and typical sequences
            averaging ~32 tokens, most practical batch sizes fall below 256.
            However, the system will still allow capture sizes up to 512 if
            shape and memory permit.

        Note:
            If users explicitly specify cudagraph capture sizes in the
            compilation config, those will override this default logic.
            At runtime:

            - If batch size <= one of the `cudagraph_capture_sizes`, the closest
            padded CUDA graph will be used.
            - If batch size > largest `cudagraph_capture_sizes`, cudagraph will
            not be used.
        """
        cc = self.compilation_config
        if (
            self.model_config is not None
            and not self.model_config.enforce_eager
            and cc.cudagraph_mode != CUDAGraphMode.NONE
        ):
            sizes = self._capture_sizes()
            valid_max_size = sizes[-1] if sizes else 0
            if cc.max_cudagraph_capture_size is not None and cc.max_cudagraph_capture_size != valid_max_size:
                if cc.cudagraph_capture_sizes is not None:
                    raise ValueError(
                        "customized max_cudagraph_capture_size"
                        f"(={cc.max_cudagraph_capture_size}) "
                        "should be consistent with the max value of "
                        f"cudagraph_capture_sizes(={valid_max_size})"
                    )
                logger.warning("Truncating max_cudagraph_capture_size to %d", valid_max_size)
            cc.max_cudagraph_capture_size = valid_max_size
            if cc.cudagraph_capture_sizes is not None and len(sizes) < len(cc.cudagraph_capture_sizes):
                logger.warning(
                    "cudagraph_capture_sizes specified in compilation_config %s is overridden by config %s",
                    cc.cudagraph_capture_sizes,
                    sizes,
                )
            cc.cudagraph_capture_sizes = sizes
        else:
            cc.max_cudagraph_capture_size = 0
            cc.cudagraph_capture_sizes = []
        cc.post_init_cudagraph_sizes()

    def _capture_sizes(self) -> list[int]:
        """The capture sizes vLLM would plan: the user's (filtered by the token budget) or its defaults."""
        cc, scheduler = self.compilation_config, self.scheduler_config
        max_size = cc.max_cudagraph_capture_size
        if max_size is None:
            decode_query_len = 1
            if self.speculative_config and self.speculative_config.num_speculative_tokens:
                decode_query_len += self.speculative_config.num_speculative_tokens
            max_size = min(scheduler.max_num_seqs * decode_query_len * 2, 512)
        max_num_tokens = scheduler.max_num_batched_tokens
        max_size = min(max_num_tokens, max_size)
        assert max_size >= 1, (
            "Maximum cudagraph size should be greater than or equal to 1 when using cuda graph."
        )
        if cc.cudagraph_capture_sizes is not None:
            assert len(cc.cudagraph_capture_sizes) > 0, (
                "cudagraph_capture_sizes should contain at least one element when using cuda graph."
            )
            # Filtered by the token budget, not by max_size: a vLLM quirk kept on purpose.
            sizes = sorted(i for i in set(cc.cudagraph_capture_sizes) if i <= max_num_tokens)
        else:
            sizes = [i for i in [1, 2, 4] if i <= max_size]
            if max_size >= 8:
                sizes += list(range(8, min(max_size + 1, 256), 8))
            if max_size >= 256:
                sizes += list(range(256, max_size + 1, 16))
        if self.parallel_config.tensor_parallel_size > 1 and cc.pass_config.enable_sp:
            sizes = self.update_sizes_for_sequence_parallelism(sizes)
        return sizes

    def _set_compile_ranges(self) -> None:
        """
        Set the compile ranges for the compilation config.
        """
        cc = self.compilation_config
        split_points: list[int] = []
        max_num_batched_tokens = self.scheduler_config.max_num_batched_tokens
        if max_num_batched_tokens is not None:
            split_points.append(max_num_batched_tokens)
        if cc.pass_config.fuse_allreduce_rms:
            max_size = cc.pass_config.flashinfer_max_size(self.parallel_config.tensor_parallel_size)
            if max_size is not None:
                token_bytes = self.model_config.get_hidden_size() * self.model_config.dtype.itemsize
                max_token_num = max_size // token_bytes
                if max_num_batched_tokens is not None and max_token_num < max_num_batched_tokens:
                    split_points.append(max_token_num)
        if cc.compile_ranges_split_points is not None:
            for x in cc.compile_ranges_split_points:
                assert isinstance(x, int)
                assert x > 0, f"Invalid compile range split point: {x}"
                if max_num_batched_tokens is not None and x < max_num_batched_tokens and x > 1:
                    split_points.append(x)
        cc.compile_ranges_split_points = sorted(split_points)  # not deduplicated, as in vLLM

    def _check_context_parallel_block_size(self) -> None:
        parallel = self.parallel_config
        if parallel.decode_context_parallel_size <= 1:
            return
        if (
            parallel.dcp_kv_cache_interleave_size > 1
            and parallel.cp_kv_cache_interleave_size != parallel.dcp_kv_cache_interleave_size
        ):
            parallel.cp_kv_cache_interleave_size = parallel.dcp_kv_cache_interleave_size
        block_size = self.cache_config.block_size
        interleave = parallel.cp_kv_cache_interleave_size
        assert interleave <= block_size and block_size % interleave == 0, (
            f"Block_size({block_size}) should be greater than or equal to and divisible by "
            f"cp_kv_cache_interleave_size ({interleave})."
        )

    def _add_rms_norm_for_sequence_parallelism(self) -> None:
        cc = self.compilation_config
        if not cc.pass_config.enable_sp:
            return
        if cc.mode != CompilationMode.VLLM_COMPILE:
            logger.warning(
                "Sequence parallelism is enabled, but running in wrong vllm compile mode: %s.", cc.mode
            )
        is_fullgraph = cc.use_inductor_graph_partition or len(cc.splitting_ops) == 0
        if self.parallel_config.pipeline_parallel_size > 1 or not is_fullgraph:
            if "-rms_norm" not in cc.custom_ops:
                cc.custom_ops.append("+rms_norm")
            else:
                regime = "Dynamo partition" if not is_fullgraph else "pipeline parallelism"
                warning_once(
                    "Sequence parallelism not supported with native rms_norm when using %s, "
                    "this will likely lead to an error.",
                    regime,
                )

    def _check_cuda_cudagraph_mode(self) -> None:
        cc = self.compilation_config
        if not current_platform.is_cuda_alike():
            return
        if (
            cc.cudagraph_mode.has_full_cudagraphs()
            and self.model_config is not None
            and not self.model_config.disable_cascade_attn
            and not cc.cudagraph_mode.has_piecewise_cudagraphs()
        ):
            warning_once(
                "No piecewise cudagraph for executing cascade attention. Will fall back to eager "
                "execution if a batch runs into cascade attentions."
            )
        if cc.cudagraph_mode.requires_piecewise_compilation():
            assert cc.mode == CompilationMode.VLLM_COMPILE, (
                "Compilation mode should be CompilationMode.VLLM_COMPILE "
                "when cudagraph_mode piecewise cudagraphs is used, "
                f"cudagraph_mode={cc.cudagraph_mode}"
            )

    def _check_microbatching(self) -> None:
        if not self.parallel_config.use_ubatching:
            return
        a2a_backend = self.parallel_config.all2all_backend
        assert a2a_backend in ["deepep_low_latency", "deepep_high_throughput"], (
            "Microbatching currently only supports the deepep_low_latency and "
            f"deepep_high_throughput all2all backend. {a2a_backend} is not "
            "supported. To fix use --all2all-backend=deepep_low_latency or "
            "--all2all-backend=deepep_high_throughput and install the DeepEP"
            " kernels."
        )
        if not self.model_config.disable_cascade_attn:  # AttributeError without a model, as in vLLM
            self.model_config.disable_cascade_attn = True

    def _warn_about_kv_events(self) -> None:
        events = self.kv_events_config
        if (
            events is not None
            and events.enable_kv_cache_events
            and not self.cache_config.enable_prefix_caching
        ):
            logger.warning(
                "KV cache events are on, but prefix caching is not enabled. "
                "Use --enable-prefix-caching to enable."
            )
        if events is not None and events.publisher != "null" and not events.enable_kv_cache_events:
            logger.warning(
                "KV cache events are disabled, but the scheduler is configured to publish them. "
                "Modify KVEventsConfig.enable_kv_cache_events to True to enable."
            )

    def _resolve_hybrid_kv_cache_manager(self) -> None:
        scheduler = self.scheduler_config
        need_disable = not current_platform.support_hybrid_kv_cache()
        # The hybrid KV cache manager cannot publish KV events.
        need_disable |= self.kv_events_config is not None
        if self.model_config is not None and self.model_config.attention_chunk_size is not None:
            if self.speculative_config is not None and self.speculative_config.use_eagle():
                need_disable = True  # not yet supported with chunked local attention and EAGLE
            else:
                need_disable |= not int(os.getenv("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "1"))
        if scheduler.disable_hybrid_kv_cache_manager is None:
            # A KV connector turns it off only when the caller expressed no preference.
            if self.kv_transfer_config is not None:
                need_disable = True
                logger.warning(_KV_TRANSFER_DISABLES_HYBRID)
            scheduler.disable_hybrid_kv_cache_manager = need_disable
        elif scheduler.disable_hybrid_kv_cache_manager is False and need_disable:
            raise ValueError(
                "Hybrid KV cache manager was explicitly enabled but is not "
                "supported in this configuration. Consider omitting the "
                "--no-disable-hybrid-kv-cache-manager flag to let vLLM decide "
                "automatically."
            )

    def _resolve_debug_dump_path(self) -> None:
        cc = self.compilation_config
        if cc.debug_dump_path:
            cc.debug_dump_path = cc.debug_dump_path.absolute().expanduser()
        env_path_text = os.environ.get("VLLM_DEBUG_DUMP_PATH")
        if env_path_text is not None:
            env_path = Path(env_path_text).absolute().expanduser()
            if cc.debug_dump_path:
                logger.warning(
                    "Config-specified debug dump path is overridden by VLLM_DEBUG_DUMP_PATH to %s", env_path
                )
            cc.debug_dump_path = env_path
