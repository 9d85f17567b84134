"""The enums, their helper methods, ``Range`` and class constants."""

from __future__ import annotations

from typing import Any

import pytest
from diff_harness import STR, call, get, op, tup

CUDAGRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
HELPERS = (
    "decode_mode",
    "mixed_mode",
    "separate_routine",
    "has_full_cudagraphs",
    "has_piecewise_cudagraphs",
    "requires_piecewise_compilation",
    "max_cudagraph_mode",
    "valid_runtime_modes",
)


def enum_request(enum: str, ops: list[dict[str, Any]], **by: Any) -> dict[str, Any]:
    return {"build": {"kind": "enum", "enum": enum, **by}, "ops": ops}


@pytest.mark.parametrize("name", CUDAGRAPH_MODES)
def test_cudagraph_mode_helpers(check: Any, platform: str, name: str) -> None:
    """``CUDAGraphMode`` truth table: every helper, ``has_mode`` against every member (separate-routine
    arguments assert), ``str``, ``name`` and ``value``."""
    ops = [call(h) for h in HELPERS]
    ops += [call("has_mode", {"__enum__": "CUDAGraphMode", "name": m}) for m in CUDAGRAPH_MODES]
    ops += [STR, op("repr"), get("name"), get("value")]
    check(platform, enum_request("CUDAGraphMode", ops, name=name))


@pytest.mark.parametrize(
    "value",
    [0, 1, 2, 3, -1, tup(2, 0), tup(2, 1), tup(2, 2), [2, 0], "FULL", 2.0, None, True],
    ids=repr,
)
def test_cudagraph_mode_by_value(check: Any, platform: str, value: Any) -> None:
    check(platform, enum_request("CUDAGraphMode", [get("name")], value=value))


@pytest.mark.parametrize("value", [0, 1, 2, 3, 4, -1, True, 3.0, "3", "VLLM_COMPILE"], ids=repr)
def test_compilation_mode_by_value(check: Any, platform: str, value: Any) -> None:
    """``CompilationMode``: an IntEnum, so ``VLLM_COMPILE == 3``."""
    ops = [get("name"), get("value"), op("eq", other=value), STR, op("repr")]
    check(platform, enum_request("CompilationMode", ops, value=value))


@pytest.mark.parametrize("name", ["NONE", "STOCK_TORCH_COMPILE", "DYNAMO_TRACE_ONCE", "VLLM_COMPILE", "none"])
def test_compilation_mode_by_name(check: Any, platform: str, name: str) -> None:
    ops = [get("value"), op("eq", other=3), op("eq", other=0), STR, op("repr")]
    check(platform, enum_request("CompilationMode", ops, name=name))


@pytest.mark.parametrize("value", ["backed", "unbacked", "backed_size_oblivious", "BACKED", "bogus", 0])
def test_dynamic_shapes_type(check: Any, platform: str, value: Any) -> None:
    """``DynamicShapesType``: a ``str`` enum, equal to its value."""
    ops = [get("name"), get("value"), op("eq", other="backed"), op("eq", other=value)]
    check(platform, enum_request("DynamicShapesType", ops, value=value))


@pytest.mark.parametrize("value", [0, 1, 2, 3, 4, -1, "2", 2.0])
def test_optimization_level(check: Any, platform: str, value: Any) -> None:
    """``OptimizationLevel``: ``O0``..``O3``, an IntEnum."""
    ops = [get("name"), get("value"), op("eq", other=value), STR]
    check(platform, enum_request("OptimizationLevel", ops, value=value))


@pytest.mark.parametrize(
    "cls", ["CompilationMode", "CUDAGraphMode", "DynamicShapesType", "OptimizationLevel"]
)
def test_enum_members(check: Any, platform: str, cls: str) -> None:
    """The member list, in order, with values (through ``__members__``, aliases included)."""
    check(platform, {"build": {"kind": "class", "cls": cls}, "ops": [op("members")], "final": False})


def test_attention_ops_class_constant(check: Any, platform: str) -> None:
    """``CompilationConfig._attention_ops``, the twelve ops in order."""
    check(platform, {"build": {"kind": "class", "cls": "CompilationConfig"}, "ops": [get("_attention_ops")]})


@pytest.mark.parametrize(
    ("start", "end"),
    [(1, 8), (8, 8), (9, 32), (33, 8192), (0, 0), (5, 1), (-3, 2)],
)
def test_range(check: Any, platform: str, start: int, end: int) -> None:
    """``Range`` (vllm/config/utils.py) fields, ``is_single_size``, inclusive ``in``, equality only with a
    Range, ``hash((start, end))``, ``str``/``repr`` as ``"(start, end)"``."""
    ops = [
        call("is_single_size"),
        *[op("contains", value=n) for n in (start - 1, start, (start + end) // 2, end, end + 1)],
        op("eq", other={"__new__": "Range", "kwargs": {"start": start, "end": end}}),
        op("eq", other={"__new__": "Range", "kwargs": {"start": start, "end": end + 1}}),
        op("eq", other=tup(start, end)),
        op("eq", other=[start, end]),
        op("ne", other={"__new__": "Range", "kwargs": {"start": start, "end": end}}),
        op("pyhash_eq", other=tup(start, end)),
        op("deepcopy_eq"),
        STR,
        op("repr"),
        op("fields"),
    ]
    check(
        platform,
        {"build": {"kind": "new", "cls": "Range", "kwargs": {"start": start, "end": end}}, "ops": ops},
    )


@pytest.mark.parametrize(
    "kwargs",
    [{"start": 1}, {"start": 1, "end": 2, "x": 3}, {"start": "1", "end": "2"}],
    ids=repr,
)
def test_range_construction(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """A std dataclass: no validation, missing or unknown keywords are ``TypeError``."""
    check(platform, {"build": {"kind": "new", "cls": "Range", "kwargs": kwargs}, "ops": [STR]})
