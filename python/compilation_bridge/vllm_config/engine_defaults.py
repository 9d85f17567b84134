"""The parts of vLLM's other engine configs that VllmConfig hashes, at their defaults.

`VllmConfig.compute_hash()` folds in the hash of every sub-config. The worker does not expose attention,
profiler or structured-output settings, so they are held here at vLLM 0.14.0's defaults, field for
hashed field.
"""

from dataclasses import dataclass
from typing import Any

from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors, safe_hash


def empty_factors_hash() -> str:
    """The hash vLLM's load/device/observability/profiler/structured-output configs all return."""
    factors: list[Any] = []
    return safe_hash(str(factors).encode()).hexdigest()


@dataclass
class AttentionConfig:
    """vLLM's AttentionConfig (every field is hashed)."""

    backend: str | None = None
    flash_attn_version: int | None = None
    use_prefill_decode_attention: bool = False
    flash_attn_max_num_splits_for_cuda_graph: int = 32
    use_cudnn_prefill: bool = False
    use_trtllm_ragged_deepseek_prefill: bool = False
    use_trtllm_attention: bool | None = None
    disable_flashinfer_prefill: bool = False
    disable_flashinfer_q_quantization: bool = False

    def compute_hash(self) -> str:
        return hash_factors(get_hash_factors(self, set()))
