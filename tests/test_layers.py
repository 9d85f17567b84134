"""The package's layers (docs/design.md, "Layers"): imports run downward only, and the worker never
imports its harness (`testing/`, `bench/`). Every import counts, also those inside functions."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import compilation_bridge

PACKAGE = Path(compilation_bridge.__file__).parent

# Bottom to top. A module may import from its own room and the rooms below it.
LAYERS: list[set[str]] = [
    {"__init__", "settings", "settings_catalog", "safe_files", "remote_cache", "busy", "observability"},
    {"vllm_config"},
    {"compile"},
    {"surface"},
    {"refs"},  # the objects callers hold between calls, and the store every worker serves them from
    {"protocol"},
    {"worker"},  # the lifetime owner: builds, starts and stops what a transport serves
    {"transport"},
    {"testing"},  # drives workers from outside, as Snakepit does: not part of the worker
    {"bench"},
    {"elixir_gen"},  # writes the Elixir stub's API from the surface: a tool, not part of the worker
    {"commands"},
    {"cli"},
    {"__main__"},
]
WORKER = {
    "__init__",
    "settings",
    "safe_files",
    "busy",
    "observability",
    "vllm_config",
    "compile",
    "surface",
    "refs",
    "protocol",
    "worker",
    "transport",
}
HARNESS = {"testing", "bench"}
# The one sanctioned way in: the surface loads the test hooks, by name and only when an operator
# switches them on (COMPILATION_BRIDGE_TEST_HOOKS).
HARNESS_DOORS = {("compilation_bridge.surface.catalog", "compilation_bridge.testing.hooks")}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _rank(room: str) -> int:
    return next(i for i, rooms in enumerate(LAYERS) if room in rooms)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imported(node: ast.AST) -> list[str]:
    """The modules an import statement imports (none for any other node)."""
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        # `from a.b import c` imports the module a.b.c when there is one, else names of a.b
        names = [f"{node.module}.{alias.name}" for alias in node.names]
        return [name if _is_module(name) else node.module for name in names]
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return []


def _imports() -> Iterator[tuple[str, str]]:
    """(importer, imported module) for every import of compilation_bridge inside the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        if "generated" in path.parts:
            continue
        importer = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for name in _imported(node):
                if name.split(".")[0] == "compilation_bridge":
                    yield importer, name


def test_every_room_has_a_layer() -> None:
    rooms = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }
    known = set().union(*LAYERS)
    assert rooms <= known, f"give these a layer: {sorted(rooms - known)}"


def test_imports_run_downward() -> None:
    upward = sorted(
        f"{importer} imports {imported}"
        for importer, imported in _imports()
        if _rank(_room(imported)) > _rank(_room(importer)) and (importer, imported) not in HARNESS_DOORS
    )
    assert not upward, "\n".join(upward)


def test_the_worker_never_imports_its_harness() -> None:
    leaks = sorted(
        f"{importer} imports {imported}"
        for importer, imported in _imports()
        if _room(importer) in WORKER and _room(imported) in HARNESS
        if (importer, imported) not in HARNESS_DOORS
    )
    assert not leaks, "\n".join(leaks)


def _every_import(tree: ast.Module, type_only: bool) -> Iterator[str]:
    """Modules a module imports anywhere, inside functions too (a lazy import is still a dependency);
    `if TYPE_CHECKING:` blocks count when `type_only` is true."""
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        type_checking = isinstance(node, ast.If) and isinstance(node.test, ast.Name)
        if type_checking and node.test.id == "TYPE_CHECKING" and not type_only:  # type: ignore[attr-defined]
            pending += node.orelse  # type: ignore[attr-defined]
            continue
        yield from _imported(node)
        pending += ast.iter_child_nodes(node)


def test_no_module_imports_itself_back() -> None:
    """No circles, type-only ones included, except in vllm_config/: it mirrors vLLM's own files, whose
    type-only back-references (`VllmConfig` under TYPE_CHECKING in compilation.py) it keeps."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "generated" not in path.parts:
            name = _module_name(path)
            tree = ast.parse(path.read_text(), str(path))
            imported = _every_import(tree, type_only=_room(name) != "vllm_config")
            graph[name] = {m for m in imported if m.startswith("compilation_bridge.")}
    cycles = []
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            module, trail = stack.pop()
            for nxt in graph.get(module, ()):
                if nxt == start:
                    cycles.append(" -> ".join([*trail, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert not cycles, "\n".join(sorted(cycles))
