"""CUDA graphs: resolved and reported everywhere, captured only where CUDA really runs the model.

On CPU (this project's test machine) nothing is captured and the report says why; nothing pretends.
On CUDA, `CUDAGraphWrapper` captures one graph per padded batch size and replays it, as vLLM's
wrapper does. That capture path is UNVERIFIED: it has never run on a GPU in this project's CI.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from compilation_bridge.compile.counters import CompilationCounter, bump
from compilation_bridge.vllm_config import CUDAGraphMode

# (runtime mode, padded batch size) for the forward pass under way, set by the model runner.
_forward: contextvars.ContextVar[tuple[CUDAGraphMode, int]] = contextvars.ContextVar(
    "cudagraph_forward", default=(CUDAGraphMode.NONE, 0)
)


@contextmanager
def forward_context(runtime_mode: CUDAGraphMode, batch_size: int) -> Iterator[None]:
    token = _forward.set((runtime_mode, batch_size))
    try:
        yield
    finally:
        _forward.reset(token)


class CudagraphPlan:
    """Which cudagraph runtime mode a batch of `n` tokens gets, and to which size it is padded."""

    def __init__(
        self, mode: CUDAGraphMode, capture_sizes: list[int], padding: list[int], device: torch.device
    ) -> None:
        self.mode = mode
        self.capture_sizes = sorted(capture_sizes)
        self.table = padding  # the config's own compute_bs_to_padded_graph_size (compile/plan.py)
        self.max_size = self.capture_sizes[-1] if self.capture_sizes else 0
        if mode == CUDAGraphMode.NONE:
            self.reason = "cudagraph_mode is NONE"
        elif device.type != "cuda":
            self.reason = f"the model runs on {device.type}; CUDA graphs need CUDA, so none were captured"
        elif not self.capture_sizes:
            self.reason = "no cudagraph_capture_sizes"
        else:
            self.reason = ""
        self.active = not self.reason

    def dispatch(self, num_tokens: int) -> tuple[CUDAGraphMode, int]:
        """Mixed batches only (this runner has no uniform-decode batches): vLLM's mixed-mode choice."""
        if not self.active or num_tokens > self.max_size:
            return CUDAGraphMode.NONE, num_tokens
        return self.mode.mixed_mode(), self.table[num_tokens]

    def report(self) -> dict[str, Any]:
        return {
            "cudagraph_mode": self.mode.name,
            "cudagraph_capture_sizes": self.capture_sizes,
            "max_cudagraph_capture_size": self.max_size,
            "cudagraphs_active": self.active,
            "cudagraphs_reason": self.reason or "captured per padded batch size on first use",
        }


class CUDAGraphWrapper:
    """Capture `runnable` once per batch size when the forward context asks for `runtime_mode`, then replay.

    Inputs are copied into the captured input buffers before a replay, because pieces receive tensors
    (attention outputs) that live at new addresses on each call. UNVERIFIED on a GPU in this project.
    """

    _pool: Any = None

    def __init__(
        self, runnable: Callable[..., Any], runtime_mode: CUDAGraphMode, counter: CompilationCounter
    ) -> None:
        self.runnable = runnable
        self.runtime_mode = runtime_mode
        self.counter = counter
        self.entries: dict[int, tuple[torch.cuda.CUDAGraph, tuple[Any, ...], Any]] = {}

    def __call__(self, *args: Any) -> Any:
        mode, batch_size = _forward.get()
        if mode != self.runtime_mode or not torch.cuda.is_available():
            return self.runnable(*args)
        entry = self.entries.get(batch_size)
        if entry is None:
            return self._capture(batch_size, args)
        graph, static_args, output = entry
        for static, live in zip(static_args, args, strict=True):
            if isinstance(static, torch.Tensor) and static.data_ptr() != live.data_ptr():
                static.copy_(live)
        graph.replay()
        return output

    def _capture(self, batch_size: int, args: tuple[Any, ...]) -> Any:
        if CUDAGraphWrapper._pool is None:
            CUDAGraphWrapper._pool = torch.cuda.graph_pool_handle()
        static_args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        self.runnable(*static_args)  # warm-up outside the graph (lazy compiles happen here)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=CUDAGraphWrapper._pool):
            output = self.runnable(*static_args)
        self.entries[batch_size] = (graph, static_args, output)
        bump(self.counter, "num_cudagraph_captured")
        graph.replay()
        return output
