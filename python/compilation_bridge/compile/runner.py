"""`compile_model(config, ...)`: a reference model compiled the way a config says, run and reported.

`compile_model` builds the model (custom-op paths chosen by the config), and for VLLM_COMPILE traces it
once with `max_num_tokens` tokens (at most 2048) and splits the graph, compiling no range or size; each
range or exact size compiles at the first `run` that needs it. STOCK_TORCH_COMPILE and
DYNAMO_TRACE_ONCE compile at the first `run` (DYNAMO_TRACE_ONCE traces with that many tokens first, as
vLLM's runner does with its dummy run, so the trace never specialises to a small size).
"""

from __future__ import annotations

import gc
import importlib
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from torch import nn

from compilation_bridge.busy import BusyError
from compilation_bridge.compile import budgets, ops, progress, reference_models
from compilation_bridge.compile.backend import VllmBackend, check_inductor_cache_dir
from compilation_bridge.compile.bundle import Bundle, BundledForward
from compilation_bridge.compile.counters import CompilationCounter, bump
from compilation_bridge.compile.cudagraph import CudagraphPlan, CUDAGraphWrapper, forward_context
from compilation_bridge.compile.plan import CompilePlan, make_plan
from compilation_bridge.compile.wrapper import CompiledForward
from compilation_bridge.settings import max_run_elements
from compilation_bridge.vllm_config import CompilationMode, CUDAGraphMode
from compilation_bridge.vllm_config.platforms import current_platform

# Work per call grows with the token count (attention quadratically), so a caller cannot make one call
# run for hours: runs are capped, and the trace uses at most TRACE_TOKENS_CAP tokens. The trace size does
# not change the compiled code: dimension 0 is symbolic whatever its traced value (>= 2).
RUN_TOKENS_CAP = 1 << 16
TRACE_TOKENS_CAP = 2048
# Timings are medians of this many runs after WARMUP_RUNS untimed ones; a single sample is noise.
DEFAULT_REPEATS = 20
MAX_REPEATS = 1000
MIN_REPEATS = 3
WARMUP_RUNS = 2
TIMING_BUDGET_S = 3.0
TIMING_KEYS = ("num_tokens", "repeats", "warmup", "first_call_ms", "compiled_ms", "eager_ms")


def _check_repeats(repeats: int) -> int:
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        raise ValueError(f"repeats must be an int between 1 and {MAX_REPEATS}, got {repeats!r}")
    return repeats


def _device() -> torch.device:
    if current_platform.is_cuda_alike() and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def _max_abs_diff(a: Any, b: Any) -> float:
    if isinstance(a, torch.Tensor):
        return float((a.float() - b.float()).abs().max().item()) if a.numel() else 0.0
    return max((_max_abs_diff(x, y) for x, y in zip(a, b, strict=True)), default=0.0)


def _slice(out: Any, n: int) -> Any:
    if isinstance(out, torch.Tensor):
        return out[:n]
    return type(out)(_slice(x, n) for x in out)


class ModelBusyError(BusyError):
    """The compiled model is running another call; refused at once (back-pressure, never a queue)."""


