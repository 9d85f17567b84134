"""JSON in and out, with orjson when it is installed (several times faster) and stdlib json otherwise.

Both paths reject what SnakeBridge never sends and Elixir's Jason cannot read: bare NaN/Infinity.
"""

from __future__ import annotations

import json
from typing import Any

try:  # orjson is optional: a plain `pip install` without it still gives a working worker
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON: bare {name} is not JSON")


def loads(data: bytes | str) -> Any:
    """Parse JSON text; raises ValueError (json.JSONDecodeError or orjson's) on bad input."""
    if _orjson is not None:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            # orjson refuses integers beyond 64 bits, which stdlib json (and Jason) accept.
            pass
    return json.loads(data, parse_constant=_reject_constant)


def dumps(value: Any) -> bytes:
    """Serialise a codec-encoded value (only JSON types inside) to compact UTF-8 JSON."""
    if _orjson is not None:
        try:
            return _orjson.dumps(value)
        except TypeError:
            pass  # integers beyond 64 bits: stdlib json writes them exactly
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def backend() -> str:
    return "orjson" if _orjson is not None else "json"
