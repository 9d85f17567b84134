"""SnakeBridge's tagged JSON values (docs/wire.md, Value tags and Refs), in both directions.

Decoding turns Elixir-encoded values into Python ones and resolves refs through a callback.
Encoding keeps JSON types as they are (integers stay integers, None is null), tags the rest, and
turns anything that is not data (config objects, enums that are not ints or strs, paths) into a ref
through another callback. Both directions are depth-limited: payloads come from the network.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from compilation_bridge.protocol.sessionids import (
    MAX_SESSION_ID_BYTES,
    check_session_id,
    is_too_long,
    utf8_size,
)
from compilation_bridge.settings import atom_class_enabled

SCHEMA = 1
MAX_DEPTH = 64
SESSION_MISMATCH = "SnakeBridge reference session mismatch"
INVALID_REF = "Invalid SnakeBridge reference payload"
MISSING_ID = "SnakeBridge reference missing id"

ResolveRef = Callable[[dict[str, Any]], Any]
MakeRef = Callable[[Any, str | None], dict[str, Any]]  # (object, stream_type or None) -> wire ref


class Atom(str):
    """An Elixir atom, kept as such only when SNAKEBRIDGE_ATOM_CLASS=true (otherwise atoms are strs)."""

    def __repr__(self) -> str:
        return f"Atom({str.__repr__(self)})"


@dataclass(frozen=True)
class ElixirCallback:
    """An Elixir function passed as an argument. Nothing exposed by this worker takes a callable, so it
    is inert: it survives a round trip and fails clearly if something tries to call it."""

    ref_id: Any
    pid: Any
    arity: Any

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("Elixir callbacks cannot be called by compilation-bridge")


_SPECIAL_FLOATS = {"infinity": math.inf, "neg_infinity": -math.inf, "nan": math.nan}


# ---------------------------------------------------------------------------------------------- decode


def decode(value: Any, resolve_ref: ResolveRef) -> Any:
    return _decode(value, resolve_ref, 0)


def _decode(value: Any, resolve_ref: ResolveRef, depth: int) -> Any:
    if value is None or type(value) in (str, int, float, bool):
        return value
    if depth > MAX_DEPTH:
        raise ValueError(f"value nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, list):
        return [_decode(item, resolve_ref, depth + 1) for item in value]
    if isinstance(value, dict):
        return _decode_dict(value, resolve_ref, depth)
    raise TypeError(f"cannot decode a value of type {type(value).__name__}")


def _decode_dict(value: dict[str, Any], resolve_ref: ResolveRef, depth: int) -> Any:
    if is_wire_ref(value):
        return resolve_ref(value)
    tag = value.get("__type__")
    if not isinstance(tag, str):
        return {key: _decode(item, resolve_ref, depth + 1) for key, item in value.items()}
    handler = _DECODERS.get(tag)
    if handler is None:  # unknown tags pass through as plain maps, as in the reference adapter
        return {key: _decode(item, resolve_ref, depth + 1) for key, item in value.items()}
    try:
        return handler(value, resolve_ref, depth)
    except (KeyError, binascii.Error) as exc:
        raise ValueError(f"malformed {tag!r} value: {exc}") from None


def _elements(value: dict[str, Any], resolve_ref: ResolveRef, depth: int) -> list[Any]:
    items = value["elements"] if "elements" in value else value["value"]
    if not isinstance(items, list):
        raise ValueError(f"malformed {value['__type__']!r} value: elements must be a list")
    return [_decode(item, resolve_ref, depth + 1) for item in items]


def _decode_atom(value: dict[str, Any], _r: ResolveRef, _d: int) -> str:
    name = value["value"]
    if not isinstance(name, str):
        raise ValueError("malformed 'atom' value: value must be a string")
    return Atom(name) if atom_class_enabled() else name


def _decode_bytes(value: dict[str, Any], _r: ResolveRef, _d: int) -> bytes:
    data = value["data"] if "data" in value else value["value"]
    if not isinstance(data, str):
        raise ValueError("malformed 'bytes' value: data must be a base64 string")
    return base64.b64decode(data, validate=True)


def _decode_complex(value: dict[str, Any], _r: ResolveRef, _d: int) -> complex:
    real, imag = value["real"], value["imag"]
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (real, imag)):
        raise ValueError("malformed 'complex' value: real and imag must be numbers")
    return complex(real, imag)


def _decode_iso(kind: type[dt.date] | type[dt.time]) -> Callable[[dict[str, Any], ResolveRef, int], Any]:
    def decode_iso(value: dict[str, Any], _r: ResolveRef, _d: int) -> Any:
        text = value["value"]
        if not isinstance(text, str):
            raise ValueError(f"malformed {kind.__name__!r} value: value must be an ISO-8601 string")
        return kind.fromisoformat(text)

    return decode_iso


def _decode_special_float(value: dict[str, Any], _r: ResolveRef, _d: int) -> float:
    name = value["value"]
    if name not in _SPECIAL_FLOATS:
        raise ValueError(f"malformed 'special_float' value: {name!r}")
    return _SPECIAL_FLOATS[name]


def _decode_pairs(value: dict[str, Any], resolve_ref: ResolveRef, depth: int) -> dict[Any, Any]:
    pairs = value["pairs"]
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise ValueError("malformed 'dict' value: pairs must be a list of [key, value] pairs")
    return {_decode(k, resolve_ref, depth + 1): _decode(v, resolve_ref, depth + 1) for k, v in pairs}


def _decode_callback(value: dict[str, Any], _r: ResolveRef, _d: int) -> ElixirCallback:
    return ElixirCallback(value.get("ref_id"), value.get("pid"), value.get("arity"))


_DECODERS: dict[str, Callable[[dict[str, Any], ResolveRef, int], Any]] = {
    "atom": _decode_atom,
    "tuple": lambda v, r, d: tuple(_elements(v, r, d)),
    "set": lambda v, r, d: set(_elements(v, r, d)),
    "frozenset": lambda v, r, d: frozenset(_elements(v, r, d)),
    "bytes": _decode_bytes,
    "complex": _decode_complex,
    "datetime": _decode_iso(dt.datetime),
    "date": _decode_iso(dt.date),
    "time": _decode_iso(dt.time),
    "special_float": _decode_special_float,
    # Legacy bare tags from older SnakeBridge encoders.
    "infinity": lambda v, r, d: math.inf,
    "neg_infinity": lambda v, r, d: -math.inf,
    "nan": lambda v, r, d: math.nan,
    "dict": _decode_pairs,
    "callback": _decode_callback,
}


# ---------------------------------------------------------------------------------------------- encode


def tagged(tag: str, **fields: Any) -> dict[str, Any]:
    return {"__type__": tag, "__schema__": SCHEMA, **fields}


STOP_ITERATION = tagged("stop_iteration")


def stream_type(value: Any) -> str | None:
    """'generator' / 'iterator' for objects SnakeBridge streams with stream_next, else None."""
    kind = type(value)
    if not (hasattr(kind, "__next__") and hasattr(kind, "__iter__")):
        return None
    if hasattr(kind, "__enter__"):  # file-like objects and context managers stay plain refs
        return None
    return "generator" if isinstance(value, Iterator) and hasattr(value, "gi_frame") else "iterator"


class Encoder:
    """Encodes one result; identical objects share one ref and cycles become refs."""

    def __init__(self, make_ref: MakeRef) -> None:
        self._make_ref = make_ref
        self._memo: dict[int, dict[str, Any]] = {}
        self._active: set[int] = set()

    def encode(self, value: Any, depth: int = 0) -> Any:
        kind = type(value)
        if value is None or kind is str or kind is int or kind is bool:
            return value
        if kind is float:
            return value if math.isfinite(value) else _special_float(value)
        return self._encode_other(value, depth)

    def _encode_other(self, value: Any, depth: int) -> Any:
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, Atom):
            return tagged("atom", value=str.__str__(value))
        if isinstance(value, int):  # IntEnum members (CompilationMode) are ints on the wire
            return int(value)
        if isinstance(value, str):  # str enums (DynamicShapesType) are their value
            return str.__str__(value)
        if isinstance(value, float):
            return self.encode(float(value), depth)
        if isinstance(value, bytes | bytearray | memoryview):
            return tagged("bytes", data=base64.b64encode(bytes(value)).decode("ascii"))
        if isinstance(value, complex):
            return tagged("complex", real=self.encode(value.real), imag=self.encode(value.imag))
        if isinstance(value, dt.datetime | dt.date | dt.time):
            return tagged(_iso_tag(value), value=value.isoformat())
        if isinstance(value, ElixirCallback):
            return tagged("callback", ref_id=value.ref_id, pid=value.pid, arity=value.arity)
        if isinstance(value, list | tuple | set | frozenset | dict):
            return self._encode_container(value, depth)
        return self._ref(value)

    def _encode_container(self, value: Any, depth: int) -> Any:
        key = id(value)
        if key in self._active or depth >= MAX_DEPTH:
            return self._ref(value)  # a cycle, or too deep to be data
        self._active.add(key)
        try:
            return self._encode_items(value, depth + 1)
        finally:
            self._active.discard(key)

    def _encode_items(self, value: Any, depth: int) -> Any:
        if isinstance(value, list):
            return [self.encode(item, depth) for item in value]
        if isinstance(value, tuple):
            return tagged("tuple", elements=[self.encode(item, depth) for item in value])
        if isinstance(value, frozenset):
            return tagged("frozenset", elements=[self.encode(item, depth) for item in value])
        if isinstance(value, set):
            return tagged("set", elements=[self.encode(item, depth) for item in value])
        if all(isinstance(k, str) and not isinstance(k, Atom) for k in value):
            return {str.__str__(k): self.encode(v, depth) for k, v in value.items()}
        pairs = [[self.encode(k, depth), self.encode(v, depth)] for k, v in value.items()]
        return tagged("dict", pairs=pairs)

    def _ref(self, value: Any) -> dict[str, Any]:
        key = id(value)
        ref = self._memo.get(key)
        if ref is None:
            ref = self._make_ref(value, stream_type(value))
            self._memo[key] = ref
        return ref


def _special_float(value: float) -> dict[str, Any]:
    name = "nan" if math.isnan(value) else ("infinity" if value > 0 else "neg_infinity")
    return tagged("special_float", value=name)


def _iso_tag(value: dt.date | dt.time) -> str:
    if isinstance(value, dt.datetime):
        return "datetime"
    return "date" if isinstance(value, dt.date) else "time"


def ref_identity(ref: Any, session_id: str) -> str:
    """The ref id of a wire ref, after checking its shape and that it belongs to `session_id`."""
    if not isinstance(ref, dict):
        raise ValueError(INVALID_REF)
    if ref.get("__type__") in ("ref", "stream_ref"):
        ref_id = ref.get("id") or ref.get("ref_id")
    elif ref.get("__snakebridge_ref__"):
        ref_id = ref.get("ref_id")
    elif "id" in ref and ("session_id" in ref or "ref_id" in ref):
        ref_id = ref.get("id")
    else:
        raise ValueError(INVALID_REF)
    if not ref_id:
        raise ValueError(MISSING_ID)
    if not isinstance(ref_id, str):
        raise ValueError(INVALID_REF)
    if is_too_long(ref_id):  # ours are 32 hex digits; a longer one would only be echoed back in errors
        raise ValueError(
            f"SnakeBridge reference id too long: {utf8_size(ref_id)} bytes "
            f"(limit {MAX_SESSION_ID_BYTES} bytes)"
        )
    ref_session = ref.get("session_id")
    if isinstance(ref_session, str):
        check_session_id(ref_session, "reference session_id")
    if ref_session is not None and ref_session != session_id:
        raise ValueError(SESSION_MISMATCH)
    return ref_id


def is_wire_ref(value: dict[str, Any]) -> bool:
    """Whether a decoded dict is a ref by SnakeBridge's rules (tagged, legacy, or untagged id+session)."""
    if value.get("__type__") in ("ref", "stream_ref") or value.get("__snakebridge_ref__"):
        return True
    return "__type__" not in value and "id" in value and ("session_id" in value or "ref_id" in value)