class CompiledModel:
    """A live compiled reference model: `run(num_tokens)` and `report()` return plain JSON-able dicts."""

    def __init__(
        self,
        name: str,
        options: dict[str, Any],
        model: nn.Module,
        plan: CompilePlan,
        forward: CompiledForward | BundledForward,
        backend: VllmBackend | None,
        counter: CompilationCounter,
        device: torch.device,
    ) -> None:
        self.name = name
        self.options = options
        self.model = model
        self.plan = plan
        self.forward = forward
        self.backend = backend
        self.counter = counter
        self.device = device
        self.cudagraphs = CudagraphPlan(
            plan.cudagraph_mode, plan.cudagraph_capture_sizes, plan.cudagraph_padding, device
        )
        self.full_graph = (
            CUDAGraphWrapper(forward, CUDAGraphMode.FULL, counter)
            if self.cudagraphs.active and plan.cudagraph_mode.has_full_cudagraphs()
            else None
        )
        self.first_run_seconds: float | None = None
        self.runs = 0
        self.timings: dict[int, dict[str, Any]] = {}  # by token count, the latest run's medians
        # one run at a time: a lazy compile must not race with another call on the same model
        self._lock = threading.Lock()

    # -- running ---------------------------------------------------------------------------------

    def _inputs(self, n: int) -> tuple[torch.Tensor, ...]:
        return self.model.example_inputs(n, self.device)  # type: ignore[operator]

    def _check_tokens(self, num_tokens: int) -> None:
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int):
            raise TypeError(f"num_tokens must be an int, got {num_tokens!r}")
        if self.backend is not None and self.backend.has_pieces:
            # vLLM's assertion, raised before any piece runs
            assert self.backend.range_for(num_tokens) is not None, (
                f"Shape: {num_tokens} out of considered ranges: {list(self.plan.compile_ranges)}"
            )
        elif not 1 <= num_tokens <= self.plan.max_num_tokens:
            raise ValueError(f"num_tokens must be between 1 and max_num_tokens={self.plan.max_num_tokens}")
        if num_tokens > RUN_TOKENS_CAP:
            raise ValueError(f"num_tokens must be at most {RUN_TOKENS_CAP} on this worker, got {num_tokens}")
        budgets.check_run_elements(num_tokens, reference_models.hidden_size(self.model))
        # what runs is the batch padded to its CUDA graph's size (the same on CPU), attention included
        padded = self.cudagraphs.dispatch(num_tokens)[1]
        budgets.check_run_bytes(reference_models.footprint_of(self.model), padded)

    def trace(self) -> None:
        """Trace once with `max_num_tokens` tokens, compiling nothing (VLLM_COMPILE) or the whole graph."""
        if self.forward.traced or self.plan.mode in (
            CompilationMode.NONE,
            CompilationMode.STOCK_TORCH_COMPILE,
        ):
            return
        # The trace is a run too: within both run budgets as well (its size does not change the code).
        within_elements = max_run_elements() // reference_models.hidden_size(self.model)
        upper = max(2, min(self.plan.max_num_tokens, TRACE_TOKENS_CAP, within_elements))
        footprint = reference_models.footprint_of(self.model)
        size = budgets.largest_run_within(footprint, upper, lower=2)
        budgets.check_run_bytes(footprint, size)  # refused when not even 2 tokens fit
        inputs = self._inputs(size)
        with progress.step("trace", mode=self.plan.mode.name, num_tokens=size):
            if self.backend is not None:
                self.backend.trace(self.forward, inputs)
            else:
                with torch.no_grad():
                    self.forward(*inputs)

    def run(self, num_tokens: int, *, repeats: int = DEFAULT_REPEATS) -> dict[str, Any]:
        """Run `num_tokens` tokens: the first call apart, then medians of `repeats` timed runs.

        The first call compiles or loads what this size needs (`first_call_ms`); after a warm-up,
        compiled and eager forwards are timed alternately and `compiled_ms` / `eager_ms` are the
        medians. One sample is noise on a shared machine (a 100x swing between two rows).
        """
        # Never wait for the lock: a waiting call would hold its worker's call slot for the whole run.
        if not self._lock.acquire(blocking=False):
            raise ModelBusyError(
                "compiled model busy: 1 of 1 runs in flight on this model; retry when it ends",
                limit="runs in flight on this compiled model",
                current=1,
                maximum=1,
            )
        try:
            return self._run(num_tokens, _check_repeats(repeats))
        finally:
            self._lock.release()

    def _run(self, num_tokens: int, repeats: int) -> dict[str, Any]:
        self._check_tokens(num_tokens)
        before = self.counter.clone()
        with progress.step("run", num_tokens=num_tokens):
            timed = self._measure(num_tokens, repeats)
        if self.runs == 0:
            self.first_run_seconds = timed["first_call_s"]
        self.runs += 1
        result = self._result(num_tokens, timed, before)
        self.timings[num_tokens] = {k: result[k] for k in TIMING_KEYS}
        return result

    def _measure(self, num_tokens: int, repeats: int) -> dict[str, Any]:
        """The first call (with whatever it compiles or loads) alone, then medians of timed runs."""
        # DYNAMO_TRACE_ONCE compiles in its trace, at the first run: part of that first call's time
        trace_s, _ = self._timed(self.trace)
        runtime_mode, padded = self.cudagraphs.dispatch(num_tokens)
        inputs = self._inputs(padded)
        call = self.full_graph if runtime_mode == CUDAGraphMode.FULL and self.full_graph else self.forward
        with torch.no_grad(), forward_context(runtime_mode, padded):
            first_call, out = self._timed(lambda: _slice(call(*inputs), num_tokens))
            eager_inputs = self._inputs(num_tokens)
            reference = self.model(*eager_inputs)
            compiled_s, eager_s, timed_runs = self._medians(
                lambda: call(*inputs), lambda: self.model(*eager_inputs), repeats
            )
        return {
            "first_call_s": trace_s + first_call,
            "compiled_s": compiled_s,
            "eager_s": eager_s,
            "repeats": timed_runs,
            "max_abs_diff": _max_abs_diff(out, reference),
            "runtime_mode": runtime_mode,
            "padded": padded,
        }

    def _result(self, num_tokens: int, timed: dict[str, Any], before: CompilationCounter) -> dict[str, Any]:
        after, compiled_s, eager_s = self.counter, timed["compiled_s"], timed["eager_s"]
        return {
            "num_tokens": num_tokens,
            "repeats": timed["repeats"],
            "warmup": WARMUP_RUNS,
            "first_call_ms": timed["first_call_s"] * 1e3,
            "compiled_ms": compiled_s * 1e3,
            "eager_ms": eager_s * 1e3,
            "speedup_vs_eager": eager_s / compiled_s if compiled_s > 0 else None,
            "seconds": compiled_s,
            "eager_seconds": eager_s,
            "max_abs_diff_vs_eager": timed["max_abs_diff"],
            "backend_compilations": after.num_backend_compilations - before.num_backend_compilations,
            "artifacts_loaded": after.num_compiled_artifacts_loaded - before.num_compiled_artifacts_loaded,
            "cudagraph_runtime_mode": timed["runtime_mode"].name,
            "padded_num_tokens": timed["padded"],
            "dispatched_to": self._dispatched_to(num_tokens),
        }

    def _timed(self, fn: Any) -> tuple[float, Any]:
        self._sync()
        start = time.perf_counter()
        out = fn()
        self._sync()
        return time.perf_counter() - start, out

    def _medians(self, compiled: Any, eager: Any, repeats: int) -> tuple[float, float, int]:
        """Median seconds of up to `repeats` calls of each after a warm-up, timed alternately so that
        both see the same machine load; stops early (and says how many it timed) past a time budget,
        so a large token count cannot make one call run for minutes."""
        deadline = time.perf_counter() + TIMING_BUDGET_S
        for _ in range(WARMUP_RUNS):
            compiled()
            eager()
        a: list[float] = []
        b: list[float] = []
        while len(a) < repeats and (len(a) < MIN_REPEATS or time.perf_counter() < deadline):
            a.append(self._timed(compiled)[0])
            b.append(self._timed(eager)[0])
        return statistics.median(a), statistics.median(b), len(a)

    def _dispatched_to(self, num_tokens: int) -> list[int] | None:
        found = None if self.backend is None else self.backend.range_for(num_tokens)
        return None if found is None else [found.start, found.end]

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    # -- reporting -------------------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        plan, cc = self.plan, self.plan.compilation_config
        backend = self.backend.summary() if self.backend is not None else self._without_backend()
        return {
            "model": self.name,
            "model_options": dict(self.options),
            "mode": plan.mode.name,
            "backend": plan.backend,
            "device": self.device.type,
            "splitting_ops": list(plan.splitting_ops),
            "custom_ops": list(plan.custom_ops),
            "enabled_custom_ops": dict(cc.enabled_custom_ops),
            "disabled_custom_ops": dict(cc.disabled_custom_ops),
            "num_pieces": backend["num_pieces"],
            "num_compiled_pieces": backend["num_compiled_pieces"],
            "num_backend_compilations": self.counter.num_backend_compilations,
            "num_artifacts_saved": self.counter.num_compiled_artifacts_saved,
            "num_artifacts_loaded": self.counter.num_compiled_artifacts_loaded,
            "compilation_time_s": cc.compilation_time,
            "first_run_seconds": self.first_run_seconds,
            # medians of N runs after a warm-up, in ms, per token count; first_call_ms apart
            "timings": [self.timings[n] for n in sorted(self.timings)],
            "local_cache_dir": backend["local_cache_dir"],
            "cache_enabled": backend["cache_enabled"],
            "cache_status": backend["cache_status"],
            "compile_ranges": [[r.start, r.end] for r in plan.compile_ranges],
            "compile_sizes": None if plan.compile_sizes is None else list(plan.compile_sizes),
            "compiled_ranges": backend["compiled_ranges"],
            "max_num_tokens": plan.max_num_tokens,
            "counters": self.counter.as_dict(),
            "warm_start": backend["warm_start"],
            # graphs Dynamo captured in this whole process (0 after a warm start that traced nothing)
            "dynamo_graphs_in_process": _dynamo_graphs(),
            **self.cudagraphs.report(),
        }

    def _without_backend(self) -> dict[str, Any]:
        """`VllmBackend.summary()` for the modes without one: the whole graph is one piece, or none."""
        pieces = 0 if self.plan.mode == CompilationMode.NONE else 1
        return {
            "num_pieces": pieces,
            "num_compiled_pieces": pieces,
            "compiled_ranges": [],
            "local_cache_dir": None,
            "cache_enabled": False,
            "cache_status": "no cache in this mode",
            "warm_start": {"used": False, "reason": "warm starts are for VLLM_COMPILE", "seconds": None},
        }


