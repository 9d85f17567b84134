"""What the worker's gauges read (refs held, resident memory), handed to observers by the layers that own
the numbers: this layer sits below them and cannot ask them itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Readings:
    refs_held: Callable[[], int]
    resident_bytes: Callable[[], int]
