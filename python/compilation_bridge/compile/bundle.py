"""Bundles: VLLM_COMPILE's whole result as one value, saved once and loaded without Dynamo.

A `Bundle` is plain data, as vLLM's `VllmSerializableFunction` (`vllm/compilation/caching.py`) is: what it
was made for (`MadeFor`: torch version, the cache hashes, the guards, the compiler, the inputs' dtypes and
ranks), how to call it (where each graph input comes from, how the result is made), the pieces, and a
verified payload of bytes (the split graph and each piece's compiled artifact for each range and size).
`Bundle.capture(...)` makes one from a finished compile; `write` puts it in the cache directory as
`bundle.json` and `bundle.pkl`, both through `bundle_files.write_verified`; `Bundle.read(directory,
made_for)` gives it back only when its bytes are the ones written and it was made for what this process
has. The backend installs a bundle with `adopt` (compile/backend.py); nothing here touches a backend.

A fresh process with the same config and model thus builds its forward from the bundle: no Dynamo trace,
no split, no fake-tensor pass and no Inductor compile. Dynamo's guards are dropped in VLLM_COMPILE
(vLLM's `guard_filter_fn`), so calling the split graph directly is what Dynamo's code would do; where
guards are kept (`evaluate_guards`), or anything recorded differs, the process takes today's path and
`report()["warm_start"]` says why.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import pickle
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch.fx as fx
from torch import nn

from compilation_bridge.compile import bundle_files
from compilation_bridge.compile.compiler import CompilerManager
from compilation_bridge.compile.piecewise import PiecewiseBackend
from compilation_bridge.compile.trace_record import NotReplayable, TraceRecord
from compilation_bridge.vllm_config import Range

BUNDLE_FORMAT = 1
MANIFEST = "bundle.json"
PAYLOAD = "bundle.pkl"
GUARDS_DROPPED = "dropped"

Artifacts = dict[int, dict[str, bytes]]  # piece index -> range key -> the compiled artifact's bytes


class Unavailable(Exception):
    """The bundle cannot be made or used; the message is the reason `report()` gives."""


@dataclasses.dataclass
class BundleStatus:
    """Whether this compile used a bundle and saved one: `report()["warm_start"]`."""

    used: bool = False
    reason: str = "not tried"
    seconds: float | None = None
    saved: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class MadeFor:
    """What a bundle is valid for; a process uses one only when its own is the same."""

    torch_version: str
    hashes: dict[str, Any]  # as JSON reads them back, so that a captured and a read bundle compare equal
    guards: str
    compiler: str
    input_meta: list[list[Any]]


@dataclasses.dataclass(frozen=True)
class PieceRecord:
    """One compiled piece: which submodule of the split graph it replaces and how it finds its size."""

    index: int
    name: str
    sym_shape_indices: list[int]
    tensor_indices: list[int]
    ranges: list[str]

    @classmethod
    def of(cls, piece: PiecewiseBackend) -> PieceRecord:
        ranges = sorted(range_key(r) for r in piece.range_entries)
        name, index = piece.submod_name, piece.piecewise_compile_index
        return cls(index, name, piece.sym_shape_indices, piece.dynamic_tensor_indices, ranges)


def range_key(compile_range: Range) -> str:
    return f"{compile_range.start}_{compile_range.end}"


@dataclasses.dataclass(frozen=True)
class Bundle:
    made_for: MadeFor
    inputs: list[Any]  # where each input of Dynamo's graph comes from (trace_record.py)
    output: str
    pieces: list[PieceRecord]
    vec_isa: dict[str, Any] | None
    payload: bytes = dataclasses.field(repr=False)  # pickled {"graph": ..., "artifacts": Artifacts}

    # -- making one ------------------------------------------------------------------------------

    @classmethod
    def capture(
        cls,
        split_gm: fx.GraphModule,
        pieces: Sequence[PiecewiseBackend],
        trace: TraceRecord,
        made_for: MadeFor,
        compiler: CompilerManager,
    ) -> Bundle:
        """The bundle of a compile whose every piece has every range and size; `Unavailable` says why
        there is none."""
        try:
            trace.check_complete()
        except NotReplayable as e:
            raise Unavailable(str(e)) from e
        if made_for.guards != GUARDS_DROPPED:
            raise Unavailable("evaluate_guards keeps Dynamo's shape guards, which only Dynamo can check")
        artifacts = {p.piecewise_compile_index: _artifact_bytes(compiler, p) for p in pieces}
        payload = {"graph": _clean_split_graph(split_gm), "artifacts": artifacts}
        captured = cls(
            made_for,
            trace.inputs or [],
            trace.output or "",
            [PieceRecord.of(p) for p in pieces],
            _vec_isa_record(),
            pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL),
        )
        # through JSON and back, as `read` sees it: a bundle and the same bundle read back are equal
        return _from_manifest(json.loads(json.dumps(captured._manifest())), captured.payload)

    def write(self, directory: Path) -> None:
        """The payload first: a manifest never names bytes that are not there yet."""
        bundle_files.write_verified(directory / PAYLOAD, self.payload)
        manifest = json.dumps(self._manifest(), indent=1, sort_keys=True).encode()
        bundle_files.write_verified(directory / MANIFEST, manifest)

    def _manifest(self) -> dict[str, Any]:
        return {
            "format": BUNDLE_FORMAT,
            **dataclasses.asdict(self.made_for),
            "inputs": self.inputs,
            "output": self.output,
            "pieces": [dataclasses.asdict(p) for p in self.pieces],
            "payload_sha256": bundle_files.digest(self.payload),
            "vec_isa": self.vec_isa,
        }

    # -- reading one -----------------------------------------------------------------------------

    @classmethod
    def read(cls, directory: Path, made_for: MadeFor) -> Bundle:
        """The bundle in `directory` if it was made for `made_for`; else `Unavailable` with the reason.
        The payload is read only once the manifest matches."""
        manifest = _read_manifest(directory)
        _check_made_for(manifest, made_for)
        try:
            payload = bundle_files.read_verified(directory / PAYLOAD)
        except bundle_files.UnverifiedArtifact as e:
            raise Unavailable(f"bundle not verified: {e}") from e
        if bundle_files.digest(payload) != manifest.get("payload_sha256"):
            raise Unavailable("bundle payload is not the one its manifest names")
        return _from_manifest(manifest, payload)

    # -- using one -------------------------------------------------------------------------------

    def unpack(self) -> tuple[fx.GraphModule, Artifacts]:
        """A new split graph (its submodules plain FX graphs) and the artifacts, each call its own copy."""
        # Safe to unpickle: a bundle's payload is either this process's own or verified by `read`.
        unpacked = pickle.loads(self.payload)
        return unpacked["graph"], unpacked["artifacts"]

    def forward(self, graph: fx.GraphModule, module: nn.Module) -> BundledForward:
        """The forward that calls `graph` (this bundle's split graph, its pieces installed) as Dynamo's
        code called the traced one, for `module`."""
        template, slots = _slots(self.inputs, module)
        return BundledForward(graph, template, slots, self.output == "single")

    def seed_vec_isa(self) -> bool:
        """Skip Inductor's once-per-process ISA probe (a child Python per ISA, about 1 s) when the process
        that made the bundle probed a CPU with the same flags and every ISA passed: the bundle's kernels
        were built for those ISAs, so a load gains nothing from probing them again. Anything else probes."""
        from torch._inductor import config
        from torch._inductor import cpu_vec_isa as v

        recorded = self.vec_isa
        if not recorded or v.valid_vec_isa_list.cache_info().currsize:
            return False
        claimed = _claimed_isas()
        if claimed is None or recorded.get("claimed") != claimed or recorded.get("valid") != claimed:
            return False
        with config.patch({"cpp.vec_isa_ok": True}):
            v.valid_vec_isa_list()
        return True


class BundledForward:
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


# -- capturing ----------------------------------------------------------------------------------------


def _clean_split_graph(split_gm: fx.GraphModule) -> fx.GraphModule:
    """The split graph with its own FX submodules (the live one holds PiecewiseBackends)."""
    graph = fx.Graph()
    graph.output(graph.graph_copy(split_gm.graph, {}))  # a copy: the live graph keeps its owner
    return fx.GraphModule(dict(split_gm.named_children()), graph)


def _artifact_bytes(compiler: CompilerManager, piece: PiecewiseBackend) -> dict[str, bytes]:
    out = {}
    for compile_range in piece.range_entries:
        try:
            path = compiler.artifact_file(compile_range, piece.piecewise_compile_index)
            if path is None:
                continue  # the piece's graph is its runnable: nothing to store
            out[range_key(compile_range)] = bundle_files.read_sealed(path)
        except (LookupError, bundle_files.UnverifiedArtifact) as e:
            raise Unavailable(str(e)) from e
    return out


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


# -- reading ------------------------------------------------------------------------------------------


def _read_manifest(directory: Path) -> dict[str, Any]:
    if not (directory / MANIFEST).exists():
        raise Unavailable("no bundle yet (one is written once every range and size has compiled)")
    try:
        manifest = json.loads(bundle_files.read_verified(directory / MANIFEST))
    except bundle_files.UnverifiedArtifact as e:
        raise Unavailable(f"bundle not verified: {e}") from e
    except ValueError as e:
        raise Unavailable(f"bundle manifest unreadable: {e}") from e
    if manifest.get("format") != BUNDLE_FORMAT:
        raise Unavailable(f"bundle format {manifest.get('format')!r}, this worker reads {BUNDLE_FORMAT}")
    return manifest


def _check_made_for(manifest: dict[str, Any], wanted: MadeFor) -> None:
    """Everything the bundle was made for must be what this process has; else say what differs."""
    if manifest.get("torch_version") != wanted.torch_version:
        raise Unavailable(
            f"bundle made with torch {manifest.get('torch_version')}, this process has {wanted.torch_version}"
        )
    if manifest.get("hashes") != wanted.hashes:
        raise Unavailable("bundle made for another config, code or compiler (cache hashes differ)")
    if manifest.get("guards") != GUARDS_DROPPED or wanted.guards != GUARDS_DROPPED:
        raise Unavailable("evaluate_guards keeps Dynamo's shape guards, which only Dynamo can check")
    if manifest.get("input_meta") != wanted.input_meta:
        raise Unavailable("the model's inputs differ from the bundle's (dtype, rank or device)")
    if manifest.get("compiler") != wanted.compiler:
        raise Unavailable("bundle made with another compiler")


def _from_manifest(manifest: dict[str, Any], payload: bytes) -> Bundle:
    made_for = MadeFor(**{f.name: manifest[f.name] for f in dataclasses.fields(MadeFor)})
    pieces = [PieceRecord(**record) for record in manifest["pieces"]]
    return Bundle(made_for, manifest["inputs"], manifest["output"], pieces, manifest["vec_isa"], payload)


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
