"""Snakepit's readiness channel (docs/wire.md#ready-file): the bound port, written atomically once serving."""

from __future__ import annotations

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
