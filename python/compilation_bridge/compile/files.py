"""Where compile/ may write, and how it writes so that no half-written file is ever trusted.

Every file is written to a temporary name in the same directory and renamed into place, so a reader sees
either the old file, the whole new file, or nothing. Cache and debug-dump directories must lie under the
operator's allowed roots (`compilation_bridge.settings`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from compilation_bridge.settings import get_settings


class PathNotAllowedError(PermissionError):
    """A cache or debug-dump path outside the roots the operator allows."""


def check_allowed(path: str | os.PathLike[str], what: str) -> Path:
    """Return `path` resolved, or raise `PathNotAllowedError` naming `what` and the allowed roots."""
    settings = get_settings()
    resolved = Path(path).expanduser().resolve()
    if not settings.is_path_allowed(resolved):
        roots = ", ".join(str(r) for r in settings.allowed_roots) or "(none)"
        raise PathNotAllowedError(
            f"{what} {str(path)!r} is outside the directories this worker may write to ({roots}); "
            "the operator sets them with COMPILATION_BRIDGE_ALLOWED_ROOTS"
        )
    return resolved


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp makes the file private (0600); give it the mode an ordinary open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        _remove(tmp)
        raise


def atomic_save(path: str | os.PathLike[str], save: Callable[[str], None]) -> None:
    """Call `save(tmp_path)` (a file or a directory), then rename it to `path`, replacing what was there."""
    target = Path(path)
    tmp = str(target.parent / f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        save(tmp)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        _remove(tmp)
        raise


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)
