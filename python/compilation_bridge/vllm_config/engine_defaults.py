"""The parts of vLLM's other engine configs that VllmConfig hashes, at their defaults.

`VllmConfig.compute_hash()` folds in the hash of every sub-config. The worker does not expose profiler or
structured-output settings, whose hash has no factors: this is that hash.
"""

from typing import Any

from compilation_bridge.vllm_config.hashing import safe_hash


def empty_factors_hash() -> str:
    """The hash vLLM's load/device/observability/profiler/structured-output configs all return."""
    factors: list[Any] = []
    return safe_hash(str(factors).encode()).hexdigest()
