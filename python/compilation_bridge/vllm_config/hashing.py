"""vLLM 0.14.0's config hashing (`normalize_value`, `get_hash_factors`, `hash_factors`, `safe_hash`).

Hashes must be byte-identical to vLLM's, and vLLM writes the qualified name of an enum or dataclass into
its factors (`("vllm.config.compilation.CUDAGraphMode", 2)`). Our classes live in our own modules, so
each one that can appear in a factor declares the name vLLM gives it with `@vllm_name(...)`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import pathlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Any, TypeVar

T = TypeVar("T", bound=type)

_VLLM_NAMES: dict[type, str] = {}


def vllm_name(qualified_name: str) -> Callable[[T], T]:
    """Record the qualified name vLLM uses for this class inside hash factors."""

    def register(cls: T) -> T:
        _VLLM_NAMES[cls] = qualified_name
        return cls

    return register


def qualified_name(cls: type) -> str:
    if cls in _VLLM_NAMES:
        return _VLLM_NAMES[cls]
    return f"{cls.__module__}.{cls.__qualname__}"


def _is_torch_dtype(x: object) -> bool:
    # By name: torch is never imported to hash a config (the config model's DType registers as it).
    return qualified_name(type(x)) == "torch.dtype"


def normalize_value(x: Any) -> Any:
    """A JSON-able, stable stand-in for `x`, case by case as vLLM's `normalize_value`."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x  # IntEnum and str-Enum members are ints and strs here, as in vLLM
    # Exact builtin containers end in the same branch below; going there directly skips the
    # attribute probes (config hashing is on the RPC hot path).
    kind = type(x)
    if kind is list or kind is tuple:
        return tuple(normalize_value(v) for v in x)
    if kind is dict or kind is Counter:
        return tuple(sorted((str(k), normalize_value(v)) for k, v in x.items()))
    if kind is set or kind is frozenset:
        return tuple(sorted(repr(normalize_value(v)) for v in x))
    if isinstance(x, enum.Enum):
        return (qualified_name(type(x)), normalize_value(x.value))
    if isinstance(x, type):
        module = getattr(x, "__module__", "")
        qual = getattr(x, "__qualname__", getattr(x, "__name__", ""))
        return ".".join(p for p in (module, qual) if p) or repr(x)
    if hasattr(x, "uuid") and callable(getattr(x, "uuid", None)):
        return x.uuid()
    if callable(x):
        raise TypeError("normalize_value: function or callable instance unsupported")
    if _is_torch_dtype(x):
        return str(x)
    if isinstance(x, (bytes, bytearray)):
        return x.hex()
    if isinstance(x, pathlib.Path):
        try:
            return str(x.expanduser().resolve())
        except Exception:
            return str(x)
    if dataclasses.is_dataclass(x):
        fields = sorted(dataclasses.fields(x), key=lambda f: f.name)
        return (qualified_name(type(x)), tuple((f.name, normalize_value(getattr(x, f.name))) for f in fields))
    if isinstance(x, Mapping):
        return tuple(sorted((str(k), normalize_value(v)) for k, v in x.items()))
    if isinstance(x, Set):
        return tuple(sorted(repr(normalize_value(v)) for v in x))
    if isinstance(x, Sequence) and not isinstance(x, (str, bytes, bytearray)):
        return tuple(normalize_value(v) for v in x)
    if hasattr(x, "to_json_string") and callable(x.to_json_string):
        return x.to_json_string()
    raise TypeError(
        f"normalize_value: unsupported type '{type(x).__name__}'. Ensure config values use supported "
        "primitives/containers or add a stable representation for this type."
    )


@functools.cache
def _field_names(cls: Any) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def get_hash_factors(config: Any, ignored_factors: Set[str] | Sequence[str]) -> dict[str, object]:
    factors: dict[str, object] = {}
    for factor in _field_names(type(config)):
        if factor in ignored_factors:
            continue
        value = getattr(config, factor, None)
        try:
            factors[factor] = normalize_value(value)
        except TypeError as e:
            raise TypeError(
                f"get_hash_factors: unsupported type for key '{factor}' ({type(value).__name__})"
            ) from e
    return factors


def hash_factors(items: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()


def safe_hash(data: bytes) -> Any:
    """md5 where the platform allows it, sha256 under FIPS, as vLLM's `safe_hash`."""
    try:
        return hashlib.md5(data, usedforsecurity=False)
    except (AttributeError, ValueError):
        return hashlib.sha256(data)
