"""Warm starts that trace nothing: VLLM_COMPILE's whole result saved once, loaded without Dynamo.

Once every piece has compiled (or loaded) every compile range and size, the backend writes a bundle to its
cache directory: `warm_start.json` (what the bundle was made for and how to call it: torch version, the
cache hashes, the guards, where each graph input comes from, the output's shape, the pieces) and
`warm_start.pkl` (the split graph and each piece's compiled artifact for each range and size). Both go
through `aot.write_verified`; a later process reads them through `aot.read_verified`, so nothing from the
cache directory is unpickled unless its bytes are the ones written.

A fresh process with the same config and model then builds its forward from the bundle: no Dynamo trace,
no split, no fake-tensor pass and no Inductor compile. Dynamo's guards are dropped in VLLM_COMPILE
(vLLM's `guard_filter_fn`), so calling the split graph directly is what Dynamo's code would do; where
guards are kept (`evaluate_guards`), or anything recorded differs, the process takes today's path and
`report()["warm_start"]` says why.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import pickle
import platform
import sys
import time
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.fx as fx
from torch import nn

from compilation_bridge.compile import aot, progress
from compilation_bridge.compile.compiler import CompilerManager
from compilation_bridge.compile.counters import CompilationCounter, bump
from compilation_bridge.compile.piecewise import PieceContext, PiecewiseBackend
from compilation_bridge.compile.plan import CompilePlan
from compilation_bridge.compile.split import SplitItem
from compilation_bridge.vllm_config import Range

logger = logging.getLogger(__name__)

BUNDLE_FORMAT = 1
MANIFEST = "warm_start.json"
PAYLOAD = "warm_start.pkl"


class Bundled(Protocol):
    """What a bundle is saved from and loaded into: the backend (compile/backend.py's `VllmBackend`),
    named by the state this module reads and sets, so that this module does not import its caller."""

    plan: CompilePlan
    compiler_manager: CompilerManager
    counter: CompilationCounter
    hashes: dict[str, Any]
    local_cache_dir: str
    disable_cache: bool
    cache_status: str
    called: bool
    warm_start: WarmStart
    split_gm: fx.GraphModule
    piecewise_graphs: list[SplitItem]
    piecewise_backends: list[PiecewiseBackend]
    aot_inputs: list[Any] | None
    aot_output: str | None
    aot_input_meta: list[list[Any]] | None
    aot_error: str | None

    def piece_context(self) -> PieceContext: ...

    def install_piece(self, split_gm: nn.Module, name: str, piece: PiecewiseBackend) -> None: ...


class Unavailable(Exception):
    """The bundle cannot be used; the message is the reason `report()` gives."""


@dataclasses.dataclass
class WarmStart:
    used: bool = False
    reason: str = "not tried"
    seconds: float | None = None
    saved: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# -- what a trace records -------------------------------------------------------------------------


def _describe_source(source: Any) -> list[Any]:
    """A Dynamo source as plain JSON (["local", name], ["attr", base, member], ...)."""
    from torch._dynamo import source as s

    if isinstance(source, s.NNModuleSource):
        return _describe_source(source.base)  # marks how Dynamo treats the module, names the same object
    if isinstance(source, s.LocalSource):
        return ["local", source.local_name]
    if isinstance(source, s.AttrSource):
        return ["attr", _describe_source(source.base), source.member]
    if isinstance(source, (s.DictGetItemSource, s.GetItemSource)) and isinstance(source.index, (str, int)):
        return ["item", _describe_source(source.base), source.index]
    if isinstance(source, s.TensorPropertySource) and source.prop == s.TensorProperty.SIZE:
        return ["size", _describe_source(source.base), source.idx]
    raise Unavailable(f"graph input from a {type(source).__name__} ({source.name}) cannot be replayed")


def describe_inputs(graph: fx.GraphModule) -> list[Any]:
    """Where each input of Dynamo's graph comes from, in placeholder order."""
    described = []
    for node in graph.graph.find_nodes(op="placeholder"):
        grapharg = node.meta.get("grapharg")
        if grapharg is None or grapharg.source is None:
            raise Unavailable(f"graph input {node.name} has no source")
        described.append(_describe_source(grapharg.source))
    return described


def output_structure(forward_out: Any, graph_out: Any) -> str:
    """How the forward's return value is made from the graph's outputs (Dynamo's epilogue)."""
    if not isinstance(graph_out, (tuple, list)):
        raise Unavailable("the graph did not return a tuple")
    if isinstance(forward_out, torch.Tensor) and len(graph_out) == 1 and graph_out[0] is forward_out:
        return "single"
    same = type(forward_out) is tuple and len(forward_out) == len(graph_out)
    if same and all(a is b for a, b in zip(forward_out, graph_out, strict=True)):
        return "tuple"
    raise Unavailable("the forward's return value is not the graph's output as it is")


# -- saving -----------------------------------------------------------------------------------------


def _clean_split_graph(backend: Bundled) -> fx.GraphModule:
    """The split graph with its own FX submodules (the live one holds PiecewiseBackends)."""
    gm = backend.split_gm
    graph = fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))  # a copy: the live graph keeps its owner
    return fx.GraphModule(dict(gm.named_children()), graph)


