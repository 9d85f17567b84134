"""The installed torch version, read from package metadata so that config work never imports torch."""

from __future__ import annotations

import functools
from importlib import metadata

from packaging import version

VLLM_VERSION = "0.14.0"  # the release whose behaviour (and hash factor) this package reproduces


@functools.cache
def torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "0"


def is_torch_equal_or_newer_than(torch_version_text: str, target: str) -> bool:
    """vLLM's `_is_torch_equal_or_newer`: a plain PEP 440 comparison ("2.8.0.dev" < "2.8.0")."""
    return version.parse(torch_version_text) >= version.parse(target)


@functools.cache
def is_torch_equal_or_newer(target: str) -> bool:
    # Cached: the installed torch does not change while the process runs, and every config
    # construction asks (parsing versions was a large share of construction time).
    return is_torch_equal_or_newer_than(torch_version(), target)
