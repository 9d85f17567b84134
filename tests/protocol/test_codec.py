"""The tagged-value codec (docs/wire.md, Value tags and Refs), both directions."""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compilation_bridge.protocol import codec
from compilation_bridge.transport import jsonio


def no_refs(ref: dict[str, Any]) -> Any:
    raise AssertionError(f"unexpected ref {ref}")


class Refs:
    """make_ref / resolve_ref over a dict, to see what became a ref."""

    def __init__(self) -> None:
        self.objects: dict[str, Any] = {}

    def make(self, obj: Any, stream_type: str | None) -> dict[str, Any]:
        ref_id = f"r{len(self.objects)}"
        self.objects[ref_id] = obj
        ref = {"__type__": "stream_ref" if stream_type else "ref", "__schema__": 1, "id": ref_id}
        return {**ref, "session_id": "S"}

    def resolve(self, ref: dict[str, Any]) -> Any:
        return self.objects[ref["id"]]


def encode(value: Any, refs: Refs | None = None) -> Any:
    refs = refs or Refs()
    return codec.Encoder(refs.make).encode(value)


class Mode(enum.IntEnum):
    A = 3


class Kind(str, enum.Enum):  # noqa: UP042 (vLLM declares DynamicShapesType this way)
    B = "backed"


class Plain(enum.Enum):
    C = 1


def test_json_types_stay_themselves() -> None:
    assert encode(None) is None
    assert encode(6) == 6 and type(encode(6)) is int
    assert encode(True) is True
    assert encode(1.5) == 1.5
    assert encode("x") == "x"
    assert encode([1, [2, None]]) == [1, [2, None]]
    assert encode({"a": {"b": 1}}) == {"a": {"b": 1}}


def test_int_and_str_enums_are_their_values_other_enums_refs() -> None:
    assert encode(Mode.A) == 3 and type(encode(Mode.A)) is int
    assert encode(Kind.B) == "backed" and type(encode(Kind.B)) is str
    refs = Refs()
    assert encode(Plain.C, refs)["__type__"] == "ref"
    assert refs.objects["r0"] is Plain.C


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (math.inf, {"__type__": "special_float", "__schema__": 1, "value": "infinity"}),
        (-math.inf, {"__type__": "special_float", "__schema__": 1, "value": "neg_infinity"}),
        (b"\x00\xff", {"__type__": "bytes", "__schema__": 1, "data": "AP8="}),
        ((1, "a"), {"__type__": "tuple", "__schema__": 1, "elements": [1, "a"]}),
        ({1}, {"__type__": "set", "__schema__": 1, "elements": [1]}),
        (frozenset({2}), {"__type__": "frozenset", "__schema__": 1, "elements": [2]}),
        (complex(1, -2), {"__type__": "complex", "__schema__": 1, "real": 1.0, "imag": -2.0}),
        (dt.date(2026, 1, 2), {"__type__": "date", "__schema__": 1, "value": "2026-01-02"}),
        (dt.time(3, 4, 5), {"__type__": "time", "__schema__": 1, "value": "03:04:05"}),
        ({1: "a"}, {"__type__": "dict", "__schema__": 1, "pairs": [[1, "a"]]}),
        (codec.Atom("ok"), {"__type__": "atom", "__schema__": 1, "value": "ok"}),
    ],
)
def test_tags_round_trip(value: Any, wire: dict[str, Any]) -> None:
    assert encode(value) == wire
    assert codec.decode(wire, no_refs) == value


def test_nan_and_datetime() -> None:
    assert math.isnan(codec.decode(encode(math.nan), no_refs))
    moment = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert encode(moment)["__type__"] == "datetime"
    assert codec.decode({"__type__": "datetime", "value": "2026-01-02T03:04:05Z"}, no_refs) == moment