def _artifact_bytes(backend: Bundled, piece: PiecewiseBackend) -> dict[str, bytes]:
    manager = backend.compiler_manager
    out = {}
    for compile_range in piece.range_entries:
        key = (compile_range, piece.piecewise_compile_index, manager.compiler.name)
        if manager.compiler.name == "eager":
            continue  # the piece's graph is its runnable: nothing to store
        handle = manager.cache.get(key)
        if handle is None:
            raise Unavailable(f"piece {key[1]} for {compile_range} is not in the compile cache")
        try:
            out[_range_key(compile_range)] = aot.read_sealed(Path(manager.cache_dir) / Path(handle[0]).name)
        except aot.UnverifiedArtifact as e:
            raise Unavailable(str(e)) from e
    return out


def _range_key(compile_range: Range) -> str:
    return f"{compile_range.start}_{compile_range.end}"


def _guards(backend: Bundled) -> str:
    shapes = backend.plan.compilation_config.dynamic_shapes_config
    return "shape guards kept" if shapes is not None and shapes.evaluate_guards else "dropped"


def save(backend: Bundled) -> None:
    """Write the bundle (once every range and size is compiled); failures are logged, never raised."""
    state = backend.warm_start
    try:
        _save(backend)
        state.saved = True
    except Unavailable as e:
        if not state.used:
            state.reason = f"no bundle saved: {e}"
    except Exception as e:  # a bundle is an optimisation: failing to write it must not fail a run
        logger.warning("warm-start bundle not written: %s", e)


def _check_saveable(backend: Bundled) -> None:
    """Raise `Unavailable` when this backend's result cannot be replayed without Dynamo."""
    if backend.disable_cache:
        raise Unavailable("the compile cache is off")
    if backend.aot_error is not None:
        raise Unavailable(backend.aot_error)
    if _guards(backend) != "dropped":
        raise Unavailable("evaluate_guards keeps Dynamo's shape guards, which only Dynamo can check")
    if getattr(backend.compiler_manager.compiler, "save_format", "binary") != "binary":
        raise Unavailable("artifacts saved in the 'unpacked' format are directories, not bundled")
    if backend.aot_inputs is None or backend.aot_output is None:
        raise Unavailable("the trace recorded no input sources or output structure")


def _save(backend: Bundled) -> None:
    _check_saveable(backend)
    artifacts = {p.piecewise_compile_index: _artifact_bytes(backend, p) for p in backend.piecewise_backends}
    payload = pickle.dumps(
        {"graph": _clean_split_graph(backend), "artifacts": artifacts}, protocol=pickle.HIGHEST_PROTOCOL
    )
    local = Path(backend.local_cache_dir)
    payload_digest = aot.write_verified(local / PAYLOAD, payload)
    manifest = {
        "format": BUNDLE_FORMAT,
        "torch_version": torch.__version__,
        "hashes": backend.hashes,
        "guards": _guards(backend),
        "inputs": backend.aot_inputs,
        "input_meta": backend.aot_input_meta,
        "output": backend.aot_output,
        "compiler": backend.compiler_manager.compiler.name,
        "pieces": [_piece_record(p) for p in backend.piecewise_backends],
        "payload_sha256": payload_digest,
        "vec_isa": _vec_isa_record(),
    }
    aot.write_verified(local / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())


def _piece_record(piece: PiecewiseBackend) -> dict[str, Any]:
    return {
        "index": piece.piecewise_compile_index,
        "name": piece.submod_name,
        "sym_shape_indices": piece.sym_shape_indices,
        "tensor_indices": piece.dynamic_tensor_indices,
        "ranges": sorted(_range_key(r) for r in piece.range_entries),
    }


def input_meta(args: tuple[Any, ...]) -> list[list[Any]]:
    """What a caller's arguments must look like: dtype, rank and device of each tensor."""
    return [[str(a.dtype), a.dim(), a.device.type] for a in args if isinstance(a, torch.Tensor)]


