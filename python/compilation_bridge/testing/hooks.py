"""Test-only functions a worker exposes as `compilation_bridge.testing` when COMPILATION_BRIDGE_TEST_HOOKS=1.

The conformance suite needs calls that run long (to check heartbeats and SIGTERM during a call)
without compiling a model. Never set the variable in production: these functions exist only to burn
time on the worker.
"""

from __future__ import annotations

import ctypes
import os
import time
import tracemalloc
from typing import Any

from compilation_bridge.refs.limits import resident_bytes

MAX_SECONDS = 60.0


def sleep(seconds: float) -> float:
    """Block (releasing the GIL) for `seconds`, capped at a minute."""
    seconds = min(float(seconds), MAX_SECONDS)
    time.sleep(seconds)
    return seconds


def spin(seconds: float) -> int:
    """Busy-loop in Python (holding the GIL between switch intervals) for `seconds`, capped at a minute."""
    deadline = time.perf_counter() + min(float(seconds), MAX_SECONDS)
    rounds = 0
    while time.perf_counter() < deadline:
        rounds += 1
    return rounds


def count(n: int) -> object:
    """A generator of 0..n-1 (n capped at 10 000), for streaming tests."""
    return iter(range(min(int(n), 10_000)))


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def heap(trim: bool = False) -> dict[str, Any]:
    """The worker's pid, C heap (glibc's mallinfo2) and resident size, in KiB: `in_use` is what the
    program holds, `free_held` what glibc keeps freed but unreturned. With `trim`, glibc's malloc_trim(0)
    runs first, and `rss_before_trim_kib` says what it gave back. For the memory soak (docs/soak.md): it
    tells growth the program holds from a heap that fragments."""
    libc = ctypes.CDLL(None)
    before = resident_bytes() >> 10
    if trim:
        libc.malloc_trim(0)
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return {
        **_python_heap(),
        "pid": os.getpid(),
        "rss_kib": resident_bytes() >> 10,
        "rss_before_trim_kib": before,
        "in_use_kib": (info.uordblks + info.hblkhd) >> 10,
        "free_held_kib": info.fordblks >> 10,
        "arena_kib": info.arena >> 10,
    }


_last_snapshot: list[tracemalloc.Snapshot] = []


def _python_heap() -> dict[str, Any]:
    """When tracemalloc traces (PYTHONTRACEMALLOC=N at start-up): the Python heap, and the ten allocation
    sites that grew most since the previous call."""
    if not tracemalloc.is_tracing():
        return {}
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    grown = snapshot.compare_to(_last_snapshot[0], "traceback") if _last_snapshot else []
    _last_snapshot[:] = [snapshot]
    return {
        "python_kib": tracemalloc.get_traced_memory()[0] >> 10,
        "python_grown": [
            {"kib": stat.size_diff >> 10, "count": stat.count_diff, "where": stat.traceback.format()[-12:]}
            for stat in grown[:10]
        ],
    }
