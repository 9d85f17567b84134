"""What vLLM 0.14.0 itself answers for the calls the real-client suite makes, in the suite's plain form.

Run with the vLLM oracle environment's interpreter (CPU platform, as the pools under test are):
stdin is a JSON list of calls ``{"new": {"args": [...], "kwargs": {...}}, "function": NAME, "args": [...]}``,
optionally naming the class (``"module"``, ``"cls"``; ``vllm.config.CompilationConfig`` when absent);
each builds ``cls(*args, **kwargs)`` afresh, then reads the attribute or calls the method (an argument
``{"enum": "module.Class", "name": MEMBER}`` is that enum's member), then reads each name of the optional
``"then"`` list from what that returned, in turn.
stdout is a JSON list of answers ``{"ok": PLAIN}`` or ``{"error": TYPE, "message": TEXT}``.

PLAIN: ``None``/bools/strings as JSON; ints (an ``IntEnum`` member too) as ints; floats as floats; lists and
tuples as lists; sets as ``{"set": sorted list}``; dicts with their keys as strings; any other object as
``{"object": type name, "repr": repr}`` (what SnakeBridge hands Elixir as a ref).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[4]


def plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return {"set": sorted(plain(v) for v in value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return {"object": type(value).__name__, "repr": repr(value)}


def argument(value: Any) -> Any:
    """A call's argument: JSON, or ``{"enum": "module.Class", "name": MEMBER}`` for an enum member."""
    if isinstance(value, dict) and set(value) == {"enum", "name"}:
        module, _, cls = value["enum"].rpartition(".")
        return getattr(importlib.import_module(module), cls)[value["name"]]
    return value


def read(obj: Any, name: str, args: list[Any]) -> Any:
    member = getattr(obj, name)
    return member(*args) if callable(member) else member


def answer(call: dict[str, Any]) -> dict[str, Any]:
    cls = getattr(
        importlib.import_module(call.get("module", "vllm.config")), call.get("cls", "CompilationConfig")
    )
    try:
        config = cls(*call["new"]["args"], **call["new"]["kwargs"])
        result = read(config, call["function"], [argument(a) for a in call["args"]])
        for name in call.get("then", []):  # reads of what the call returned, one after the other
            result = read(result, name, [])
        return {"ok": plain(result)}
    except Exception as exc:  # the answer is the exception itself
        return {"error": type(exc).__name__, "message": str(exc)}


def main() -> None:
    sys.path.insert(0, str(REPO / "tests" / "oracle"))
    from oracle_server import _setup_platform

    _setup_platform("cpu")
    calls = json.load(sys.stdin)
    print(json.dumps([answer(call) for call in calls]))


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":
        raise SystemExit("run with PYTHONHASHSEED=0, as the oracle always is")
    main()
