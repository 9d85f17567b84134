"""VllmBackend: the torch.compile backend of VLLM_COMPILE (vLLM's `vllm/compilation/backends.py`).

Called once by Dynamo with the whole traced graph, it: hashes what the compiled code depends on into a
cache directory (`<cache_dir or ~/.cache/compilation-bridge/torch_compile_cache/<hash>>/rank_0_0/backbone`),
writes `cache_key_factors.json` and `computation_graph.py` there, splits the graph at the splitting ops,
and replaces each non-splitting piece by a lazily compiling `PiecewiseBackend`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx
from torch._dispatch.python import enable_python_dispatcher

from compilation_bridge.compile import progress
from compilation_bridge.compile.authenticated import read_authenticated, write_authenticated
from compilation_bridge.compile.bundle import (
    GUARDS_DROPPED,
    Bundle,
    BundledForward,
    BundleStatus,
    MadeFor,
    PieceRecord,
    Unavailable,
    range_key,
)
from compilation_bridge.compile.compiler import CompilerManager, is_compile_cache_enabled
from compilation_bridge.compile.counters import CompilationCounter, bump
from compilation_bridge.compile.cudagraph import CUDAGraphWrapper
from compilation_bridge.compile.files import atomic_write_text, check_allowed, make_dirs
from compilation_bridge.compile.piecewise import PieceContext, PiecewiseBackend, is_tracing_only, tracing_only
from compilation_bridge.compile.plan import CompilePlan, make_plan
from compilation_bridge.compile.split import SplitItem, split_graph
from compilation_bridge.compile.trace_record import TraceRecord, input_meta
from compilation_bridge.settings import (
    INDUCTOR_CACHE_DIR_ENV,
    compiled_code_env,
    get_settings,
    inductor_cache_dir_setting,
    set_inductor_variables,
)
from compilation_bridge.vllm_config import CompilationMode, CUDAGraphMode, Range

logger = logging.getLogger(__name__)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def check_inductor_cache_dir() -> None:
    """Inductor writes its own cache too; it must lie under the allowed roots like ours. Inductor's
    default outside the roots moves to `<cache home>/inductor`; a folder the operator chose does not."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir, default_cache_dir

    settings = get_settings()
    # Inductor writes its default into the variable on first use, so "unset" and "the default" are one.
    where = inductor_cache_dir_setting() or default_cache_dir()
    if os.path.abspath(where) == os.path.abspath(default_cache_dir()) and not settings.is_path_allowed(where):
        where = str(settings.cache_home() / "inductor")
        set_inductor_variables({INDUCTOR_CACHE_DIR_ENV: where}, replace=True)
    check_allowed(where, "Inductor's cache directory (TORCHINDUCTOR_CACHE_DIR)")
    cache_dir()


