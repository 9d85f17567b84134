"""`DynamicShapesConfig`: how the dynamic token dimension is marked for Dynamo (pydantic dataclass)."""

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass

from compilation_bridge.vllm_config.enums import DynamicShapesType
from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors, vllm_name


@vllm_name("vllm.config.compilation.DynamicShapesConfig")
@dataclass(config=ConfigDict(extra="forbid"))
class DynamicShapesConfig:
    type: DynamicShapesType = DynamicShapesType.BACKED
    evaluate_guards: bool = False
    assume_32_bit_indexing: bool = True  # vLLM 0.14.0's default (later releases use False)

    def compute_hash(self) -> str:
        return hash_factors(get_hash_factors(self, set()))
