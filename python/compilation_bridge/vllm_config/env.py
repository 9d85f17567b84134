"""The few vLLM environment variables that change config values, read as vLLM's `envs` reads them."""

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
