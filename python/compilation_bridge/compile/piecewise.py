"""PiecewiseBackend: one compiled piece of the split graph, dispatched by exact size, then by range.

Nothing compiles up front. The first call whose token count falls in a range (or equals a compile size)
compiles that piece for it: ranges from the fake inputs recorded at trace time (symbolic token count),
exact sizes from the real arguments (specialised). During `tracing_only()` pieces run their FX graph
as it is, so the trace that builds the pieces compiles nothing.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import torch.fx as fx

from compilation_bridge.vllm_config import Range

_tracing_only: contextvars.ContextVar[bool] = contextvars.ContextVar("tracing_only", default=False)


@contextmanager
def tracing_only() -> Iterator[None]:
    token = _tracing_only.set(True)
    try:
        yield
    finally:
        _tracing_only.reset(token)


def is_tracing_only() -> bool:
    return _tracing_only.get()


class CompilePiece(Protocol):
    def __call__(
        self,
        graph: fx.GraphModule,
        inputs: list[Any],
        *,
        compile_range: Range,
        graph_index: int,
        num_graphs: int,
    ) -> Callable[..., Any]: ...


@dataclasses.dataclass(frozen=True)
class PieceContext:
    """What a piece needs from the backend that split the graph, and nothing more: the ranges and sizes to
    dispatch on, how to compile itself for one of them, and whom to tell once the last piece has compiled
    every range."""

    compile_ranges: list[Range]
    compile_sizes: list[int] | None
    compile: CompilePiece
    on_all_compiled: Callable[[], None]


@dataclasses.dataclass
class RangeEntry:
    compile_range: Range
    compiled: bool = False
    runnable: Callable[..., Any] | None = None


class PiecewiseBackend:
    def __init__(
        self,
        graph: fx.GraphModule,
        piecewise_compile_index: int,
        total_piecewise_compiles: int,
        sym_shape_indices: list[int],
        context: PieceContext,
        dynamic_tensor_indices: list[int] | None = None,
        submod_name: str = "",
    ) -> None:
        self.graph = graph
        self.submod_name = submod_name  # the split graph's attribute this piece replaces
        self.context = context
        self.piecewise_compile_index = piecewise_compile_index
        self.total_piecewise_compiles = total_piecewise_compiles
        self.is_first_graph = piecewise_compile_index == 0
        self.is_last_graph = piecewise_compile_index == total_piecewise_compiles - 1
        self.sym_shape_indices = sym_shape_indices
        # A piece that receives no SymInt reads the token count from a tensor whose dim 0 is symbolic.
        self.dynamic_tensor_indices = dynamic_tensor_indices or []
        self.compile_ranges: list[Range] = list(context.compile_ranges)
        self.compile_sizes = context.compile_sizes
        self.range_entries: dict[Range, RangeEntry] = {}
        self.to_be_compiled_ranges: set[Range] = set(self.compile_ranges)
        for size in self.compile_sizes or []:
            size_range = Range(start=size, end=size)
            if size_range not in self.compile_ranges:
                self.range_entries[size_range] = RangeEntry(size_range)
                self.to_be_compiled_ranges.add(size_range)
        for compile_range in self.compile_ranges:
            self.range_entries[compile_range] = RangeEntry(compile_range)

    def _fake_args(self, args: tuple[Any, ...]) -> list[Any]:
        # Fake inputs from the trace: real ones would let Inductor duck-size unrelated dimensions
        # to the token count and specialise the "dynamic" compile (vLLM issue 27899).
        fakes = [n.meta["example_value"] for n in self.graph.graph.nodes if n.op == "placeholder"]
        assert len(fakes) == len(args)
        return fakes

    def find_range_for_shape(self, runtime_shape: int) -> RangeEntry | None:
        if self.compile_sizes is None:  # vLLM's quirk: no compile_sizes list, no dispatch at all
            return None
        if runtime_shape in self.compile_sizes:
            return self.range_entries[Range(start=runtime_shape, end=runtime_shape)]
        for compile_range in self.compile_ranges:
            if runtime_shape in compile_range:
                return self.range_entries[compile_range]
        return None

    def _compile(self, entry: RangeEntry, args: tuple[Any, ...]) -> None:
        inputs = list(args) if entry.compile_range.is_single_size() else self._fake_args(args)
        # Marked compiled only once the compile succeeded, so a failed compile is retried next call
        # (vLLM marks it first and then calls None).
        entry.runnable = self.context.compile(
            self.graph,
            inputs,
            compile_range=entry.compile_range,
            graph_index=self.piecewise_compile_index,
            num_graphs=self.total_piecewise_compiles,
        )
        entry.compiled = True
        self.to_be_compiled_ranges.discard(entry.compile_range)
        if self.is_last_graph and not self.to_be_compiled_ranges:
            self.context.on_all_compiled()

    def __call__(self, *args: Any) -> Any:
        if _tracing_only.get():
            return self.graph(*args)
        if self.sym_shape_indices:
            runtime_shape = args[self.sym_shape_indices[0]]
        else:
            runtime_shape = args[self.dynamic_tensor_indices[0]].shape[0]
        entry = self.find_range_for_shape(runtime_shape)
        assert entry is not None, f"Shape: {runtime_shape} out of considered ranges: {self.compile_ranges}"
        if not entry.compiled:
            self._compile(entry, args)
        assert entry.runnable is not None
        return entry.runnable(*args)
