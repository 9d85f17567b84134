"""vLLM 0.14.0's compilation enums, with the names vLLM hashes them under."""

from __future__ import annotations

import enum

from compilation_bridge.vllm_config.hashing import vllm_name


@vllm_name("vllm.config.compilation.CompilationMode")
class CompilationMode(enum.IntEnum):
    """How torch.compile is applied; an IntEnum, so `CompilationMode.VLLM_COMPILE == 3`."""

    NONE = 0
    STOCK_TORCH_COMPILE = 1
    DYNAMO_TRACE_ONCE = 2
    VLLM_COMPILE = 3


@vllm_name("vllm.config.compilation.CUDAGraphMode")
class CUDAGraphMode(enum.Enum):
    """CUDA graph modes; a tuple value is the pair (decode routine, mixed-batch routine)."""

    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = (FULL, NONE)
    FULL_AND_PIECEWISE = (FULL, PIECEWISE)

    def decode_mode(self) -> CUDAGraphMode:
        return CUDAGraphMode(self.value[0]) if self.separate_routine() else self

    def mixed_mode(self) -> CUDAGraphMode:
        return CUDAGraphMode(self.value[1]) if self.separate_routine() else self

    def has_mode(self, mode: CUDAGraphMode) -> bool:
        assert not mode.separate_routine()
        if self.separate_routine():
            return mode.value in self.value
        return self == mode

    def requires_piecewise_compilation(self) -> bool:
        return self.has_mode(CUDAGraphMode.PIECEWISE)

    def max_cudagraph_mode(self) -> CUDAGraphMode:
        return CUDAGraphMode(max(self.value)) if self.separate_routine() else self

    def has_full_cudagraphs(self) -> bool:
        return self.max_cudagraph_mode() == CUDAGraphMode.FULL

    def has_piecewise_cudagraphs(self) -> bool:
        return self.requires_piecewise_compilation()

    def separate_routine(self) -> bool:
        return isinstance(self.value, tuple)

    def valid_runtime_modes(self) -> bool:
        return self in [CUDAGraphMode.NONE, CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL]

    def __str__(self) -> str:
        return self.name


@vllm_name("vllm.config.compilation.DynamicShapesType")
class DynamicShapesType(str, enum.Enum):  # noqa: UP042 - vLLM's str mixin, not StrEnum
    BACKED = "backed"
    UNBACKED = "unbacked"
    BACKED_SIZE_OBLIVIOUS = "backed_size_oblivious"


@vllm_name("vllm.config.vllm.OptimizationLevel")
class OptimizationLevel(enum.IntEnum):
    O0 = 0
    O1 = 1
    O2 = 2
    O3 = 3
