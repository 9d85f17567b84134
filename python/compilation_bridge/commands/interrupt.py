"""Ctrl-C (SIGINT) for the sub-commands: one line, `interrupted`, and the shell's status 130."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

# What a shell reports for a command that SIGINT ended (128 + 2).
INTERRUPTED_STATUS = 128 + signal.SIGINT
MESSAGE = "interrupted"


def report_interrupted() -> int:
    """For a KeyboardInterrupt that reached the top: say so in one line; the exit status to use."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a second Ctrl-C while exiting ends us silently
    print(MESSAGE, file=sys.stderr, flush=True)
    return INTERRUPTED_STATUS


@contextlib.contextmanager
def exit_at_once_on_interrupt() -> Iterator[None]:
    """While torch compiles, Ctrl-C ends the process at once. A KeyboardInterrupt raised inside torch
    either unwinds through a hundred lines of Dynamo frames or is swallowed (a weakref callback prints
    "Exception ignored in ..." and the compile carries on), so it is not raised at all. Ending without
    unwinding is what SIGTERM's default action does already, which the compile cache tolerates."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread owns signals
        yield
        return
    previous = signal.signal(signal.SIGINT, _exit_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)  # the caller (a test process, say) gets its own back


def _exit_interrupted(signum: int, frame: FrameType | None) -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os.write(2, f"{MESSAGE}\n".encode())
    os._exit(INTERRUPTED_STATUS)