def test_decode_atom_is_str_unless_atom_class(monkeypatch: pytest.MonkeyPatch) -> None:
    wire = {"__type__": "atom", "value": "piecewise"}
    assert type(codec.decode(wire, no_refs)) is str
    monkeypatch.setenv("SNAKEBRIDGE_ATOM_CLASS", "true")
    assert isinstance(codec.decode(wire, no_refs), codec.Atom)


def test_legacy_and_callback_tags() -> None:
    assert codec.decode({"__type__": "infinity"}, no_refs) == math.inf
    assert codec.decode({"__type__": "tuple", "value": [1]}, no_refs) == (1,)
    callback = codec.decode({"__type__": "callback", "ref_id": "c1", "pid": "<0.1.0>", "arity": 1}, no_refs)
    assert isinstance(callback, codec.ElixirCallback)
    with pytest.raises(NotImplementedError):
        callback(1)
    assert encode(callback)["__type__"] == "callback"


def test_refs_are_resolved_anywhere_and_unknown_tags_pass_through() -> None:
    refs = Refs()
    obj = object()
    ref = encode(obj, refs)
    decoded = codec.decode({"x": [ref, {"__type__": "tuple", "elements": [ref]}]}, refs.resolve)
    assert decoded["x"][0] is obj and decoded["x"][1][0] is obj
    untagged = {"id": "r0", "session_id": "S"}
    assert codec.decode(untagged, refs.resolve) is obj
    assert codec.decode({"__type__": "mystery", "a": 1}, no_refs) == {"__type__": "mystery", "a": 1}


def test_non_data_becomes_refs_shared_and_cycles() -> None:
    refs = Refs()
    path = Path("/tmp")
    assert encode([path, path], refs)[0] == encode([path], refs)[0] or len(refs.objects) >= 1
    one = Refs()
    wire = encode([path, path], one)
    assert wire[0] == wire[1] and len(one.objects) == 1
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    cycle_refs = Refs()
    assert encode(cyclic, cycle_refs)[0]["__type__"] == "ref"


def test_iterators_become_stream_refs() -> None:
    refs = Refs()
    assert encode(iter([1]), refs)["__type__"] == "stream_ref"
    assert encode((x for x in [1]), refs)["__type__"] == "stream_ref"


@pytest.mark.parametrize(
    "wire",
    [
        {"__type__": "tuple"},
        {"__type__": "tuple", "elements": 3},
        {"__type__": "bytes", "data": "!!"},
        {"__type__": "special_float", "value": "huge"},
        {"__type__": "dict", "pairs": [[1]]},
        {"__type__": "complex", "real": "1", "imag": 0},
        {"__type__": "date", "value": "yesterday"},
    ],
)
def test_malformed_tags_are_value_errors(wire: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        codec.decode(wire, no_refs)


def test_depth_is_bounded() -> None:
    deep: Any = 1
    for _ in range(codec.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(ValueError, match="nested deeper"):
        codec.decode(deep, no_refs)


def test_jsonio_rejects_bare_nan_and_keeps_big_ints() -> None:
    with pytest.raises(ValueError):
        jsonio.loads(b"NaN")
    assert jsonio.loads(b"123456789012345678901234567890") == 123456789012345678901234567890
    assert json.loads(jsonio.dumps(2**70)) == 2**70


# Elixir-encodable values (docs/wire.md, Value tags), generated and sent through JSON both ways.
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(),
    st.binary().map(lambda b: b),
    st.dates(),
)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        # Keys that cannot spell a ref marker ("__type__", "__snakebridge_ref__", "id"): those are tags.
        st.dictionaries(st.text(alphabet="abcxyz_", max_size=6), inner, max_size=4),
        st.dictionaries(st.integers(), inner, max_size=3),
        st.frozensets(st.integers(), max_size=3),
    ),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=200, deadline=None)
@given(values)
def test_round_trip_through_json(value: Any) -> None:
    wire = jsonio.loads(jsonio.dumps(encode(value)))
    assert _same(codec.decode(wire, no_refs), value)
