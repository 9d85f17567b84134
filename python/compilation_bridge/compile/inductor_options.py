"""Which Inductor options a config may carry into a compile: tuning knobs, never paths, commands or code.

`inductor_compile_config` comes from callers and would otherwise reach `torch._inductor.config` as
it is, where some options name a C++ compiler to run (`cpp.cxx`), directories to write (`debug_dir`)
or callables to call. vLLM passes everything through; this worker passes the options below (plus the
operator's additions, `COMPILATION_BRIDGE_ALLOWED_INDUCTOR_OPTIONS`) with plain scalar values, and
custom graph passes only as the `InductorPass` objects that allowlisted `inductor_passes` resolve to.

Every built-in tuning knob also has a valid range (`OPTION_RANGES`): a boolean is a boolean, a thread
count lies between 1 and this machine's CPUs, a size is at least 1 and bounded, so that a caller cannot
make Inductor spawn thousands of threads or unroll without end. Options the operator adds have no known
range and keep the scalar check only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from compilation_bridge.settings import ALLOWED_INDUCTOR_OPTIONS_ENV, get_settings
from compilation_bridge.vllm_config.inductor_pass import InductorPass

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
SIZE_CAP = 1 << 24  # as the config's own size fields: larger values only make Inductor work harder


def cpu_count() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True)
class OptionRange:
    """Valid values of one option: a boolean, or an integer in [low, high] (plus `extra` values)."""

    boolean: bool = False
    low: int = 0
    high: int | Callable[[], int] = SIZE_CAP
    extra: tuple[int | None, ...] = ()  # values with a meaning of their own (None: Inductor's default)

    def upper(self) -> int:
        return self.high() if callable(self.high) else self.high

    def allows(self, value: Any) -> bool:
        if self.boolean:
            return type(value) is bool
        if value in self.extra and (value is None or type(value) is int):
            return True
        return type(value) is int and self.low <= value <= self.upper()

    def describe(self) -> str:
        if self.boolean:
            return "a boolean"
        extra = ["null" if v is None else str(v) for v in self.extra]
        if self.low == self.upper():
            return "one of " + ", ".join([str(self.low), *extra])
        return f"an integer between {self.low} and {self.upper()}" + "".join(f", or {v}" for v in extra)


BOOLEAN = OptionRange(boolean=True)


def _ints(low: int, high: int | Callable[[], int] = SIZE_CAP, *extra: int | None) -> OptionRange:
    return OptionRange(low=low, high=high, extra=extra)


OPTION_RANGES: dict[str, OptionRange] = {
    **{
        name: BOOLEAN
        for name in (
            # set by vLLM itself (CompilationConfig and the CPU platform)
            "enable_auto_functionalized_v2",
            "combo_kernels",
            "benchmark_combo_kernel",
            "dce",
            "size_asserts",
            "nan_asserts",
            "epilogue_fusion",
            # fusion, autotuning and code-generation switches
            "max_autotune",
            "max_autotune_gemm",
            "max_autotune_pointwise",
            "coordinate_descent_tuning",
            "force_disable_caches",
            "fx_graph_cache",
            "freezing",
            "shape_padding",
            "comprehensive_padding",
            "aggressive_fusion",
            "loop_ordering_after_fusion",
            "pattern_matcher",
            "group_fusion",
            "split_reductions",
            "memory_planning",
            "reorder_for_locality",
            "online_softmax",
            "conv_1x1_as_mm",
            "assume_32bit_indexing",
            "fallback_random",
            "implicit_fallbacks",
            "graph_partition",
            "cpp.dynamic_threads",
            "triton.cudagraphs",
            "triton.unique_kernel_names",
        )
    },
    # nodes fused into one kernel; Inductor's default is 64
    "max_fusion_size": _ints(1, 4096),
    "score_fusion_memory_threshold": _ints(0),
    # reductions this small are unrolled into straight-line code: large values blow up code size
    "unroll_reductions_threshold": _ints(0, 1024),
    "realize_opcount_threshold": _ints(0, 1 << 16, None),
    # vector width in bits: 1 turns vectorisation off, None lets Inductor pick the machine's own
    "cpp.simdlen": _ints(1, 1, None, 128, 256, 512),
    # threads of the generated C++ code: -1 lets Inductor use every core
    "cpp.threads": _ints(1, cpu_count, -1),
    "cpp.min_chunk_size": _ints(1),
    "triton.max_tiles": _ints(1, 3, None),
}
# The built-in allowlist: exactly the options whose range is known.
TUNING_OPTIONS = frozenset(OPTION_RANGES)


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
        _check_range(key, value)
    return dict(options)


def _check_range(key: str, value: Any) -> None:
    valid = OPTION_RANGES.get(key)
    if valid is not None and not valid.allows(value):
        raise ValueError(f"inductor_compile_config[{key!r}] must be {valid.describe()}, got {value!r}")
