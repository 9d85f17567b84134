"""A helper process of a benchmark: what runs beside the worker in production (Snakepit's stream reader
in the BEAM, an OpenTelemetry collector), run in a process of its own rather than on a thread of the
benchmark, where everything it received would take the interpreter lock from the calls being timed.

The protocol is two lines: the helper prints one line once it is ready (what the benchmark needs to
know, such as an address), then, when its standard input closes, one number (what it received).
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

STOP_S = 10.0


class Sidecar:
    """`python -m <module> <args>` as a helper process; `ready` is the line it printed once ready."""

    def __init__(self, module: str, args: Sequence[str] = ()) -> None:
        command = [sys.executable, "-m", module, *args]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._process.stdin is not None and self._process.stdout is not None
        self._stdin, self._stdout = self._process.stdin, self._process.stdout
        self.ready = self._stdout.readline().strip()
        if not self.ready:
            self._process.kill()
            raise RuntimeError(f"the benchmark's helper {module} did not start")

    def close(self) -> int:
        """What the helper received, once it has ended."""
        self._stdin.close()
        try:
            received = int(self._stdout.readline() or 0)
            self._process.wait(STOP_S)
            return received
        finally:
            if self._process.poll() is None:
                self._process.kill()


def settled(count: Callable[[], int], quiet_s: float, max_wait_s: float = math.inf) -> int:
    """What a helper received, once `count()` has not changed for `quiet_s` (or `max_wait_s` passed):
    the last of it may still be on its way when the benchmark closes the helper's standard input."""
    deadline = time.monotonic() + max_wait_s
    received = -1
    while received != (received := count()) and time.monotonic() < deadline:
        time.sleep(quiet_s)
    return received
