"""Compiler adaptors (Inductor standalone, eager) and the CompilerManager with its disk cache.

Cache layout, as vLLM's: `<local_cache_dir>/vllm_compile_cache.py` maps
`((start, end), piece_index, compiler_name)` to `(artifact_key, artifact_path)`, and each artifact is a
file (or, in the "unpacked" format, a directory) named `artifact_compile_range_<start>_<end>_subgraph_<i>`.

Departure from vLLM 0.14 (which writes the index once every range and size has compiled): each artifact
is written as soon as it exists and the index is rewritten right after, both by write-to-temp-and-rename.
A fresh process therefore reuses a partial warm-up, and a crash or a failed compile leaves either no
entry or a complete one; an index entry whose artifact is missing or unreadable is dropped, not trusted.

The index and every artifact (file or "unpacked" folder) carry a MAC (`compile/authenticated.py`); an
index or artifact without a valid one is treated as absent and compiled again, never loaded.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import logging
import os
import pprint
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

import torch
import torch.fx as fx

from compilation_bridge.compile import progress
from compilation_bridge.compile.authenticated import is_sealed, read_authenticated, seal, write_authenticated
from compilation_bridge.compile.counters import CompilationCounter, bump
from compilation_bridge.compile.files import atomic_save
from compilation_bridge.settings import compile_cache_disabled, inductor_max_autotune
from compilation_bridge.vllm_config import Range
from compilation_bridge.vllm_config import env as vllm_env

logger = logging.getLogger(__name__)

CACHE_INDEX = "vllm_compile_cache.py"


class InductorCompileError(RuntimeError):
    """Inductor failed on one piece for one compile range; nothing was cached for it."""


class UnauthenticatedEntryError(RuntimeError):
    """A cached artifact without this worker's MAC: compiled again, never loaded."""


def is_compile_cache_enabled(inductor_config: dict[str, Any]) -> bool:
    """vLLM's rule, with this project's switch beside vLLM's `VLLM_DISABLE_COMPILE_CACHE`.

    vLLM's variable is read only when ours is off, and as vLLM reads it: a value that is no integer
    raises ValueError here, during the compile (see `vllm_config.env.disable_compile_cache`)."""
    return (
        not compile_cache_disabled()
        and not vllm_env.disable_compile_cache()
        and not torch._inductor.config.force_disable_caches
        and not inductor_config.get("force_disable_caches", False)
    )


GRAPH_PASS_KEYS = (
    "post_grad_custom_pre_pass",
    "post_grad_custom_post_pass",
    "joint_custom_pre_pass",
    "joint_custom_post_pass",
)


def with_graph_passes(config: dict[str, Any], compile_range: Range) -> dict[str, Any]:
    """The config's passes as Inductor `CustomGraphPass`es whose uuid includes the compile range.

    Inductor caches (and `standalone_compile` can save) a graph only when every custom pass is a
    `CustomGraphPass`; the config's `InductorPass` objects have a `uuid()` but not the type. The range in
    the uuid gives every range its own Inductor cache key, as vLLM's pass manager does, so the passes
    run for every range instead of being skipped by a cache hit from another range.
    """
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class _GraphPass(CustomGraphPass):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __call__(self, graph: torch.fx.graph.Graph) -> None:
            self.inner(graph)

        def uuid(self) -> Any:
            return (self.inner.uuid(), str(compile_range))

    out = dict(config)
    for key in GRAPH_PASS_KEYS:
        value = out.get(key)
        if value is not None and hasattr(value, "uuid"):
            out[key] = _GraphPass(value)
    return out