def _claimed_isas() -> list[str] | None:
    """The vector ISAs this CPU claims (CPUID flags), in Inductor's order; None off x86-64 Linux."""
    from torch._inductor import cpu_vec_isa as v

    if sys.platform != "linux" or platform.machine() != "x86_64":
        return None
    flags = v.x86_isa_checker()
    return [str(isa) for isa in v.supported_vec_isa_list if all(f in flags for f in str(isa).split())]


def _vec_isa_record() -> dict[str, Any] | None:
    """What Inductor's ISA probe found in this process, if it ran (it never runs just for this)."""
    from torch._inductor import cpu_vec_isa as v

    claimed = _claimed_isas()
    if claimed is None or not v.valid_vec_isa_list.cache_info().currsize:
        return None
    return {"claimed": claimed, "valid": [str(isa) for isa in v.valid_vec_isa_list()]}


def seed_vec_isa(recorded: dict[str, Any] | None) -> bool:
    """Skip Inductor's once-per-process ISA probe (a child Python per ISA, about 1 s) when the process
    that made the bundle probed a CPU with the same flags and every ISA passed: the bundle's kernels were
    built for those ISAs, so a load gains nothing from probing them again. Anything else probes."""
    from torch._inductor import config
    from torch._inductor import cpu_vec_isa as v

    if not recorded or v.valid_vec_isa_list.cache_info().currsize:
        return False
    claimed = _claimed_isas()
    if claimed is None or recorded.get("claimed") != claimed or recorded.get("valid") != claimed:
        return False
    with config.patch({"cpp.vec_isa_ok": True}):
        v.valid_vec_isa_list()
    return True


# -- loading ----------------------------------------------------------------------------------------


def read_manifest(local: Path) -> dict[str, Any]:
    if not (local / MANIFEST).exists():
        raise Unavailable("no bundle yet (one is written once every range and size has compiled)")
    try:
        return json.loads(aot.read_verified(local / MANIFEST))
    except aot.UnverifiedArtifact as e:
        raise Unavailable(f"bundle not verified: {e}") from e
    except ValueError as e:
        raise Unavailable(f"bundle manifest unreadable: {e}") from e


def check_manifest(manifest: dict[str, Any], backend: Bundled, example_args: tuple[Any, ...]) -> None:
    """Everything the bundle was made for must be what this process has; else say what differs."""
    if manifest.get("format") != BUNDLE_FORMAT:
        raise Unavailable(f"bundle format {manifest.get('format')!r}, this worker reads {BUNDLE_FORMAT}")
    if manifest.get("torch_version") != torch.__version__:
        raise Unavailable(
            f"bundle made with torch {manifest.get('torch_version')}, this process has {torch.__version__}"
        )
    if manifest.get("hashes") != json.loads(json.dumps(backend.hashes)):
        raise Unavailable("bundle made for another config, code or compiler (cache hashes differ)")
    if manifest.get("guards") != "dropped" or _guards(backend) != "dropped":
        raise Unavailable("evaluate_guards keeps Dynamo's shape guards, which only Dynamo can check")
    if manifest.get("input_meta") != input_meta(example_args):
        raise Unavailable("the model's inputs differ from the bundle's (dtype, rank or device)")
    if manifest.get("compiler") != backend.compiler_manager.compiler.name:
        raise Unavailable("bundle made with another compiler")


