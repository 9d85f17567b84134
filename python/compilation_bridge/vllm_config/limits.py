"""The cap on caller-set sizes that make the worker allocate or loop in proportion to them.

vLLM has no such cap; a remote caller could otherwise ask for a padding table of 2**40 entries.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_SIZE = 2**24


def check_size(field_name: str, value: object) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_SIZE:
        raise ValueError(f"{field_name} must be at most {MAX_SIZE} (2**24), got {value}")


def check_sizes(field_name: str, values: Iterable[object] | None) -> None:
    for value in values or ():
        check_size(field_name, value)
