"""`PassConfig`: which custom Inductor passes vLLM 0.14.0 would run (pydantic dataclass, extra="forbid")."""

from collections.abc import Callable
from typing import Any

from pydantic import ConfigDict, Field, field_validator
from pydantic.dataclasses import dataclass

from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors, vllm_name
from compilation_bridge.vllm_config.logs import warning_once
from compilation_bridge.vllm_config.platforms import current_platform

# vLLM's FI_ALLREDUCE_FUSION_MAX_SIZE_MB: device capability -> world size -> MB.
FI_ALLREDUCE_FUSION_MAX_SIZE_MB: dict[int, dict[int, float]] = {
    90: {2: 64, 4: 2, 8: 0.5},
    100: {2: 64, 4: 32, 8: 1},
}
FI_SUPPORTED_WORLD_SIZES = (2, 4, 8)


@vllm_name("vllm.config.compilation.PassConfig")
@dataclass(config=ConfigDict(extra="forbid"))
class PassConfig:
    """Configuration for custom Inductor passes.

    This is separate from general `CompilationConfig` so that inductor passes
    don't all have access to full configuration - that would create a cycle as
    the `PassManager` is set as a property of config.

    You must pass PassConfig to VLLMConfig constructor via the CompilationConfig
    constructor. VLLMConfig's post_init does further initialization.
    If used outside of the VLLMConfig, some fields may be left in an
    improper state.
    """

    # None means "not decided": VllmConfig's optimization level fills these in.
    fuse_norm_quant: bool = Field(default=None)
    """Fuse the custom RMSNorm + quant ops."""
    fuse_act_quant: bool = Field(default=None)
    """Fuse the custom SiluMul + quant ops."""
    fuse_attn_quant: bool = Field(default=None)
    """Fuse the custom attention + quant ops."""
    eliminate_noops: bool = Field(default=None)
    """Eliminate no-op ops."""
    enable_sp: bool = Field(default=None)
    """Enable sequence parallelism."""
    fuse_gemm_comms: bool = Field(default=None)
    """Enable async TP."""
    fuse_allreduce_rms: bool = Field(default=None)
    """Enable flashinfer allreduce fusion."""
    fi_allreduce_fusion_max_size_mb: float | None = None
    """The threshold of the communicated tensor sizes under which
    vllm should use flashinfer fused allreduce. Specified as a
    float in MB.
    Unspecified will fallback to default values
    which are compute capability and world size dependent.
        FI_ALLREDUCE_FUSION_MAX_SIZE_MB = {
            90: {
                2: 64,  # 64MB
                4: 2,  # 2MB
                8: 1,  # 1MB
            },
            100: {
                2: 64,  # 64MB
                4: 32,  # 32MB
                8: 1,  # 1MB
            },
        }, where key is the device capability"""
    enable_qk_norm_rope_fusion: bool = False
    """Enable fused Q/K RMSNorm + RoPE pass."""

    def flashinfer_max_size(self, world_size: int) -> int | None:
        """Bytes under which the flashinfer allreduce fusion applies, or None."""
        if world_size not in FI_SUPPORTED_WORLD_SIZES:
            return None
        max_size_mb = self.fi_allreduce_fusion_max_size_mb
        if max_size_mb is None:
            max_size_mb = self.default_fi_allreduce_fusion_max_size_mb().get(world_size)
        return int(max_size_mb * 1024 * 1024) if max_size_mb is not None else None

    @staticmethod
    def default_fi_allreduce_fusion_max_size_mb() -> dict[int, float]:
        if not current_platform.is_cuda():
            return {}
        major, minor = current_platform.get_device_capability()
        return FI_ALLREDUCE_FUSION_MAX_SIZE_MB.get(major * 10 + minor, {})

    def compute_hash(self) -> str:
        return hash_factors(get_hash_factors(self, set()))

    @field_validator(
        "fuse_norm_quant",
        "fuse_act_quant",
        "fuse_attn_quant",
        "eliminate_noops",
        "enable_sp",
        "fuse_gemm_comms",
        "fuse_allreduce_rms",
        mode="wrap",
    )
    @classmethod
    def _skip_none_validation(cls, value: Any, handler: Callable[[Any], Any]) -> Any:
        if value is None:
            return value
        return handler(value)

    def __post_init__(self) -> None:
        if not self.eliminate_noops:
            if self.fuse_norm_quant or self.fuse_act_quant:
                warning_once(
                    "Fusion enabled but reshape elimination disabled. "
                    "RMSNorm/SiluMul + quant (fp8) fusion might not work"
                )
            if self.fuse_attn_quant:
                warning_once(
                    "Fusion enabled but reshape elimination disabled. "
                    "Attention + quant (fp8) fusion might not work"
                )
            if self.fuse_allreduce_rms:
                warning_once(
                    "Fusion enabled but reshape elimination disabled. "
                    "Allreduce + rms norm + quant (fp8) fusion might not work"
                )
        if self.enable_qk_norm_rope_fusion and not current_platform.is_cuda_alike():
            warning_once(
                "QK Norm + RoPE fusion enabled but the current platform is not CUDA or ROCm. "
                "The fusion will be disabled."
            )
            self.enable_qk_norm_rope_fusion = False
