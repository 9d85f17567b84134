"""vLLM 0.14.0's tests/config/test_config_utils.py, ported: the hash machinery every served config's
`compute_hash` runs (`normalize_value`, `get_hash_factors`, `hash_factors`, from vllm/config/utils.py here in
compilation_bridge/vllm_config/hashing.py). Same test names and cases."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import pytest

from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors, normalize_value


def endswith_fqname(obj: object, suffix: str) -> bool:
    # normalize_value(type) returns the fully-qualified name
    out = normalize_value(obj)
    return isinstance(out, str) and out.endswith(suffix)


def expected_path(p_str: str = ".") -> str:
    return pathlib.Path(p_str).expanduser().resolve().as_posix()


@dataclass
class SimpleConfig:
    a: object
    b: object | None = None


class DummyLogprobsMode(Enum):
    RAW_LOGITS = "raw_logits"


def test_hash_factors_deterministic() -> None:
    """hash_factors gives the same SHA-256 for the same factors, whatever their insertion order."""
    factors = {"a": 1, "b": "test"}
    hash1 = hash_factors(factors)
    assert hash_factors(factors) == hash1
    assert hash_factors({"b": "test", "a": 1}) == hash1
    assert len(hash1) == 64
    assert all(c in "0123456789abcdef" for c in hash1)


@pytest.mark.parametrize(
    "inp, expected",
    [
        (None, None),
        (True, True),
        (1, 1),
        (1.0, 1.0),
        ("x", "x"),
        (b"ab", "6162"),
        (bytearray(b"ab"), "6162"),
        ([1, 2], (1, 2)),
        ({"b": 2, "a": 1}, (("a", 1), ("b", 2))),
    ],
)
def test_normalize_value_matrix(inp: object, expected: object) -> None:
    assert normalize_value(inp) == expected


def test_normalize_value_enum() -> None:
    # Enums normalize to (module.QualName, value).
    out = normalize_value(DummyLogprobsMode.RAW_LOGITS)
    assert isinstance(out, tuple)
    assert out[0].endswith("DummyLogprobsMode")
    assert out[1] == "raw_logits"


def test_normalize_value_set_order_insensitive() -> None:
    assert normalize_value({3, 1, 2}) == normalize_value({1, 2, 3})


def test_normalize_value_path_normalization() -> None:
    # Paths expand and resolve to absolute strings, so hashes do not depend on the working directory.
    assert normalize_value(Path(".")) == expected_path(".")


def test_normalize_value_uuid_and_to_json() -> None:
    class HasUUID:
        def uuid(self) -> str:
            return "test-uuid"

    class ToJson:
        def to_json_string(self) -> str:
            return '{"x":1}'

    assert normalize_value(HasUUID()) == "test-uuid"
    assert normalize_value(ToJson()) == '{"x":1}'


@pytest.mark.parametrize(
    "bad",
    [
        (lambda x: x),
        (type("CallableInstance", (), {"__call__": lambda self: 0}))(),
        (lambda: lambda: 0)(),  # nested function instance
    ],
)
def test_error_cases(bad: object) -> None:
    """Functions, lambdas and callable instances are refused, so nothing is under-hashed."""
    with pytest.raises(TypeError):
        normalize_value(bad)


def test_enum_vs_int_disambiguation() -> None:
    assert normalize_value(1) == 1
    nf_enum = normalize_value(DummyLogprobsMode.RAW_LOGITS)
    assert isinstance(nf_enum, tuple) and len(nf_enum) == 2
    enum_type, enum_val = nf_enum
    assert enum_type.endswith(".DummyLogprobsMode")
    assert enum_val == "raw_logits"

    f_int = get_hash_factors(SimpleConfig(1), set())
    f_enum = get_hash_factors(SimpleConfig(DummyLogprobsMode.RAW_LOGITS), set())
    assert f_int["a"] == 1
    assert isinstance(f_enum["a"], tuple) and f_enum["a"][1] == "raw_logits"
    assert f_int != f_enum
    assert hash_factors(f_int) != hash_factors(f_enum)
    h_int, h_enum = hash_factors(f_int), hash_factors(f_enum)
    assert isinstance(h_int, str) and len(h_int) == 64
    assert isinstance(h_enum, str) and len(h_enum) == 64


def test_classes_are_types() -> None:
    """Types normalize to their fully-qualified names."""
    assert isinstance(normalize_value(str), str)

    class LocalDummy:
        pass

    assert endswith_fqname(LocalDummy, ".LocalDummy")
