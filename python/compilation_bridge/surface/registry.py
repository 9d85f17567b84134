"""Mechanics of the allowlist: exposed modules (name -> lazily loaded attributes) and exposed types.

Rules (docs/design.md, The allowlist):
- modules: only registered names resolve; an unknown module is refused before anything is imported;
- attributes of an exposed type: its public fields, properties and methods, the underscore names listed
  for it, and the fixed protocol dunders; a name that does not exist fails with Python's own
  AttributeError text; one that exists but is not exposed gets a PermissionError;
- any other object held by ref answers only the protocol dunders;
- `set_attr` writes a dataclass field of one config instance, never a class, an enum or a module.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import operator
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# The protocol set SnakeBridge itself sends (inspect/to_string, Enumerable on refs). They are called the
# way Python's builtins call them, so they also work on class objects.
PROTOCOL_DUNDERS: dict[str, Callable[..., Any]] = {
    "__repr__": repr,
    "__str__": str,
    "__len__": len,
    "__iter__": iter,
    "__next__": next,
    "__getitem__": operator.getitem,
    "__contains__": operator.contains,
}
# Implementation packages whose public members are the exposed API (never builtins or enum internals).
IMPLEMENTATION_ROOT = "compilation_bridge."


# Fields vLLM lets anyone assign but the security model keeps for the worker: compilation reads and
# hashes every file named in `traced_files`, so a caller who could set it could make the worker read any
# file (or /dev/zero).
WORKER_OWNED_FIELDS = frozenset({"traced_files"})


def exposure_error(message: str) -> PermissionError:
    """The name exists but the surface does not expose it (the allowlist of the security model).

    A plain PermissionError on purpose: Elixir maps that type to `Snakepit.Error.PermissionError`.
    """
    return PermissionError(message)


@dataclass(frozen=True)
class ExposedType:
    """A class whose instances (and the class itself) callers may use.

    `names`, when given, is the complete list of public names (for types whose public surface is
    smaller than their Python API); otherwise the public members are found by introspection.
    `settable` marks config dataclasses whose fields `set_attr` may write. `refused` maps names of the real
    class that this worker cannot serve to why (the refusal says it, instead of "no attribute").
    """

    cls: type
    extra_names: frozenset[str] = frozenset()
    names: frozenset[str] | None = None
    settable: bool = False
    refused: Mapping[str, str] = field(default_factory=dict)

    def exposed_names(self) -> frozenset[str]:
        names = set(self.names) if self.names is not None else _public_members(self.cls)
        return frozenset(names | self.extra_names)

    def field_names(self) -> frozenset[str]:
        """The fields `set_attr` may write: every public dataclass field vLLM lets a caller assign,
        `init=False` ones included (`compilation_time`, the custom-op counters, ...), except those in
        `WORKER_OWNED_FIELDS`."""
        if not dataclasses.is_dataclass(self.cls):
            return frozenset()
        names = (f.name for f in dataclasses.fields(self.cls) if not f.name.startswith("_"))
        return frozenset(names) - WORKER_OWNED_FIELDS


def _public_members(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith(IMPLEMENTATION_ROOT):
            names.update(name for name in vars(klass) if not name.startswith("_"))
    if dataclasses.is_dataclass(cls):
        names.update(f.name for f in dataclasses.fields(cls) if not f.name.startswith("_"))
    if issubclass(cls, enum.Enum):
        names.update(("name", "value"), cls.__members__)
    return names


@dataclass
class ExposedModule:
    """A module name callers may use, whose attributes come from `loader` on first use.

    `loader` returns {attribute name: object}; `types` returns the ExposedType entries of the classes
    it exposes. `known_elsewhere` lists names the real module has but this worker does not expose
    (refused clearly instead of "no attribute").
    """

    name: str
    loader: Callable[[], dict[str, Any]]
    types: Callable[[], Iterable[ExposedType]] = tuple
    known_elsewhere: frozenset[str] = frozenset()
    # For modules whose functions report progress: returns the hook, a context manager factory taking
    # a callback that the work calls with each event dict on its own thread.
    progress: Callable[[], Any] | None = None
    # Extra start-up work for `Surface.load_module(..., warm=True)` (compile: import Dynamo/Inductor).
    warm: Callable[[], None] | None = None
    # The package its classes come from: an object of such a class restored from the ref store by a
    # worker that never loaded this module loads it then, so the object's type is known as exposed.
    implements: str = ""
    # Added to the refusal of any name of this module the worker does not expose: where to go instead.
    refusal_hint: str = ""
    _attrs: dict[str, Any] | None = field(default=None, repr=False)


class Surface:
    def __init__(
        self,
        modules: Iterable[ExposedModule],
        value_check: Callable[[str, Any], None] = lambda name, value: None,
        unexposed_hint: Callable[[str], str] = lambda name: "",
    ) -> None:
        # value_check(field, value) vets what set_attr writes (caps on sizes; validators do not run).
        self._value_check = value_check
        # unexposed_hint(module) adds to the refusal of a module that is not exposed: where to go instead.
        self._unexposed_hint = unexposed_hint
        self._modules = {module.name: module for module in modules}
        self._types: dict[type, ExposedType] = {}
        self._names: dict[type, frozenset[str]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------ modules
    def module_names(self) -> list[str]:
        return sorted(self._modules)

    def _module_attrs(self, module_name: Any) -> tuple[ExposedModule, dict[str, Any]]:
        module = self._modules.get(module_name) if isinstance(module_name, str) else None
        if module is None:
            hint = self._unexposed_hint(module_name) if isinstance(module_name, str) else ""
            raise ImportError(
                f"module {module_name!r} is not exposed by compilation-bridge "
                f"(exposed modules: {', '.join(self.module_names())}){hint}"
            )
        if module._attrs is None:
            with self._lock:
                if module._attrs is None:
                    attrs = module.loader()
                    for exposed in module.types():
                        self._types[exposed.cls] = exposed
                    module._attrs = attrs
        return module, module._attrs

    def load_module(self, name: str, warm: bool = False) -> None:
        """Import an exposed module now (the worker warms the config model up once it is ready);
        `warm` also runs the module's own warm-up, if it has one."""
        module, _attrs = self._module_attrs(name)
        if warm and module.warm is not None:
            module.warm()

    def progress_hook(self, module_name: Any) -> Any:
        module, _attrs = self._module_attrs(module_name)
        return module.progress() if module.progress is not None else None

    def module_attr(self, module_name: Any, attr: Any) -> Any:
        module, attrs = self._module_attrs(module_name)
        _check_name(attr)
        if attr in attrs:
            return attrs[attr]
        if attr in module.known_elsewhere or attr.startswith("_"):
            raise exposure_error(
                f"{module.name}.{attr} is not exposed by compilation-bridge{module.refusal_hint}"
            )
        raise AttributeError(f"module {module.name!r} has no attribute {attr!r}{module.refusal_hint}")

    # ------------------------------------------------------------------------------------ objects
    def exposure(self, obj: Any) -> ExposedType | None:
        """The exposure entry of an instance or of an exposed class itself."""
        exposed = self._known_exposure(obj)
        if exposed is None and self._load_modules_for(obj if isinstance(obj, type) else type(obj)):
            exposed = self._known_exposure(obj)
        return exposed

    def _known_exposure(self, obj: Any) -> ExposedType | None:
        exposed = self._types.get(type(obj))
        if exposed is None and isinstance(obj, type):
            exposed = self._types.get(obj)
        return exposed

    def _load_modules_for(self, cls: type) -> bool:
        """Load the not yet loaded modules implemented where `cls` comes from; whether any was."""
        pending = [
            module
            for module in self._modules.values()
            if module._attrs is None and module.implements and cls.__module__.startswith(module.implements)
        ]
        for module in pending:
            self._module_attrs(module.name)
        return bool(pending)

    def _exposed_names(self, exposed: ExposedType) -> frozenset[str]:
        names = self._names.get(exposed.cls)
        if names is None:
            names = self._names[exposed.cls] = exposed.exposed_names()
        return names

    def get_attr(self, obj: Any, name: Any) -> Any:
        _check_name(name)
        exposed = self.exposure(obj)
        if exposed is not None and name in self._exposed_names(exposed):
            return getattr(obj, name)
        if exposed is not None and name in exposed.refused:
            what = obj.__name__ if isinstance(obj, type) else type(obj).__name__
            raise exposure_error(
                f"{what}.{name} is not served by compilation-bridge: {exposed.refused[name]}"
            )
        self._refuse(obj, name)

    def method(self, obj: Any, name: Any) -> Callable[..., Any]:
        _check_name(name)
        dunder = PROTOCOL_DUNDERS.get(name)
        if dunder is not None:
            return lambda *args: dunder(obj, *args)
        return self.get_attr(obj, name)

    def set_attr(self, obj: Any, name: Any, value: Any) -> None:
        _check_name(name)
        exposed = self.exposure(obj)
        if exposed is None or isinstance(obj, type) or not exposed.settable:
            what = obj.__name__ if isinstance(obj, type) else type(obj).__name__
            raise exposure_error(f"attributes of {what} cannot be set through compilation-bridge")
        if name not in exposed.field_names():
            if _exists(obj, name):
                raise exposure_error(f"{type(obj).__name__}.{name} is not a field that can be set")
            self._refuse(obj, name)  # Python's own "has no attribute" text
        self._value_check(name, value)
        setattr(obj, name, value)

    def _refuse(self, obj: Any, name: str) -> Any:
        """Python's own AttributeError when the name does not exist, a refusal when it is hidden."""
        if not _exists(obj, name):
            if isinstance(obj, type):
                raise AttributeError(f"type object {obj.__name__!r} has no attribute {name!r}")
            raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
        what = obj.__name__ if isinstance(obj, type) else type(obj).__name__
        raise exposure_error(f"{what}.{name} is not exposed by compilation-bridge")


def _exists(obj: Any, name: str) -> bool:
    """Whether `name` exists on `obj`, without running property getters or other descriptors."""
    try:
        inspect.getattr_static(obj, name)
        return True
    except AttributeError:
        pass
    if isinstance(obj, type) or getattr(type(obj), "__getattr__", None) is not None:
        return False  # a dynamic __getattr__ could run arbitrary code: treat the name as absent
    try:
        getattr(obj, name)  # only plain attribute lookup is left; nothing user-defined runs
    except AttributeError:
        return False
    return True


def _check_name(name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"attribute name must be a string, not {type(name).__name__}")
