"""The few vLLM environment variables that change config values or the compile cache, read as vLLM's
`envs` reads them (this project's own settings are in `compilation_bridge.settings`)."""

from __future__ import annotations

import os
from collections.abc import Sequence


def env_with_choices(name: str, default: str | None, choices: Sequence[str]) -> str | None:
    """vLLM's `env_with_choices`: the variable's value if set and valid, else `default`."""
    value = os.getenv(name)
    if value is None:
        return default
    if value not in choices:
        raise ValueError(f"Invalid value '{value}' for {name}. Valid options: {list(choices)}.")
    return value


def int_flag(name: str) -> bool:
    """vLLM's reading of an on/off variable: `bool(int(os.getenv(name, "0")))`."""
    return bool(int(os.getenv(name, "0")))


def optional_int(name: str) -> int | None:
    """vLLM's reading of an optional integer variable: None when unset, else `int(value)`."""
    value = os.environ.get(name, None)
    return None if value is None else int(value)


def is_set(name: str) -> bool:
    return name in os.environ


def raw(name: str) -> str | None:
    """vLLM's reading of a variable it keeps as given (`envs.VLLM_TORCH_PROFILER_DIR`, ...): `os.getenv`."""
    return os.getenv(name)


def disable_compile_cache() -> bool:
    """vLLM's `envs.VLLM_DISABLE_COMPILE_CACHE`: `bool(int(os.getenv("VLLM_DISABLE_COMPILE_CACHE", "0")))`.

    Any integer counts, as in vLLM (`2` and ` 1 ` are on, `-1` too). A value that is no integer (`yes`, or
    set but empty) makes vLLM raise ValueError where the compiler reads it; so does this, at the same
    point (a compile, never at start-up), naming the variable. This is the operator's environment, not a
    caller's input: the compile call fails in-band with the message and the worker stays up, and a config
    that vLLM would refuse to compile is not compiled here under a different reading.
    """
    raw = os.getenv("VLLM_DISABLE_COMPILE_CACHE", "0")
    try:
        return bool(int(raw))
    except ValueError:
        raise ValueError(
            f"VLLM_DISABLE_COMPILE_CACHE={raw!r} is not an integer; vLLM 0.14.0 reads it with int() "
            "(0: cache on, 1: cache off)"
        ) from None
