"""vLLM 0.14.0's configuration and request parameters, re-implemented without vLLM or a GPU.

Names, fields, defaults, validators, error types and messages, `repr`, equality and `compute_hash()`
follow vLLM 0.14.0 (`vllm.config`, `vllm.sampling_params`, `vllm.pooling_params`). Importing this
package never imports torch.
"""

from compilation_bridge.vllm_config.attention import AttentionBackendEnum, AttentionConfig
from compilation_bridge.vllm_config.cache import CacheConfig
from compilation_bridge.vllm_config.compilation import CompilationConfig, set_vllm_backend_factory
from compilation_bridge.vllm_config.device import DeviceConfig
from compilation_bridge.vllm_config.dynamic_shapes import DynamicShapesConfig
from compilation_bridge.vllm_config.ec_transfer import ECTransferConfig
from compilation_bridge.vllm_config.engine_args import AsyncEngineArgs, EngineArgs
from compilation_bridge.vllm_config.enums import (
    CompilationMode,
    CUDAGraphMode,
    DynamicShapesType,
    OptimizationLevel,
)
from compilation_bridge.vllm_config.kv_events import KVEventsConfig
from compilation_bridge.vllm_config.kv_transfer import KVTransferConfig
from compilation_bridge.vllm_config.load import LoadConfig
from compilation_bridge.vllm_config.lora import LoRAConfig
from compilation_bridge.vllm_config.model import ModelConfig
from compilation_bridge.vllm_config.model_arch import ModelArchitectureConfig
from compilation_bridge.vllm_config.multimodal import (
    AudioDummyOptions,
    BaseDummyOptions,
    ImageDummyOptions,
    MultiModalConfig,
    VideoDummyOptions,
)
from compilation_bridge.vllm_config.observability import ObservabilityConfig
from compilation_bridge.vllm_config.parallel import EPLBConfig, ParallelConfig
from compilation_bridge.vllm_config.pass_config import PassConfig
from compilation_bridge.vllm_config.pooler import PoolerConfig
from compilation_bridge.vllm_config.pooling_params import PoolingParams
from compilation_bridge.vllm_config.profiler import ProfilerConfig
from compilation_bridge.vllm_config.protocols import SupportsMetricsInfo
from compilation_bridge.vllm_config.range import Range
from compilation_bridge.vllm_config.sampling_params import (
    BeamSearchParams,
    RequestOutputKind,
    SamplingParams,
    SamplingType,
    StructuredOutputsParams,
)
from compilation_bridge.vllm_config.scheduler import SchedulerConfig
from compilation_bridge.vllm_config.speculative import SpeculativeConfig
from compilation_bridge.vllm_config.speech_to_text import SpeechToTextConfig
from compilation_bridge.vllm_config.structured_outputs import StructuredOutputsConfig
from compilation_bridge.vllm_config.usage import UsageContext
from compilation_bridge.vllm_config.vllm import VllmConfig

__all__ = [
    "AsyncEngineArgs",
    "AttentionBackendEnum",
    "AttentionConfig",
    "AudioDummyOptions",
    "BaseDummyOptions",
    "BeamSearchParams",
    "CUDAGraphMode",
    "CacheConfig",
    "CompilationConfig",
    "CompilationMode",
    "DeviceConfig",
    "DynamicShapesConfig",
    "DynamicShapesType",
    "ECTransferConfig",
    "EPLBConfig",
    "EngineArgs",
    "ImageDummyOptions",
    "KVEventsConfig",
    "KVTransferConfig",
    "LoRAConfig",
    "LoadConfig",
    "ModelArchitectureConfig",
    "ModelConfig",
    "MultiModalConfig",
    "ObservabilityConfig",
    "OptimizationLevel",
    "ParallelConfig",
    "PassConfig",
    "PoolerConfig",
    "PoolingParams",
    "ProfilerConfig",
    "Range",
    "RequestOutputKind",
    "SamplingParams",
    "SamplingType",
    "SchedulerConfig",
    "SpeculativeConfig",
    "SpeechToTextConfig",
    "StructuredOutputsConfig",
    "StructuredOutputsParams",
    "SupportsMetricsInfo",
    "UsageContext",
    "VideoDummyOptions",
    "VllmConfig",
    "set_vllm_backend_factory",
]
