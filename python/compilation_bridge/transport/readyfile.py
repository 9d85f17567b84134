"""Snakepit's readiness channel (docs/wire.md#ready-file): the bound port, written atomically once serving,
and withdrawn at exit if no one read it."""

from __future__ import annotations

import contextlib
import os


def write_ready_file(path: str, port: int) -> None:
    """Write `port` to `<path>.tmp`, fsync, then rename onto `path`, so Elixir never reads half a file."""
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, str(port).encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def withdraw_ready_file(path: str, port: int) -> None:
    """Remove the ready file if it still holds `port`: Snakepit deletes it once read, so one left at exit
    was never read (its reader stopped first). Snakepit names ready files predictably in the shared
    temporary folder; a stale one would hand a later worker of that name this port, which by then may be
    another server's."""
    with contextlib.suppress(OSError):
        with open(path, encoding="ascii", errors="replace") as file:
            if file.read(32).strip() != str(port):
                return
        os.unlink(path)