class VllmBackend:
    def __init__(
        self,
        plan: CompilePlan,
        *,
        prefix: str = "backbone",
        extra_factors: dict[str, Any] | None = None,
        traced_files: Sequence[str] = (),
        counter: CompilationCounter | None = None,
        device: torch.device | None = None,
        custom_op_counts: tuple[Counter[str], Counter[str]] | None = None,
    ) -> None:
        if plan.mode != CompilationMode.VLLM_COMPILE:
            raise ValueError(f"VllmBackend compiles mode VLLM_COMPILE only, got {plan.mode.name}")
        self.plan = plan
        self.prefix = prefix
        self.extra_factors = dict(extra_factors or {})
        self.traced_files = sorted(set(traced_files))
        self.counter = counter or CompilationCounter()
        self.device = device or torch.device("cpu")
        self.custom_op_counts = custom_op_counts
        self.compiler_manager = CompilerManager(
            plan.backend, plan.compilation_config.compile_cache_save_format, self.counter
        )
        # A copy: nothing the backend adds may end up in the user's config (vLLM deep-copies too).
        self.inductor_config = dict(plan.inductor_compile_config)
        self.partition_ops = plan.splitting_ops if plan.use_inductor_graph_partition else None
        self.prepared = False
        self.called = False
        self._trace_started = time.time()
        self.cache_status = "not prepared"
        self.disable_cache = True  # until `prepare` finds a cache directory to use
        self.piecewise_graphs: list[SplitItem] = []
        self.piecewise_backends: list[PiecewiseBackend] = []
        # What a bundle needs from the trace (compile/trace_record.py), and whether one was used or saved.
        self.trace_record = TraceRecord()
        self._bundle_status = BundleStatus()
        self._trace_output: Any = None  # the graph's output in the trace, until the forward returns

    # -- hashes and directories ------------------------------------------------------------------

    def _config_hash(self) -> str:
        cc = self.plan.compilation_config
        saved = cc.enabled_custom_ops, cc.disabled_custom_ops
        if self.custom_op_counts is not None:
            # The hash includes the custom-op counters (as vLLM's). They accumulate when one config
            # builds several models; hashing this model's own counts gives the value a fresh process
            # would compute, so compiling the same config and model again finds the same cache.
            cc.enabled_custom_ops, cc.disabled_custom_ops = self.custom_op_counts
        try:
            config = self.plan.vllm_config if self.plan.vllm_config is not None else cc
            own = config.compute_hash()
        finally:
            cc.enabled_custom_ops, cc.disabled_custom_ops = saved
        factors = {"config": own, "plan": self.plan.factors(), **self.extra_factors}
        return _sha256(json.dumps(factors, sort_keys=True, default=str))

    def _code_hash(self) -> str:
        cc = self.plan.compilation_config
        files = sorted(set(self.traced_files) | set(cc.traced_files))
        content = []
        for path in files:
            content.append(path)
            if path == "<string>":
                continue
            try:
                content.append(Path(path).read_text())
            except OSError:
                logger.warning("Failed to read file %s", path)
        cc.traced_files.clear()
        return _sha256("\n".join(content))

    def prepare(self) -> None:
        """Compute the hashes and the cache directory, check every path, write the cache metadata."""
        if self.prepared:
            return
        plan, cc = self.plan, self.plan.compilation_config
        env = compiled_code_env()  # the settings that change compiled code, as written
        self.hashes = {
            "env": env,
            "config_hash": self._config_hash(),
            "code_hash": self._code_hash(),
            "compiler_hash": self.compiler_manager.compute_hash(),
        }
        disable_cache = not is_compile_cache_enabled(self.inductor_config)
        cache_dir = cc.cache_dir
        if not cache_dir:
            factors = [_sha256(json.dumps(env, sort_keys=True))] + [
                self.hashes[k] for k in ("config_hash", "code_hash", "compiler_hash")
            ]
            cache_dir = str(get_settings().cache_home() / "torch_compile_cache" / _sha256(str(factors))[:10])
        resolved = check_allowed(cache_dir, "cache_dir")
        if plan.debug_dump_dir is not None:
            check_allowed(plan.debug_dump_dir, "debug_dump_path")
        if plan.backend == "inductor":
            check_inductor_cache_dir()
        # Made folder by folder without following a symlink: one planted below cache_dir is refused.
        local = make_dirs(resolved / f"rank_{plan.rank}_{plan.dp_rank}" / self.prefix)
        self.local_cache_dir = str(local)
        # vLLM also writes cache_dir back; we do not, so one config can compile several models safely.
        cc.local_cache_dir = self.local_cache_dir
        usable = self._check_factors(local)
        self.disable_cache = disable_cache = disable_cache or not usable
        fresh = self.cache_status == "new"
        self.compiler_manager.initialize_cache(self.local_cache_dir, disable_cache, fresh=fresh)
        self.prepared = True

    def _check_factors(self, local: Path) -> bool:
        """Write cache_key_factors.json, or refuse a cache directory that was made for other factors.

        A factors file without this worker's MAC counts as absent: it is rewritten and whatever index
        the folder holds is not read (status "new")."""
        meta = local / "cache_key_factors.json"
        stored = read_authenticated(meta)
        if stored is None:
            write_authenticated(meta, json.dumps(self.hashes, indent=2, sort_keys=True).encode())
            self.cache_status = "new"
            return True
        try:
            same = json.loads(stored) == json.loads(json.dumps(self.hashes))
        except ValueError:
            same = False
        if not same:
            logger.warning(
                "cache directory %s was made for another model or config; its cache is not used", local
            )
            self.cache_status = "mismatch: cache disabled (cache_key_factors.json differs)"
            return False
        self.cache_status = "reused"
        return True

    # -- the Dynamo backend ----------------------------------------------------------------------

    def __call__(self, graph: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        self.prepare()
        assert not self.called, "VllmBackend can only be called once"
        cc = self.plan.compilation_config
        bump(self.counter, "num_graphs_seen")
        dynamo_time = time.time() - self._trace_started
        cc.compilation_time += dynamo_time
        progress.emit("dynamo_traced", seconds=round(dynamo_time, 6))

        self.trace_record = TraceRecord.of_graph(graph)
        fx_split_ops = [] if self.plan.use_inductor_graph_partition else self.plan.splitting_ops
        self.split_gm, self.piecewise_graphs = split_graph(graph, fx_split_ops)
        bump(self.counter, "num_piecewise_graphs_seen", len(self.piecewise_graphs))
        names = [item.submod_name for item in self.piecewise_graphs if not item.is_splitting_graph]
        progress.emit("graph_split", num_pieces=len(self.piecewise_graphs), num_compiled_pieces=len(names))

        fake_values = [n.meta["example_value"] for n in graph.graph.find_nodes(op="placeholder")]
        fake_args = [
            fake_values[i] if isinstance(t, torch.Tensor) else t for i, t in enumerate(example_inputs)
        ]
        _PiecewiseCompileInterpreter(self.split_gm, names, self).run(*fake_args)

        self._write_graphs(graph)
        self.called = True
        return self._call_split_graph

    def _call_split_graph(self, *args: Any) -> Any:
        out = self.split_gm(*args)
        if is_tracing_only():
            self._trace_output = out  # to learn Dynamo's epilogue once the forward returns (`trace`)
        return out

    def trace(self, forward: Callable[..., Any], example_args: tuple[Any, ...]) -> None:
        """Call `forward` (torch.compile with this backend) once, so that Dynamo traces and calls this
        backend, compiling no piece; then record how the forward's result is made from the graph's."""
        self._trace_started = time.time()
        with tracing_only(), torch.no_grad():
            forward_out = forward(*example_args)
        graph_out, self._trace_output = self._trace_output, None
        self.trace_record = self.trace_record.with_result(example_args, forward_out, graph_out)

    def install_piece(self, split_gm: torch.nn.Module, name: str, piece: PiecewiseBackend) -> None:
        """Put `piece` where the split graph calls submodule `name` (in a CUDA graph wrapper if asked)."""
        plan = self.plan
        runnable: Callable[..., Any] = piece
        if (
            plan.cudagraph_mode.has_piecewise_cudagraphs()
            and not plan.use_inductor_graph_partition
            and self.device.type == "cuda"
        ):
            runnable = CUDAGraphWrapper(piece, CUDAGraphMode.PIECEWISE, self.counter)
        split_gm.__dict__[name] = runnable

    def _write_graphs(self, graph: fx.GraphModule) -> None:
        src = "from __future__ import annotations\nimport torch\n" + self.split_gm.print_readable(
            print_output=False
        )
        src = src.replace("<lambda>", "GraphModule")
        path = Path(self.local_cache_dir) / "computation_graph.py"
        if read_authenticated(path) is None:
            write_authenticated(path, src.encode())
        dump = self.plan.debug_dump_dir
        if dump is not None:
            dump = make_dirs(dump)
            atomic_write_text(dump / "before_split.py", graph.print_readable(print_output=False))
            atomic_write_text(dump / "after_split.py", src)

    def piece_context(self) -> PieceContext:
        """What each piece of this backend's split graph needs of it (compile/piecewise.py)."""
        plan = self.plan
        return PieceContext(
            list(plan.compile_ranges), plan.compile_sizes, self._compile_piece, self.end_monitoring
        )

    def _compile_piece(
        self,
        graph: fx.GraphModule,
        inputs: list[Any],
        *,
        compile_range: Range,
        graph_index: int,
        num_graphs: int,
    ) -> Callable[..., Any]:
        return self.compiler_manager.compile(
            graph,
            inputs,
            self.inductor_config,
            self.plan.compilation_config,
            compile_range=compile_range,
            graph_index=graph_index,
            num_graphs=num_graphs,
            partition_ops=self.partition_ops,
        )

    def end_monitoring(self) -> None:
        progress.emit("all_ranges_compiled", compilation_time_s=self.plan.compilation_config.compilation_time)
        if not self._bundle_status.used:
            self._save_bundle()  # every range and size is ready: the next process need not trace

    # -- bundles (compile/bundle.py) -------------------------------------------------------------

    def bundle_dir(self) -> Path:
        """Where this backend's bundle lies: its cache directory, when the cache is on."""
        if self.disable_cache:
            raise Unavailable(f"the compile cache is off ({self.cache_status})")
        return Path(self.local_cache_dir)

    def made_for(self, example_args: tuple[Any, ...]) -> MadeFor:
        """What a bundle must have been made for to be used here with these arguments."""
        return self._made_for(input_meta(example_args))

    def _made_for(self, meta: list[list[Any]]) -> MadeFor:
        shapes = self.plan.compilation_config.dynamic_shapes_config
        guards = "shape guards kept" if shapes is not None and shapes.evaluate_guards else GUARDS_DROPPED
        hashes = json.loads(json.dumps(self.hashes))  # as a bundle's manifest holds them
        return MadeFor(torch.__version__, hashes, guards, self.compiler_manager.compiler.name, meta)

    def capture_bundle(self) -> Bundle:
        """This compile as a bundle (once every piece has every range and size), or `Unavailable`."""
        trace, pieces = self.trace_record, self.piecewise_backends
        made_for = self._made_for(trace.input_meta or [])
        return Bundle.capture(self.split_gm, pieces, trace, made_for, self.compiler_manager)

    def _save_bundle(self) -> None:
        """Capture and write the bundle; failures are reported or logged, never raised."""
        try:
            directory = self.bundle_dir()  # first: with the cache off, the reason is that
            self.capture_bundle().write(directory)
            self._bundle_status.saved = True
        except Unavailable as e:
            self._bundle_status.reason = f"no bundle saved: {e}"
        except Exception as e:  # a bundle is an optimisation: failing to write it must not fail a run
            logger.warning("bundle not written: %s", e)

    def adopt(self, bundle: Bundle, module: torch.nn.Module, *, started: float) -> BundledForward:
        """Install `bundle` in place of a trace (no Dynamo, no split, no compile) and return the forward
        that calls it for `module`. All or nothing: on any error this backend is as it was.
        `started` (a `time.perf_counter()`) is when reading the bundle began: the warm start's time."""
        gm, artifacts = bundle.unpack()
        bundle.seed_vec_isa()
        with progress.step("warm_start", num_pieces=len(bundle.pieces)):
            pieces = [
                self._adopt_piece(gm, record, len(bundle.pieces), artifacts[record.index])
                for record in bundle.pieces
            ]
        forward = bundle.forward(gm, module)
        loaded = sum(len(artifacts[p.piecewise_compile_index]) for p in pieces)
        # as vLLM (and the traced path): a piece obtained from a cache counts as a backend compilation
        bump(self.counter, "num_backend_compilations", sum(len(p.range_entries) for p in pieces))
        bump(self.counter, "num_compiled_artifacts_loaded", loaded)
        for piece in pieces:
            self.install_piece(gm, piece.submod_name, piece)
        self.piecewise_backends, self.split_gm, self.called = pieces, gm, True
        compiled = {piece.submod_name for piece in pieces}
        self.piecewise_graphs = [
            SplitItem(name, i, name not in compiled, child)  # type: ignore[arg-type]
            for i, (name, child) in enumerate(gm.named_children())
        ]
        seconds = time.perf_counter() - started
        self._bundle_status = BundleStatus(True, "loaded the bundle: no trace, no split, no compile", seconds)
        self.plan.compilation_config.compilation_time += seconds
        return forward

    def _adopt_piece(
        self, gm: fx.GraphModule, record: PieceRecord, num_pieces: int, artifacts: dict[str, bytes]
    ) -> PiecewiseBackend:
        """The piece `record` names, with every range and size loaded from the bundle's artifacts."""
        graph = getattr(gm, record.name)
        context, shapes, tensors = self.piece_context(), record.sym_shape_indices, record.tensor_indices
        piece = PiecewiseBackend(graph, record.index, num_pieces, shapes, context, tensors, record.name)
        if sorted(range_key(r) for r in piece.range_entries) != record.ranges:
            raise Unavailable("bundle was made for other compile ranges or sizes")
        compiler = self.compiler_manager.compiler
        for compile_range, entry in piece.range_entries.items():
            # an eager piece is its own graph; any other is its artifact, loaded from the verified bytes
            eager = compiler.name == "eager"
            entry.runnable = (
                graph if eager else compiler.load_bytes(artifacts[range_key(compile_range)], graph)
            )
            entry.compiled = True
        piece.to_be_compiled_ranges.clear()
        loaded = sum(len(artifacts.get(key, b"")) for key in record.ranges)
        progress.emit(
            "piece_loaded", piece=record.index, num_pieces=num_pieces, ranges=record.ranges, bytes=loaded
        )
        return piece

    def decline(self, error: Exception) -> None:
        """No bundle is used (today's path compiles); `error` is why, for the report and the caller."""
        if isinstance(error, Unavailable):
            self._bundle_status.reason = str(error)
        else:
            logger.warning("bundle unusable, compiling instead: %s", error)
            self._bundle_status.reason = f"bundle unusable: {type(error).__name__}: {error}"
        progress.emit("warm_start_declined", reason=self._bundle_status.reason)

    # -- what a compiled model asks ---------------------------------------------------------------

    @property
    def has_pieces(self) -> bool:
        """Whether the graph is split (traced or adopted) into at least one compiled piece."""
        return bool(self.piecewise_backends)

    def range_for(self, num_tokens: int) -> Range | None:
        """The compile range (or exact size) a call with `num_tokens` tokens runs in; None when no
        piece covers it (or there is no piece yet). Every piece dispatches alike: the first answers."""
        if not self.piecewise_backends:
            return None
        entry = self.piecewise_backends[0].find_range_for_shape(num_tokens)
        return None if entry is None else entry.compile_range

    def summary(self) -> dict[str, Any]:
        """What `CompiledModel.report()` says of this backend: pieces, ranges compiled, cache, bundle."""
        return {
            "num_pieces": len(self.piecewise_graphs),
            "num_compiled_pieces": sum(not p.is_splitting_graph for p in self.piecewise_graphs),
            "compiled_ranges": self._compiled_ranges(),
            "local_cache_dir": getattr(self, "local_cache_dir", None),
            "cache_enabled": not self.disable_cache,
            "cache_status": self.cache_status,
            "warm_start": self._bundle_status.as_dict(),
        }

    def _compiled_ranges(self) -> list[list[int]]:
        # the last piece compiles a range last: what it has, every piece has
        if not self.piecewise_backends:
            return []
        entries = self.piecewise_backends[-1].range_entries.values()
        return sorted([e.compile_range.start, e.compile_range.end] for e in entries if e.compiled)


class _PiecewiseCompileInterpreter(torch.fx.Interpreter):
    """Runs the split graph on fake inputs and swaps each compiled submodule for a PiecewiseBackend."""

    def __init__(self, module: fx.GraphModule, compile_submod_names: list[str], backend: VllmBackend) -> None:
        super().__init__(module)
        from torch._guards import detect_fake_mode

        fake_mode = detect_fake_mode()
        assert fake_mode is not None, "the split graph is propagated inside Dynamo's fake mode"
        self.fake_mode = fake_mode
        self.compile_submod_names = compile_submod_names
        self.backend = backend
        self.extra_traceback = False

    def run(self, *args: Any) -> Any:  # type: ignore[override]
        fake_args = [self.fake_mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in args]
        with self.fake_mode, enable_python_dispatcher():
            return super().run(*fake_args)

    def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
        assert isinstance(target, str)
        output = super().call_module(target, args, kwargs)
        if target in self.compile_submod_names:
            from torch.fx.experimental.symbolic_shapes import is_symbolic

            index = self.compile_submod_names.index(target)
            sym_shape_indices = [i for i, x in enumerate(args) if isinstance(x, torch.SymInt)]
            tensor_indices = [
                i
                for i, x in enumerate(args)
                if isinstance(x, torch.Tensor) and x.dim() and is_symbolic(x.shape[0])
            ]
            piece = PiecewiseBackend(
                self.fetch_attr(target),
                index,
                len(self.compile_submod_names),
                sym_shape_indices,
                self.backend.piece_context(),
                tensor_indices,
                target,
            )
            self.backend.piecewise_backends.append(piece)
            self.backend.install_piece(self.module, target, piece)
            bump(self.backend.counter, "num_piecewise_capturable_graphs_seen")
        return output


def vllm_backend_factory(vllm_config: Any) -> VllmBackend:
    """What `CompilationConfig.init_backend(vllm_config)` returns for VLLM_COMPILE: a new VllmBackend."""
    return VllmBackend(make_plan(vllm_config))
