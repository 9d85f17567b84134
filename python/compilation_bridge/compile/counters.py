"""Compilation counters, named and incremented as vLLM's `compilation_counter` (vllm/compilation/counter.py).

A process-wide `compilation_counter` serves vLLM-style tests (`expect(...)` over a block); each compiled
model also keeps its own `CompilationCounter` so that its report is not polluted by other models.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager


@dataclasses.dataclass
class CompilationCounter:
    num_models_seen: int = 0
    num_graphs_seen: int = 0
    # pieces of the split graph, splitting pieces included
    num_piecewise_graphs_seen: int = 0
    # pieces that are compiled (and could be captured as piecewise cudagraphs)
    num_piecewise_capturable_graphs_seen: int = 0
    # a compile or a load from the cache, as in vLLM
    num_backend_compilations: int = 0
    num_gpu_runner_capture_triggers: int = 0
    num_cudagraph_captured: int = 0
    num_inductor_compiles: int = 0
    num_eager_compiles: int = 0
    num_cache_entries_updated: int = 0
    num_compiled_artifacts_saved: int = 0
    # not in vLLM 0.14: loads are otherwise invisible (vLLM counts them as backend compilations)
    num_compiled_artifacts_loaded: int = 0
    stock_torch_compile_count: int = 0

    def clone(self) -> CompilationCounter:
        return copy.deepcopy(self)

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    @contextmanager
    def expect(self, **kwargs: int) -> Iterator[None]:
        """Assert the increments of the named counters over the block, with vLLM's message."""
        old = self.clone()
        yield
        for k, v in kwargs.items():
            before, after = getattr(old, k), getattr(self, k)
            assert after - before == v, (
                f"{k} not as expected, before it is {before}, after it is {after}, expected diff is {v}"
            )


compilation_counter = CompilationCounter()


def bump(local: CompilationCounter | None, name: str, n: int = 1) -> None:
    """Increment `name` on the process-wide counter and on a compiled model's own counter."""
    setattr(compilation_counter, name, getattr(compilation_counter, name) + n)
    if local is not None and local is not compilation_counter:
        setattr(local, name, getattr(local, name) + n)
