"""Test-only functions a worker exposes as `compilation_bridge.testing` when COMPILATION_BRIDGE_TEST_HOOKS=1.

The conformance suite needs calls that run long (to check heartbeats and SIGTERM during a call)
without compiling a model. Never set the variable in production: these functions exist only to burn
time on the worker.
"""

from __future__ import annotations

import time

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