class CompilerInterface:
    name = "interface"

    def initialize_cache(self, cache_dir: str, disable_cache: bool = False) -> None:
        self.cache_dir = cache_dir
        self.disable_cache = disable_cache

    def compute_hash(self) -> str:
        return ""

    def compile(
        self,
        graph: fx.GraphModule,
        example_inputs: list[Any],
        compiler_config: dict[str, Any],
        compile_range: Range,
        key: str,
        counter: CompilationCounter,
    ) -> tuple[Callable[..., Any], Any | None]:
        raise NotImplementedError

    def load(self, handle: Any, graph: fx.GraphModule) -> Callable[..., Any]:
        raise NotImplementedError

    def load_bytes(self, data: bytes, graph: fx.GraphModule) -> Callable[..., Any]:
        raise NotImplementedError


class EagerAdaptor(CompilerInterface):
    """Runs the piece's FX graph as it is: nothing to compile, nothing to cache (as vLLM)."""

    name = "eager"

    def compile(
        self,
        graph: fx.GraphModule,
        example_inputs: list[Any],
        compiler_config: dict[str, Any],
        compile_range: Range,
        key: str,
        counter: CompilationCounter,
    ) -> tuple[Callable[..., Any], Any | None]:
        bump(counter, "num_eager_compiles")
        return graph, None


class InductorStandaloneAdaptor(CompilerInterface):
    """`torch._inductor.standalone_compile` per piece and range; artifacts saved with `CompiledArtifact`."""

    name = "inductor_standalone"

    def __init__(self, save_format: str) -> None:
        self.save_format: Literal["binary", "unpacked"] = (
            "unpacked" if save_format == "unpacked" else "binary"
        )

    def compute_hash(self) -> str:
        from torch._inductor.codecache import CacheBase, torch_key

        factors = [CacheBase.get_system(), torch_key()]
        return hashlib.md5(str(factors).encode(), usedforsecurity=False).hexdigest()[:10]

    def compile(
        self,
        graph: fx.GraphModule,
        example_inputs: list[Any],
        compiler_config: dict[str, Any],
        compile_range: Range,
        key: str,
        counter: CompilationCounter,
    ) -> tuple[Callable[..., Any], Any | None]:
        from torch._inductor import standalone_compile

        bump(counter, "num_inductor_compiles")
        config = with_graph_passes(compiler_config, compile_range)
        if compile_range.is_single_size():
            # vLLM turns autotuning on for exact sizes; on CPU it costs minutes per piece, so it is off
            # unless the operator asks for it.
            tune = inductor_max_autotune()
            config.setdefault("max_autotune", tune)
            config.setdefault("coordinate_descent_tuning", tune)
        torch._functorch.config.bundled_autograd_cache = False
        dynamic: Literal["from_example_inputs", "from_graph"] = (
            "from_example_inputs" if compile_range.is_single_size() else "from_graph"
        )
        compiled = standalone_compile(
            graph, example_inputs, dynamic_shapes=dynamic, options={"config_patches": config}
        )
        path = os.path.join(self.cache_dir, key)
        if not self.disable_cache and is_compile_cache_enabled(compiler_config):
            atomic_save(path, lambda tmp: compiled.save(path=tmp, format=self.save_format))
            seal(path)
            bump(counter, "num_compiled_artifacts_saved")
            return compiled, (key, path)
        return compiled, None

    def load(self, handle: Any, graph: fx.GraphModule) -> Callable[..., Any]:
        from torch._inductor.compile_fx import graph_returns_tuple

        key, _stored_path = handle
        # The artifact is looked up next to the index, never at a path read from the file: a moved cache
        # keeps working and an edited index cannot point outside the cache directory.
        path = os.path.join(self.cache_dir, os.path.basename(key))
        # Checked right before loading: torch unpickles the artifact and imports its code.
        if not is_sealed(path):
            raise UnauthenticatedEntryError(f"{path} carries no valid MAC of this worker")
        artifact = torch._inductor.CompiledArtifact.load(path=path, format=self.save_format)
        if self.save_format == "unpacked":
            # Loading an unpacked artifact makes Inductor write into its folder (its cache while
            # loading); this process made those files, so they are sealed with the rest.
            seal(path)
        returns_tuple = graph_returns_tuple(graph)

        def run(*args: Any) -> Any:
            out = artifact(*args)
            return out if returns_tuple else out[0]

        return run

    def load_bytes(self, data: bytes, graph: fx.GraphModule) -> Callable[..., Any]:
        """An artifact saved in the "binary" format, from bytes the caller has verified (a bundle's):
        the same steps as `CompiledArtifact.load`, which would read the file again itself."""
        from torch._inductor.codecache import torch_key
        from torch._inductor.compile_fx import graph_returns_tuple
        from torch._inductor.standalone_compile import CacheCompiledArtifact
        from torch.utils._appending_byte_serializer import BytesReader

        reader = BytesReader(data)
        if reader.read_bytes() != CacheCompiledArtifact.CACHE_HEADER or reader.read_bytes() != torch_key():
            raise ValueError("not a CacheCompiledArtifact of this torch build")
        key = reader.read_str()
        artifact_bytes = reader.read_bytes()
        if not reader.is_finished():
            raise ValueError("trailing bytes after the artifact")
        torch.compiler.load_cache_artifacts(artifact_bytes)
        artifact = CacheCompiledArtifact._load_impl(contextlib.nullcontext(), key)
        returns_tuple = graph_returns_tuple(graph)

        def run(*args: Any) -> Any:
            out = artifact(*args)
            return out if returns_tuple else out[0]

        return run


