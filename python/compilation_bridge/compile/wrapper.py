"""The four compilation modes applied to a model's forward (vLLM's decorator + `wrapper.py`;
docs/design.md#real-compilation).

- NONE: the forward as it is (eager).
- STOCK_TORCH_COMPILE: `torch.compile(forward, fullgraph=True, backend=...)` with Dynamo's guards kept, so a
  new shape re-traces (and, from the second shape on, Dynamo's automatic dynamic shapes apply).
- DYNAMO_TRACE_ONCE: one Dynamo trace with dimension 0 of every tensor argument marked dynamic and
  every guard dropped (`guard_filter_fn`), handed whole to the backend; later calls never re-trace, even
  when the traced Python would have branched differently. `dynamic_shapes_config` applies as in vLLM:
  UNBACKED marks the dimension unbacked, BACKED_SIZE_OBLIVIOUS traces size-obliviously, and
  `evaluate_guards` keeps the shape guards and makes a call that fails them an error.
- VLLM_COMPILE: the same trace-once wrapper with a `VllmBackend` as the backend.

Dynamo caches compiled code on the code object, and with guards dropped any entry matches; so each
wrapper compiles its own copy of the forward's code object, and two compiled models never share one.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, cast

import torch
from torch import nn

from compilation_bridge.compile.counters import CompilationCounter, bump
from compilation_bridge.vllm_config import CompilationMode, DynamicShapesType


def _private_forward(module: nn.Module) -> Callable[..., Any]:
    forward = type(module).forward
    code = forward.__code__.replace()  # a distinct code object: a Dynamo cache of its own
    fn = types.FunctionType(
        code, forward.__globals__, forward.__name__, forward.__defaults__, forward.__closure__
    )
    return types.MethodType(fn, module)


def _drop_all_guards(guards: list[Any]) -> list[bool]:
    return [False] * len(guards)


def _keep_shape_guards(guards: list[Any]) -> list[bool]:
    # dynamic_shapes_config.evaluate_guards: only the shape guards survive
    return [g.guard_type == "SHAPE_ENV" for g in guards]


class CompiledForward:
    """Calls `module`'s forward in one of the four modes; see the module docstring."""

    def __init__(
        self,
        module: nn.Module,
        mode: CompilationMode,
        backend: str | Callable[..., Any] | None,
        inductor_options: dict[str, Any] | None = None,
        counter: CompilationCounter | None = None,
        dynamic_shapes_config: Any = None,
    ) -> None:
        if mode is None:
            raise RuntimeError("Compilation mode cannot be NO_COMPILATION")
        self.module = module
        self.mode = CompilationMode(mode)
        self.backend = backend
        self.counter = counter or CompilationCounter()
        self.traced = False
        shapes = dynamic_shapes_config
        self.shapes_type = DynamicShapesType(shapes.type) if shapes is not None else DynamicShapesType.BACKED
        self.evaluate_guards = bool(shapes is not None and shapes.evaluate_guards)
        if self.mode == CompilationMode.NONE:
            self._compiled: Callable[..., Any] = module.forward
            return
        # Options go to Inductor only when the backend is the "inductor" string, and as a copy: torch.compile
        # pops keys out of the dict it is given, which must never be the config's own.
        options: dict[str, Any] = {}
        if isinstance(backend, str) and backend == "inductor":
            options = copy.copy(inductor_options or {})
        if self.mode == CompilationMode.STOCK_TORCH_COMPILE:
            bump(self.counter, "stock_torch_compile_count")
        else:
            bump(self.counter, "num_models_seen")
            options["guard_filter_fn"] = _keep_shape_guards if self.evaluate_guards else _drop_all_guards
        self._compiled = torch.compile(
            _private_forward(module),
            fullgraph=True,
            dynamic=None if self.mode == CompilationMode.STOCK_TORCH_COMPILE else False,
            backend=cast(Any, backend),  # None: torch.compile takes its default backend (typed as never None)
            options=options or None,
        )

    def __call__(self, *args: Any) -> Any:
        if self.mode in (CompilationMode.NONE, CompilationMode.STOCK_TORCH_COMPILE):
            return self._compiled(*args)
        if self.traced:
            # with evaluate_guards, a call that fails the kept shape guards is an error, not a re-trace
            stance = torch.compiler.set_stance("fail_on_recompile") if self.evaluate_guards else nullcontext()
            with stance:
                return self._compiled(*args)
        for a in args:
            # a size-1 dimension cannot be dynamic (Dynamo specialises 0 and 1)
            if isinstance(a, torch.Tensor) and a.dim() and a.shape[0] > 1:
                if self.shapes_type == DynamicShapesType.UNBACKED:
                    torch._dynamo.decorators.mark_unbacked(a, 0)
                else:
                    torch._dynamo.mark_dynamic(a, 0)
        oblivious = self.shapes_type == DynamicShapesType.BACKED_SIZE_OBLIVIOUS
        patch = (
            torch.fx.experimental._config.patch(backed_size_oblivious=True)  # type: ignore[attr-defined]
            if oblivious
            else nullcontext()
        )
        with patch:
            out = self._compiled(*args)
        self.traced = True  # only once the trace succeeded: a failed one is retried, dims marked again
        return out
