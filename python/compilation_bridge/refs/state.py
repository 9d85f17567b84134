"""A ref's state as bytes and back: JSON with explicit type tags, decoded only into allowlisted types.

Scalars are JSON; everything else is `{"t": tag, ...}`: containers (list, tuple, set, frozenset, dict,
Counter), paths, non-finite floats, the config model's classes, members of its enums, instances of its
dataclasses (every instance attribute, `init=False` fields and private ones included, so that equality,
`repr` and `compute_hash` come back exactly), and what extensions register (compiled models: see
refs/compiled.py). Objects are
rebuilt without running `__init__` or validators: the state is what the object was, not a request to
build one. An object seen twice within one state is written once and referred to (`same`), so shared
sub-objects stay shared. Nothing here imports or calls code named by the data: a class name that is not
in the allowlist is refused.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
import importlib
import math
import pkgutil
from collections import Counter
from collections.abc import Callable
from functools import cache
from pathlib import Path, PurePath
from typing import Any, NamedTuple

import orjson

FORMAT = 1
CONFIG_PACKAGE = "compilation_bridge.vllm_config"
_SPECIAL = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_SEQUENCES: dict[type, str] = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}


class Extension(NamedTuple):
    """A kind of object this format carries beyond data: `encode` returns its JSON-ready form (None when
    the object is not of its kind), `decode` rebuilds it."""

    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


_EXTENSIONS: dict[str, Extension] = {}
# class -> {field: derive(obj)}: fields a class computes from its others, stored as a marker while they
# hold exactly what `derive` gives (a caller may have set them to something else: then they are stored).
_DERIVED: dict[type, dict[str, Callable[[Any], Any]]] = {}
_DERIVED_TAG = "derived"


def register_extension(tag: str, encode: Callable[[Any], Any], decode: Callable[[Any], Any]) -> None:
    """Teach the format a kind of object (registered by the module that knows it, at its import)."""
    if tag in _DECODERS:
        raise ValueError(f"{tag!r} is a built-in tag of the ref state format")
    _EXTENSIONS[tag] = Extension(encode, decode)


def register_derived(cls: type, field: str, derive: Callable[[Any], Any]) -> None:
    """Do not store `cls.field` while it equals `derive(obj)`; decoding computes it again. Such fields
    can be large (a list as long as a size a caller sets): the state stays the size of the request."""
    _DERIVED.setdefault(cls, {})[field] = derive


class NotStorable(TypeError):
    """The object holds something this format does not carry (an iterator, a callable, ...)."""


class CorruptState(ValueError):
    pass


class HeldElsewhere(LookupError):
    """The ref's object is not data (an iterator, ...): it lives only in the worker that made it."""


def local_only(obj: Any, worker: str) -> bytes:
    """The state stored for an object that cannot be stored: which worker holds it, for the error."""
    return orjson.dumps({"format": FORMAT, "local": {"type": type(obj).__name__, "worker": worker}})