def make_compiler(backend: str, save_format: str) -> CompilerInterface:
    if backend == "inductor":
        return InductorStandaloneAdaptor(save_format)
    if backend == "eager":
        return EagerAdaptor()
    raise ValueError(f"Invalid backend for piecewise compilation: {backend}")


CacheKey = tuple[Range, int, str]


class CompilerManager:
    """Compiles (or loads) one piece for one compile range, and keeps the on-disk index current."""

    def __init__(self, backend: str, save_format: str, counter: CompilationCounter) -> None:
        self.compiler = make_compiler(backend, save_format)
        self.counter = counter
        self.cache: dict[CacheKey, Any] = {}
        self.disable_cache = True
        self.cache_dir = ""
        self.range_start_time = 0.0

    def compute_hash(self) -> str:
        return self.compiler.compute_hash()

    def initialize_cache(self, cache_dir: str, disable_cache: bool, fresh: bool = False) -> None:
        """`fresh`: the folder's cache_key_factors.json was just (re)written, so an index found there
        belongs to no verified factors and is not read."""
        self.disable_cache = disable_cache
        self.cache_dir = cache_dir
        self.index_path = os.path.join(cache_dir, CACHE_INDEX)
        self.compiler.initialize_cache(cache_dir, disable_cache)
        if not disable_cache and not fresh:
            self.cache = self._read_index()

    def _read_index(self) -> dict[CacheKey, Any]:
        data = read_authenticated(self.index_path)
        if data is None:
            return {}
        try:
            raw = ast.literal_eval(data.decode())
            entries = {}
            for (range_tuple, index, name), handle in raw.items():
                start, end = range_tuple
                if not all(isinstance(x, int) for x in (start, end, index)) or not isinstance(name, str):
                    raise TypeError(f"bad cache key {(range_tuple, index, name)!r}")
                entries[(Range(start=start, end=end), index, name)] = handle
            return entries
        except Exception as e:
            logger.warning("ignoring unreadable compile cache index %s: %s", self.index_path, e)
            return {}

    def _write_index(self) -> None:
        # Written with plain tuples so that the file does not depend on how Range prints.
        data = {((r.start, r.end), i, n): h for (r, i, n), h in self.cache.items()}
        text = pprint.PrettyPrinter(indent=4).pformat(data) + "\n"
        write_authenticated(self.index_path, text.encode())

    def artifact_file(self, compile_range: Range, graph_index: int) -> str | None:
        """Where the artifact compiled for this range and piece lies, as one file (what a bundle copies);
        None for the eager compiler, whose piece is its own graph. LookupError when there is no such
        file: not in the index, or saved in the "unpacked" format, which makes a folder."""
        if self.compiler.name == "eager":
            return None
        if getattr(self.compiler, "save_format", "binary") != "binary":
            raise LookupError("artifacts saved in the 'unpacked' format are directories, not bundled")
        handle = self.cache.get((compile_range, graph_index, self.compiler.name))
        if handle is None:
            raise LookupError(f"piece {graph_index} for {compile_range} is not in the compile cache")
        # beside the index, never at a path read from it (as `load`)
        return os.path.join(self.cache_dir, os.path.basename(handle[0]))

    def load(
        self, graph: fx.GraphModule, graph_index: int, compile_range: Range
    ) -> Callable[..., Any] | None:
        key = (compile_range, graph_index, self.compiler.name)
        if self.disable_cache or key not in self.cache:
            return None
        try:
            loaded = self.compiler.load(self.cache[key], graph)
        except Exception as e:
            logger.warning("cache entry %s is unusable, compiling instead: %s", key, e)
            del self.cache[key]
            return None
        bump(self.counter, "num_compiled_artifacts_loaded")
        return loaded

    @contextlib.contextmanager
    def compile_context(self, splitting_ops: list[str] | None) -> Iterator[None]:
        """Inductor graph partition: Inductor splits at the splitting ops instead of the FX split."""
        if not splitting_ops:
            yield
            return
        saved = list(torch._inductor.config.custom_should_partition_ops)
        torch._inductor.config.custom_should_partition_ops = splitting_ops
        try:
            yield
        finally:
            torch._inductor.config.custom_should_partition_ops = saved

    def compile(
        self,
        graph: fx.GraphModule,
        example_inputs: list[Any],
        inductor_config: dict[str, Any],
        compilation_config: Any,
        compile_range: Range,
        graph_index: int,
        num_graphs: int,
        partition_ops: list[str] | None = None,
    ) -> Callable[..., Any]:
        if graph_index == 0:
            self.range_start_time = time.time()
        bump(self.counter, "num_backend_compilations")
        event = {
            "range": [compile_range.start, compile_range.end],
            "piece": graph_index,
            "num_pieces": num_graphs,
            "compiler": self.compiler.name,
        }
        with progress.step("compile", **event) as result:
            compiled = self.load(graph, graph_index, compile_range)
            result["source"] = "cache" if compiled is not None else "compiler"
            if compiled is None:
                compiled = self._compile(
                    graph, example_inputs, inductor_config, compile_range, graph_index, partition_ops
                )
        if graph_index == num_graphs - 1:
            # as vLLM: from the start of piece 0 to the end of the last piece, running time included
            elapsed = time.time() - self.range_start_time
            compilation_config.compilation_time += elapsed
            progress.emit("range_compiled", range=event["range"], seconds=round(elapsed, 6))
        return compiled

    def _compile(
        self,
        graph: fx.GraphModule,
        example_inputs: list[Any],
        inductor_config: dict[str, Any],
        compile_range: Range,
        graph_index: int,
        partition_ops: list[str] | None,
    ) -> Callable[..., Any]:
        key = f"artifact_compile_range_{compile_range.start}_{compile_range.end}_subgraph_{graph_index}"
        try:
            with self.compile_context(partition_ops):
                compiled, handle = self.compiler.compile(
                    graph, example_inputs, inductor_config, compile_range, key, self.counter
                )
        except Exception as e:
            raise InductorCompileError(
                f"{self.compiler.name} failed to compile piece {graph_index} for compile range "
                f"{compile_range}: {type(e).__name__}: {e}"
            ) from e
        if handle is not None:
            self.cache[(compile_range, graph_index, self.compiler.name)] = handle
            bump(self.counter, "num_cache_entries_updated")
            self._write_index()
        return compiled
