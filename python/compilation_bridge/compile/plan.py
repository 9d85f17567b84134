"""What a config asks the compiler to do: the resolved compile plan.

A `VllmConfig` is compiled as vLLM compiles it: its `CompilationConfig` has already been completed by
`VllmConfig.__post_init__` for the worker's platform, so the plan reads it as it is (ranges from
`get_compile_ranges()`, `compile_sizes` as stored, even `None`, which makes every shape fail the range
assertion exactly as in vLLM).

A bare `CompilationConfig` is compiled *as it stands*: the plan fills in what vLLM's `VllmConfig` would
(splitting ops as `set_splitting_ops_for_v1`, a defaulted "all"/"none" in `custom_ops`, compile ranges
from `compile_ranges_split_points` up to `max_num_tokens`, `compile_sizes` expanded as
`post_init_cudagraph_sizes`), without writing any of it back into the config. The only fields compile/
writes into a config are those vLLM's compiler writes: `compilation_time`, `local_cache_dir`,
`enabled_custom_ops` / `disabled_custom_ops` and `traced_files`.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any, TypeGuard

from compilation_bridge.compile.inductor_options import checked_inductor_options
from compilation_bridge.vllm_config import (
    CompilationConfig,
    CompilationMode,
    CUDAGraphMode,
    Range,
    VllmConfig,
)

MAX_TOKENS_CAP = 2**24
DEFAULT_MAX_NUM_TOKENS = 2048  # vLLM's default max_num_batched_tokens without a model


@dataclasses.dataclass
class CompilePlan:
    compilation_config: CompilationConfig  # the live config, compiled as it stands
    vllm_config: VllmConfig | None  # the live VllmConfig, when one was given
    mode: CompilationMode
    backend: str
    splitting_ops: list[str]
    custom_ops: list[str]
    compile_ranges: list[Range]
    compile_sizes: list[int] | None
    max_num_tokens: int
    cudagraph_mode: CUDAGraphMode
    cudagraph_capture_sizes: list[int]
    # batch size -> the capture size it is padded to (the config's compute_bs_to_padded_graph_size)
    cudagraph_padding: list[int]
    use_inductor_graph_partition: bool
    inductor_compile_config: dict[str, Any]
    rank: int = 0
    dp_rank: int = 0

    @property
    def debug_dump_dir(self) -> Path | None:
        path = self.compilation_config.debug_dump_path
        if path is None:
            return None
        return Path(path).expanduser().absolute() / f"rank_{self.rank}_dp_{self.dp_rank}"

    def factors(self) -> dict[str, Any]:
        """The resolved choices, for the cache hash (a bare config's own hash cannot see them)."""
        return {
            "mode": int(self.mode),
            "backend": self.backend,
            "splitting_ops": self.splitting_ops,
            "custom_ops": self.custom_ops,
            "compile_ranges": [[r.start, r.end] for r in self.compile_ranges],
            "compile_sizes": self.compile_sizes,
            "max_num_tokens": self.max_num_tokens,
            "use_inductor_graph_partition": self.use_inductor_graph_partition,
        }


def is_vllm_config(config: object) -> TypeGuard[VllmConfig]:
    return hasattr(config, "compilation_config") and hasattr(config, "scheduler_config")


def make_plan(config: CompilationConfig | VllmConfig, max_num_tokens: int | None = None) -> CompilePlan:
    if is_vllm_config(config):
        return _plan_for_vllm_config(config, max_num_tokens)
    if isinstance(config, CompilationConfig):
        return _plan_for_compilation_config(config, max_num_tokens)
    raise TypeError(f"compile_model needs a CompilationConfig or a VllmConfig, got {type(config).__name__}")


def _check_mode(cc: CompilationConfig) -> CompilationMode:
    if cc.mode is None:
        # vLLM's TorchCompileWithNoGuardsWrapper refuses a None mode with this message.
        raise RuntimeError(
            "Compilation mode cannot be NO_COMPILATION (the CompilationConfig has mode=None; set a mode, "
            "or compile a VllmConfig, which picks one)"
        )
    return CompilationMode(cc.mode)


def _defaulted_custom_ops(cc: CompilationConfig, mode: CompilationMode) -> list[str]:
    ops = list(cc.custom_ops)
    if "all" not in ops and "none" not in ops:
        # as VllmConfig.__post_init__: Inductor compiles the native paths, so custom kernels default off
        ops.append("none" if cc.backend == "inductor" and mode != CompilationMode.NONE else "all")
    return ops


def _check_max(max_num_tokens: int) -> int:
    if isinstance(max_num_tokens, bool) or not isinstance(max_num_tokens, int):
        raise TypeError(f"max_num_tokens must be an int, got {max_num_tokens!r}")
    if not 1 <= max_num_tokens <= MAX_TOKENS_CAP:
        raise ValueError(f"max_num_tokens must be between 1 and {MAX_TOKENS_CAP}, got {max_num_tokens}")
    return max_num_tokens


def _plan_for_compilation_config(cc: CompilationConfig, max_num_tokens: int | None) -> CompilePlan:
    mode = _check_mode(cc)
    max_tokens = _check_max(DEFAULT_MAX_NUM_TOKENS if max_num_tokens is None else max_num_tokens)
    cudagraph_mode = cc.cudagraph_mode if cc.cudagraph_mode is not None else CUDAGraphMode.NONE
    splitting_ops, cudagraph_mode = _splitting_ops_for_v1(cc, mode, cudagraph_mode)

    # _set_compile_ranges(): the user's points strictly between 1 and the max, plus the max.
    points = [max_tokens]
    for x in cc.compile_ranges_split_points or []:
        assert isinstance(x, int)
        assert x > 0, f"Invalid compile range split point: {x}"
        if 1 < x < max_tokens:
            points.append(x)
    scratch = copy.copy(cc)  # the config's own get_compile_ranges over these points; cc stays as it is
    scratch.compile_ranges_split_points = points
    ranges = scratch.get_compile_ranges()

    capture = sorted(cc.cudagraph_capture_sizes or [])
    sizes, padding = _cudagraph_sizes(cc, capture)
    return CompilePlan(
        compilation_config=cc,
        vllm_config=None,
        mode=mode,
        backend=cc.backend,
        splitting_ops=splitting_ops,
        custom_ops=_defaulted_custom_ops(cc, mode),
        compile_ranges=ranges,
        compile_sizes=sizes,
        max_num_tokens=max_tokens,
        cudagraph_mode=cudagraph_mode,
        cudagraph_capture_sizes=capture,
        cudagraph_padding=padding,
        use_inductor_graph_partition=bool(cc.use_inductor_graph_partition),
        inductor_compile_config=checked_inductor_options(cc.inductor_compile_config),
    )


def _splitting_ops_for_v1(
    cc: CompilationConfig, mode: CompilationMode, cudagraph_mode: CUDAGraphMode
) -> tuple[list[str], CUDAGraphMode]:
    """vLLM's `CompilationConfig.set_splitting_ops_for_v1` itself, run on a scratch copy: the config given is
    compiled as it stands and never written to."""
    scratch = copy.copy(cc)  # shallow: the method only reassigns these fields
    scratch.mode, scratch.cudagraph_mode = mode, cudagraph_mode
    scratch.splitting_ops = None if cc.splitting_ops is None else list(cc.splitting_ops)
    scratch.set_splitting_ops_for_v1(all2all_backend="", data_parallel_size=1)
    return list(scratch.splitting_ops or []), scratch.cudagraph_mode


def _cudagraph_sizes(cc: CompilationConfig, capture: list[int]) -> tuple[list[int], list[int]]:
    """`compile_sizes` expanded and the padding table, as the config's own post_init_cudagraph_sizes makes
    them, run on a scratch copy whose capture sizes are `capture` (sorted): `cc` stays as it is."""
    scratch = copy.copy(cc)
    scratch.compile_sizes = None if cc.compile_sizes is None else list(cc.compile_sizes)
    scratch.cudagraph_capture_sizes = list(capture)
    scratch.max_cudagraph_capture_size = capture[-1] if capture else 0
    scratch.post_init_cudagraph_sizes()
    expanded = [x for x in scratch.compile_sizes or [] if isinstance(x, int)]  # only ints are left
    return expanded, list(scratch.bs_to_padded_graph_size or [0])


def _plan_for_vllm_config(vllm_config: VllmConfig, max_num_tokens: int | None) -> CompilePlan:
    cc = vllm_config.compilation_config
    mode = _check_mode(cc)
    configured = vllm_config.scheduler_config.max_num_batched_tokens
    if max_num_tokens is not None and max_num_tokens != configured:
        raise ValueError(
            f"max_num_tokens={max_num_tokens} differs from the VllmConfig's "
            f"scheduler_config.max_num_batched_tokens={configured}; a VllmConfig is compiled as it stands "
            "(leave max_num_tokens unset or set max_num_batched_tokens)"
        )
    parallel = getattr(vllm_config, "parallel_config", None)
    sizes = cc.compile_sizes
    if sizes is not None and any(isinstance(x, str) for x in sizes):
        raise NotImplementedError(
            "cudagraph_capture_sizes not supported in compile_sizes."
            "This should be handled in `post_init_cudagraph_sizes`."
        )
    return CompilePlan(
        compilation_config=cc,
        vllm_config=vllm_config,
        mode=mode,
        backend=cc.backend,
        splitting_ops=list(cc.splitting_ops or []),
        custom_ops=_defaulted_custom_ops(cc, mode),
        compile_ranges=cc.get_compile_ranges(),
        compile_sizes=None
        if sizes is None
        else [x for x in sizes if isinstance(x, int)],  # no str: see above
        max_num_tokens=_check_max(configured),
        cudagraph_mode=cc.cudagraph_mode if cc.cudagraph_mode is not None else CUDAGraphMode.NONE,
        cudagraph_capture_sizes=sorted(cc.cudagraph_capture_sizes or []),
        cudagraph_padding=_cudagraph_sizes(cc, sorted(cc.cudagraph_capture_sizes or []))[1],
        use_inductor_graph_partition=bool(cc.use_inductor_graph_partition),
        inductor_compile_config=checked_inductor_options(cc.inductor_compile_config),
        rank=int(getattr(parallel, "rank", 0) or 0),
        dp_rank=int(
            getattr(parallel, "data_parallel_index", getattr(parallel, "data_parallel_rank", 0)) or 0
        ),
    )