@cache
def allowed_types() -> dict[str, type]:
    """'module.QualName' -> class, for every dataclass and enum defined in the config model."""
    package = importlib.import_module(CONFIG_PACKAGE)
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(package.__path__, f"{CONFIG_PACKAGE}."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == info.name and _storable_class(value):
                found[type_name(value)] = value
    return found


@cache
def _allowed_names() -> dict[type, str]:
    """class -> its name, for the encoder (one dict lookup per object instead of formatting a name)."""
    return {cls: name for name, cls in allowed_types().items()}


def _storable_class(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum)


def type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# ---------------------------------------------------------------------------------------------- encode


def encode(obj: Any, alias: tuple[str, str] | None = None) -> bytes:
    """The state of `obj` (raises NotStorable when it holds anything this format does not carry).
    `alias`: (parent ref id, attribute) when the object is that attribute of another ref's object."""
    tree: dict[str, Any] = {"format": FORMAT, "value": _Encoder().value(obj)}
    if alias is not None:
        tree["alias"] = list(alias)
    try:
        return orjson.dumps(tree)
    except NotStorable:
        raise
    except (TypeError, AttributeError) as exc:  # integers beyond 64 bits (orjson), objects without a dict
        raise NotStorable(f"{type(exc).__name__}: {exc}") from None


class _Encoder:
    def __init__(self) -> None:
        self._seen: dict[int, int] = {}
        self._keep: list[Any] = []  # keeps ids valid while encoding

    def value(self, value: Any) -> Any:
        kind = type(value)
        if value is None or kind is str or kind is int or kind is bool:
            return value
        if kind is float:
            return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
        return self._other(value)

    def _other(self, value: Any) -> Any:
        if isinstance(value, type):  # a config class or enum itself (module_attr hands those out)
            return {"t": "class", "c": self._class(value)}
        if isinstance(value, enum.Enum):
            return {"t": "enum", "c": self._class(type(value)), "v": self.value(value.value)}
        if isinstance(value, PurePath):
            return {"t": "path", "v": str(value)}
        known = self._seen.get(id(value))
        if known is not None:
            return {"t": "same", "i": known}
        self._seen[id(value)] = len(self._seen)
        self._keep.append(value)
        return self._container(value)

    def _container(self, value: Any) -> Any:
        kind = type(value)
        if kind in _SEQUENCES:
            return {"t": _SEQUENCES[kind], "v": [self.value(item) for item in value]}
        if kind is dict or kind is Counter:
            pairs = [[self.value(k), self.value(v)] for k, v in value.items()]
            return {"t": "dict" if kind is dict else "counter", "v": pairs}
        if kind in _allowed_names():  # a config dataclass (classes and enums were handled before)
            value_of = self.value
            derived = _DERIVED.get(kind, {})
            attrs = {
                name: {"t": _DERIVED_TAG} if _is_derived(value, name, item, derived) else value_of(item)
                for name, item in vars(value).items()
            }
            return {"t": "obj", "c": _allowed_names()[kind], "v": attrs}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            raise NotStorable(f"{type_name(kind)} is not a config type")
        return self._extension(value)

    def _extension(self, value: Any) -> Any:
        for tag, extension in _EXTENSIONS.items():
            data = extension.encode(value)
            if data is not None:
                return {"t": tag, "v": data}
        raise NotStorable(f"a {type(value).__name__} cannot be stored")

    def _class(self, cls: type) -> str:
        name = _allowed_names().get(cls)
        if name is None:
            raise NotStorable(f"{type_name(cls)} is not a config type")
        return name


def _is_derived(obj: Any, name: str, value: Any, derived: dict[str, Callable[[Any], Any]]) -> bool:
    derive = derived.get(name)
    if derive is None or value is None:
        return False
    try:
        return bool(derive(obj) == value)
    except Exception:  # the other fields no longer derive it (a caller set them): store the value
        return False


# ---------------------------------------------------------------------------------------------- decode


def decode(state: bytes) -> Any:
    return decode_with_alias(state)[0]


def decode_with_alias(state: bytes) -> tuple[Any, tuple[str, str] | None]:
    """The object, and the (parent ref id, attribute) recorded by `encode` if any: one parse."""
    try:
        tree = orjson.loads(state)
    except orjson.JSONDecodeError as exc:
        raise CorruptState(f"not a ref state: {exc}") from None
    if isinstance(tree, dict) and tree.get("format") == FORMAT and isinstance(tree.get("local"), dict):
        held = tree["local"]
        raise HeldElsewhere(
            f"it is a {held.get('type')!s:.100}, which lives only in worker {held.get('worker')!s:.100} "
            "and cannot be restored on another"
        )
    if not isinstance(tree, dict) or tree.get("format") != FORMAT or "value" not in tree:
        raise CorruptState("not a ref state of this worker's format")
    try:
        return _Decoder().value(tree["value"]), _alias(tree.get("alias"))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise CorruptState(f"malformed ref state: {type(exc).__name__}: {exc}") from None


def _alias(alias: Any) -> tuple[str, str] | None:
    if alias is None:
        return None
    if not (isinstance(alias, list) and len(alias) == 2 and all(isinstance(x, str) for x in alias)):
        raise CorruptState("malformed alias in a ref state")
    return alias[0], alias[1]


class _Decoder:
    def __init__(self) -> None:
        self._objects: list[Any] = []

    def value(self, data: Any) -> Any:
        if data is None or type(data) in (str, int, float, bool):
            return data
        if not isinstance(data, dict):
            raise CorruptState(f"untagged {type(data).__name__} in a ref state")
        tag = data["t"]
        handler = _DECODERS.get(tag)
        if handler is not None:
            return handler(self, data)
        extension = _EXTENSIONS.get(tag) if isinstance(tag, str) else None
        if extension is None:
            raise CorruptState(f"unknown tag {tag!r} in a ref state")
        return self._register(extension.decode(data["v"]))

    def _register(self, obj: Any) -> Any:
        self._objects.append(obj)
        return obj

    def _placeholder(self) -> int:
        self._objects.append(_PENDING)
        return len(self._objects) - 1

    def same(self, data: dict[str, Any]) -> Any:
        obj = self._objects[data["i"]]
        if obj is _PENDING:
            raise CorruptState("a ref state refers to an object inside itself")
        return obj

    def list(self, data: dict[str, Any]) -> builtins.list[Any]:
        out: builtins.list[Any] = self._register([])
        out.extend(self.value(item) for item in _items(data))
        return out

    def frozen(self, data: dict[str, Any], kind: Callable[[builtins.list[Any]], Any]) -> Any:
        # Reserved before the items, as the encoder numbers objects in the order it first meets them.
        slot = self._placeholder()
        self._objects[slot] = kind([self.value(item) for item in _items(data)])
        return self._objects[slot]

    def mapping(self, data: dict[str, Any]) -> Any:
        out = self._register(Counter() if data["t"] == "counter" else {})
        for pair in _items(data):
            key, value = pair
            out[self.value(key)] = self.value(value)
        return out

    def obj(self, data: dict[str, Any]) -> Any:
        cls = _allowed(data["c"])
        if issubclass(cls, enum.Enum):
            raise CorruptState(f"{data['c']} is an enum, not an object")
        obj = self._register(cls.__new__(cls))
        attrs = data["v"]
        if not isinstance(attrs, dict):
            raise CorruptState("object attributes must be a map")
        # Straight into the instance dict: no validator, __setattr__ or __post_init__ runs again.
        derived = [name for name, item in attrs.items() if item == {"t": _DERIVED_TAG}]
        vars(obj).update({name: self.value(item) for name, item in attrs.items() if name not in derived})
        for name in derived:
            derive = _DERIVED.get(cls, {}).get(name)
            if derive is None:
                raise CorruptState(f"{data['c']}.{name} is not a derived field")
            vars(obj)[name] = derive(obj)
        return obj

    def enum_member(self, data: dict[str, Any]) -> Any:
        cls = _allowed(data["c"])
        if not issubclass(cls, enum.Enum):
            raise CorruptState(f"{data['c']} is not an enum")
        return cls(self.value(data["v"]))


_PENDING = object()


def _items(data: dict[str, Any]) -> list[Any]:
    items = data["v"]
    if not isinstance(items, list):
        raise CorruptState(f"{data['t']} items must be a list")
    return items


def _allowed(name: Any) -> type:
    cls = allowed_types().get(name) if isinstance(name, str) else None
    if cls is None:
        raise CorruptState(f"{name!r} is not a config type this worker restores")
    return cls


def _special_float(_decoder: _Decoder, data: dict[str, Any]) -> float:
    if data["v"] not in _SPECIAL:
        raise CorruptState(f"bad float {data['v']!r}")
    return _SPECIAL[data["v"]]


_DECODERS: dict[str, Callable[[_Decoder, dict[str, Any]], Any]] = {
    "float": _special_float,
    "path": lambda _d, data: Path(data["v"]),
    "same": _Decoder.same,
    "list": _Decoder.list,
    "tuple": lambda decoder, data: decoder.frozen(data, tuple),
    "set": lambda decoder, data: decoder.frozen(data, set),
    "frozenset": lambda decoder, data: decoder.frozen(data, frozenset),
    "dict": _Decoder.mapping,
    "counter": _Decoder.mapping,
    "obj": _Decoder.obj,
    "enum": _Decoder.enum_member,
    "class": lambda _d, data: _allowed(data["c"]),
}