def _dynamo_graphs() -> int:
    """Graphs Dynamo captured in this process; never imports Dynamo just to say 0."""
    utils = sys.modules.get("torch._dynamo.utils")
    return int(utils.counters["stats"]["unique_graphs"]) if utils is not None else 0


_heap_frozen = False


def preload() -> None:
    """Import Dynamo and Inductor now (seconds): a worker pays it at start, not at its first compile."""
    global _heap_frozen
    for name in ("torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.standalone_compile"):
        importlib.import_module(name)
    from torch._inductor.codecache import torch_key

    torch_key()  # hashes torch's own sources once per process; the compiler hash needs it
    if not _heap_frozen:
        # torch, sympy, Dynamo and Inductor leave millions of long-lived objects; every full garbage
        # collection walked them all with the GIL held (365 ms measured during a compile), so the
        # worker's Heartbeat thread stalled. Frozen objects are skipped by the collector; what is
        # frozen is what the imports made, which lives as long as the process anyway.
        gc.freeze()
        _heap_frozen = True


def compile_model(
    config: Any,
    *,
    model: str = "toy-llama",
    max_num_tokens: int | None = None,
    seed: int = 0,
    **model_size_options: Any,
) -> CompiledModel:
    """Build reference model `model` and compile it as `config` (a CompilationConfig or VllmConfig) says."""
    if model not in reference_models.MODELS:
        raise ValueError(f"unknown model {model!r}; known models: {', '.join(reference_models.MODELS)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    plan = make_plan(config, max_num_tokens)
    cc = plan.compilation_config
    if plan.mode != CompilationMode.NONE and plan.backend == "inductor":
        preload()  # once per process: imports, then the heap frozen (see preload)
    device = _device()
    enabled_before, disabled_before = Counter(cc.enabled_custom_ops), Counter(cc.disabled_custom_ops)
    with ops.custom_op_context(plan.custom_ops, cc):
        module = reference_models.build_model(model, seed, **model_size_options)
    own_counts = (cc.enabled_custom_ops - enabled_before, cc.disabled_custom_ops - disabled_before)
    module = module.to(device).eval()
    counter = CompilationCounter()
    backend: VllmBackend | None = None
    target: Any = None
    if plan.mode == CompilationMode.VLLM_COMPILE:
        model_file = getattr(sys.modules.get(type(module).__module__), "__file__", None)
        source_files = [f for f in (reference_models.__file__, ops.__file__, model_file) if f]
        backend = VllmBackend(
            plan,
            extra_factors={"model": model, "model_options": model_size_options, "device": device.type},
            traced_files=[f for f in source_files if Path(f).is_file()],
            counter=counter,
            device=device,
            custom_op_counts=own_counts,
        )
        backend.prepare()  # every path is checked now, before anything is traced or written
        target = backend
    elif plan.mode != CompilationMode.NONE:
        # Modes 1 and 2 never read the VllmConfig; a bare CompilationConfig passes None, as vLLM allows.
        target = cc.init_backend(plan.vllm_config)  # type: ignore[arg-type]
        if target == "inductor":
            check_inductor_cache_dir()
    forward: CompiledForward | BundledForward | None = None
    if backend is not None:
        forward = _forward_from_bundle(backend, module, module.example_inputs(2, device))  # type: ignore[operator]
        if forward is not None:
            bump(counter, "num_models_seen")
    if forward is None:
        forward = CompiledForward(
            module, plan.mode, target, plan.inductor_compile_config, counter, cc.dynamic_shapes_config
        )
    compiled = CompiledModel(model, model_size_options, module, plan, forward, backend, counter, device)
    if backend is not None:
        compiled.trace()
    return compiled


def _forward_from_bundle(
    backend: VllmBackend, module: nn.Module, example_args: tuple[Any, ...]
) -> BundledForward | None:
    """The forward from the bundle in the backend's cache directory; None, with the reason in the
    backend's summary, when there is none to use (today's path traces and compiles instead)."""
    started = time.perf_counter()
    try:
        bundle = Bundle.read(backend.bundle_dir(), backend.made_for(example_args))
        return backend.adopt(bundle, module, started=started)
    except Exception as e:  # a damaged bundle must never stop the model from compiling
        backend.decline(e)
        return None