def read_payload(local: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    try:
        data = aot.read_verified(local / PAYLOAD)
    except aot.UnverifiedArtifact as e:
        raise Unavailable(f"bundle not verified: {e}") from e
    if aot.digest(data) != manifest.get("payload_sha256"):
        raise Unavailable("bundle payload is not the one its manifest names")
    return pickle.loads(data)  # verified above: these are the bytes this worker wrote


class LoadedForward:
    """The forward rebuilt from a bundle: fills the graph's inputs from the call's arguments and the
    module's parameters, as Dynamo's generated code does, and calls the split graph."""

    traced = True

    def __init__(self, graph: fx.GraphModule, template: list[Any], slots: list[Any], single: bool) -> None:
        self.graph = graph
        self.template = template
        self.slots = slots  # (position, argument index, dimension or None)
        self.single = single

    def __call__(self, *args: Any) -> Any:
        flat = list(self.template)
        for position, index, dim in self.slots:
            flat[position] = args[index] if dim is None else args[index].shape[dim]
        out = self.graph(*flat)
        return out[0] if self.single else out


def _resolve_static(described: list[Any], module: nn.Module) -> Any:
    kind = described[0]
    if kind == "local":
        if described[1] != "self":
            raise Unavailable(f"graph input from local {described[1]!r}")
        return module
    base = _resolve_static(described[1], module)
    if kind == "attr":
        return getattr(base, described[2])
    if kind == "item":
        return base[described[2]]
    raise Unavailable(f"graph input of kind {kind!r} does not come from the module")


def _slots(inputs: list[Any], module: nn.Module) -> tuple[list[Any], list[Any]]:
    """The inputs known at load (parameters, buffers) and where each per-call input comes from."""
    names = list(inspect.signature(module.forward).parameters)
    template: list[Any] = []
    slots: list[Any] = []
    for position, described in enumerate(inputs):
        dim = None
        if described[0] == "size":
            dim, described = described[2], described[1]
        if described[0] == "local" and described[1] != "self":
            if described[1] not in names:
                raise Unavailable(f"graph input {described[1]!r} is not an argument of the forward")
            slots.append((position, names.index(described[1]), dim))
            template.append(None)
        elif dim is not None:
            template.append(_resolve_static(described, module).shape[dim])
        else:
            template.append(_resolve_static(described, module))
    return template, slots


def _install_pieces(backend: Bundled, manifest: dict[str, Any], payload: dict[str, Any]) -> None:
    gm: fx.GraphModule = payload["graph"]
    records = manifest["pieces"]
    for record in records:
        name, index = record["name"], record["index"]
        graph = getattr(gm, name)
        piece = PiecewiseBackend(
            graph,
            index,
            len(records),
            record["sym_shape_indices"],
            backend.piece_context(),
            record["tensor_indices"],
            name,
        )
        if sorted(_range_key(r) for r in piece.range_entries) != record["ranges"]:
            raise Unavailable("bundle was made for other compile ranges or sizes")
        for compile_range, entry in piece.range_entries.items():
            entry.runnable = _load_piece(backend, graph, payload["artifacts"][index], compile_range)
            entry.compiled = True
        piece.to_be_compiled_ranges.clear()
        backend.piecewise_backends.append(piece)
        backend.install_piece(gm, name, piece)
    compiled = {r["name"] for r in records}
    backend.piecewise_graphs = [
        SplitItem(name, i, name not in compiled, child)  # type: ignore[arg-type]
        for i, (name, child) in enumerate(gm.named_children())
    ]
    backend.split_gm = gm


def _load_piece(
    backend: Bundled, graph: fx.GraphModule, artifacts: dict[str, bytes], compile_range: Range
) -> Any:
    compiler = backend.compiler_manager.compiler
    # as vLLM (and today's path): a piece obtained from a cache counts as a backend compilation
    bump(backend.counter, "num_backend_compilations")
    if compiler.name == "eager":
        return graph
    loaded = compiler.load_bytes(artifacts[_range_key(compile_range)], graph)
    bump(backend.counter, "num_compiled_artifacts_loaded")
    return loaded


def load(backend: Bundled, module: nn.Module, example_args: tuple[Any, ...]) -> LoadedForward:
    """The forward from the bundle in the backend's cache directory, or `Unavailable` with the reason."""
    if backend.disable_cache:
        raise Unavailable(f"the compile cache is off ({backend.cache_status})")
    local = Path(backend.local_cache_dir)
    manifest = read_manifest(local)
    check_manifest(manifest, backend, example_args)
    payload = read_payload(local, manifest)
    seed_vec_isa(manifest.get("vec_isa"))
    with progress.step("warm_start", num_pieces=len(manifest["pieces"])):
        _install_pieces(backend, manifest, payload)
    template, slots = _slots(manifest["inputs"], module)
    backend.called = True
    return LoadedForward(backend.split_gm, template, slots, manifest["output"] == "single")


def try_load(backend: Bundled, module: nn.Module, example_args: tuple[Any, ...]) -> LoadedForward | None:
    """`load`, with every failure turned into the reason `report()` gives and today's path taken."""
    state = backend.warm_start
    start = time.perf_counter()
    counts_before = backend.counter.clone()
    try:
        forward = load(backend, module, example_args)
    except Exception as e:  # a damaged bundle must never stop the model from compiling
        if not isinstance(e, Unavailable):
            logger.warning("warm-start bundle unusable, compiling instead: %s", e)
        state.reason = str(e) if isinstance(e, Unavailable) else f"bundle unusable: {type(e).__name__}: {e}"
        _reset(backend, counts_before)
        return None
    state.used, state.reason = True, "loaded the bundle: no trace, no split, no compile"
    state.seconds = time.perf_counter() - start
    backend.plan.compilation_config.compilation_time += state.seconds
    return forward


def _reset(backend: Bundled, counts_before: CompilationCounter) -> None:
    """Forget a half-installed bundle, so that today's path starts from nothing."""
    backend.piecewise_backends = []
    backend.piecewise_graphs = []
    backend.called = False
    for field in dataclasses.fields(counts_before):
        setattr(backend.counter, field.name, getattr(counts_before, field.name))
