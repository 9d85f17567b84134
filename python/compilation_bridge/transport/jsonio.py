"""JSON in and out, with orjson (several times faster for the small values SnakeBridge sends) and
stdlib json as the fallback.

Both paths reject what Elixir's Jason never sends: bare NaN/Infinity. orjson reads integers beyond
64 bits as floats, so text with a run of 19+ digits goes through stdlib json, which keeps them exact.
"""

from __future__ import annotations

import json
import re
from typing import Any

_orjson: Any
try:  # a plain environment without orjson still gives a working worker
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

_LONG_DIGITS = re.compile(rb"\d{19,}")
# A \uD800-\uDFFF escape: half of a surrogate pair, or a lone surrogate that is not text at all.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON: bare {name} is not JSON")


# One decoder, built once: json.loads(..., parse_constant=...) would build a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def loads(data: bytes) -> Any:
    """Parse UTF-8 JSON; raises ValueError (a JSONDecodeError or UnicodeDecodeError) on bad input."""
    # Values shorter than 19 bytes cannot hold a 19-digit run: skip the search for most parameters.
    if _orjson is not None and (len(data) < 19 or not _LONG_DIGITS.search(data)):
        return _orjson.loads(data)
    value = _DECODER.decode(data.decode("utf-8"))
    if _SURROGATE_ESCAPE.search(data):
        _check_no_lone_surrogates(value)
    return value


def _check_no_lone_surrogates(value: Any) -> None:
    """Refuse what orjson refuses and Elixir never sends: a string that cannot be encoded as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("invalid JSON: a \\u escape is a lone surrogate, not a character") from None


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
