"""Which Inductor options a config may carry into a compile: tuning knobs, never paths, commands or code.

`inductor_compile_config` comes from callers and would otherwise reach `torch._inductor.config` as
it is, where some options name a C++ compiler to run (`cpp.cxx`), directories to write (`debug_dir`)
or callables to call. vLLM passes everything through; this worker passes the options below (plus the
operator's additions, `COMPILATION_BRIDGE_ALLOWED_INDUCTOR_OPTIONS`) with plain scalar values, and
custom graph passes only as the `InductorPass` objects that allowlisted `inductor_passes` resolve to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compilation_bridge.settings import ALLOWED_INDUCTOR_OPTIONS_ENV, get_settings
from compilation_bridge.vllm_config.inductor_pass import InductorPass

TUNING_OPTIONS = frozenset(
    {
        # set by vLLM itself (CompilationConfig and the CPU platform)
        "enable_auto_functionalized_v2",
        "combo_kernels",
        "benchmark_combo_kernel",
        "dce",
        "size_asserts",
        "nan_asserts",
        "epilogue_fusion",
        # fusion, autotuning and code-generation knobs
        "max_autotune",
        "max_autotune_gemm",
        "max_autotune_pointwise",
        "coordinate_descent_tuning",
        "force_disable_caches",
        "fx_graph_cache",
        "freezing",
        "shape_padding",
        "comprehensive_padding",
        "max_fusion_size",
        "aggressive_fusion",
        "loop_ordering_after_fusion",
        "score_fusion_memory_threshold",
        "pattern_matcher",
        "group_fusion",
        "split_reductions",
        "memory_planning",
        "reorder_for_locality",
        "unroll_reductions_threshold",
        "realize_opcount_threshold",
        "online_softmax",
        "conv_1x1_as_mm",
        "assume_32bit_indexing",
        "fallback_random",
        "implicit_fallbacks",
        "graph_partition",
        "cpp.simdlen",
        "cpp.threads",
        "cpp.min_chunk_size",
        "cpp.dynamic_threads",
        "triton.cudagraphs",
        "triton.unique_kernel_names",
        "triton.max_tiles",
    }
)
PASS_OPTIONS = frozenset(
    {
        "pre_grad_custom_pass",
        "joint_custom_pre_pass",
        "joint_custom_post_pass",
        "post_grad_custom_pre_pass",
        "post_grad_custom_post_pass",
    }
)
SCALARS = (bool, int, float, type(None))


def checked_inductor_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `options` if every entry may reach Inductor; a `ValueError` naming the first that may not."""
    allowed = TUNING_OPTIONS | get_settings().allowed_inductor_options
    for key, value in options.items():
        if key in PASS_OPTIONS and isinstance(value, InductorPass):
            continue
        if key in PASS_OPTIONS or isinstance(value, InductorPass):
            raise ValueError(
                f"inductor_compile_config[{key!r}]: custom passes come only from inductor_passes names on "
                "the operator's allowlist, under one of Inductor's pass options "
                f"({', '.join(sorted(PASS_OPTIONS))})"
            )
        if key not in allowed:
            raise ValueError(
                f"inductor_compile_config[{key!r}] is not an allowed Inductor option (options that name "
                f"files, commands or code are refused; the operator may allow more with "
                f"{ALLOWED_INDUCTOR_OPTIONS_ENV})"
            )
        if not isinstance(value, SCALARS):
            raise ValueError(
                f"inductor_compile_config[{key!r}] must be a boolean, a number or null, "
                f"got {type(value).__name__}"
            )
    return dict(options)
