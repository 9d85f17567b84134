"""vLLM 0.14.0's per-optimization-level defaults (`OPTIMIZATION_LEVEL_TO_CONFIG`).

A default is applied only where the config still holds None; a callable default is evaluated on the
VllmConfig being built.
"""

from collections.abc import Callable
from typing import Any

from compilation_bridge.vllm_config.enums import CUDAGraphMode, OptimizationLevel

IS_QUANTIZED = False
IS_DENSE = False


def enable_norm_fusion(cfg: Any) -> bool:
    cc = cfg.compilation_config
    return cc.is_custom_op_enabled("rms_norm") or cc.is_custom_op_enabled("quant_fp8")


def enable_act_fusion(cfg: Any) -> bool:
    cc = cfg.compilation_config
    return cc.is_custom_op_enabled("silu_and_mul") or cc.is_custom_op_enabled("quant_fp8")


def _level(
    noops: bool,
    fusion: bool | Callable[[Any], bool],
    attn_quant: bool,
    sp: bool,
    cudagraph_mode: CUDAGraphMode,
) -> dict[str, Any]:
    return {
        "compilation_config": {
            "pass_config": {
                "eliminate_noops": noops,
                "fuse_norm_quant": enable_norm_fusion if fusion is True else fusion,
                "fuse_act_quant": enable_act_fusion if fusion is True else fusion,
                "fuse_allreduce_rms": False,
                "fuse_attn_quant": attn_quant,
                "enable_sp": sp,
                "fuse_gemm_comms": sp,
            },
            "cudagraph_mode": cudagraph_mode,
            "use_inductor_graph_partition": False,
        }
    }


OPTIMIZATION_LEVEL_TO_CONFIG: dict[OptimizationLevel, dict[str, Any]] = {
    OptimizationLevel.O0: _level(False, False, False, False, CUDAGraphMode.NONE),
    OptimizationLevel.O1: _level(True, True, False, False, CUDAGraphMode.PIECEWISE),
    OptimizationLevel.O2: _level(True, True, IS_QUANTIZED, IS_DENSE, CUDAGraphMode.FULL_AND_PIECEWISE),
    OptimizationLevel.O3: _level(True, True, IS_QUANTIZED, IS_DENSE, CUDAGraphMode.FULL_AND_PIECEWISE),
}
