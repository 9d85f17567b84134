"""`DynamicShapesConfig`: how the dynamic token dimension is marked for Dynamo (pydantic dataclass)."""

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass

from compilation_bridge.vllm_config.enums import DynamicShapesType
from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors, vllm_name


@vllm_name("vllm.config.compilation.DynamicShapesConfig")
@dataclass(config=ConfigDict(extra="forbid"))
class DynamicShapesConfig:
    """Configuration to control/debug torch compile dynamic shapes."""

    type: DynamicShapesType = DynamicShapesType.BACKED
    """Controls the type of dynamic shapes handling to use with torch.compile().

    - BACKED: Default PyTorch behavior with potential guards ignored.
    - UNBACKED: No guards guaranteed (most sound) but may throw
      data dependent errors.
    - BACKED_SIZE_OBLIVIOUS: Experimental safer alternative to
      backed/unbacked.
    """
    evaluate_guards: bool = False
    """
    A debug mode to detect and fail if Dynamo ever specializes a dynamic shape by
    guarding on it. When True, dynamic shape guards are not dropped from dynamo.
    And a failure will be triggered if a recompilation ever happens due to that.
    This mode requires VLLM_USE_BYTECODE_HOOK to be 0.
    Enabling this allow observing the dynamic shapes guards in the tlparse
    artifacts also.
    When type is backed, aot_compile must be disabled for this mode to work.
    until this change picked up https://github.com/pytorch/pytorch/pull/169239.
    """
    assume_32_bit_indexing: bool = True  # vLLM 0.14.0's default (later releases use False)
    """
    whether all tensor sizes can use 32 bit indexing.
    """

    def compute_hash(self) -> str:
        return hash_factors(get_hash_factors(self, set()))
