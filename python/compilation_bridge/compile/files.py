"""Where compile/ may write, and how it writes so that no half-written file is ever trusted.

Every file is written to a temporary name in the same directory and renamed into place, so a reader sees
either the old file, the whole new file, or nothing. Cache and debug-dump directories must lie under the
operator's allowed roots (`compilation_bridge.settings`), each private to the worker's user, and are
reached without following a symlink below a root (`compilation_bridge.safe_files`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from compilation_bridge.safe_files import (
    PathNotAllowedError,
    UnsafeRootError,
    atomic_write_bytes,
    ensure_private_root,
    make_dirs,
    open_parent,
    remove,
    replace_from,
)
from compilation_bridge.settings import get_settings

__all__ = [
    "PathNotAllowedError",
    "UnsafeRootError",
    "atomic_save",
    "atomic_write_text",
    "check_allowed",
    "make_dirs",
]


def check_allowed(path: str | os.PathLike[str], what: str) -> Path:
    """Return `path` resolved, or raise `PathNotAllowedError` naming `what` and the allowed roots;
    `UnsafeRootError` when its root is one another user could write."""
    settings = get_settings()
    resolved = Path(path).expanduser().resolve()
    root = settings.root_of(resolved)
    if root is None:
        roots = ", ".join(str(r) for r in settings.allowed_roots) or "(none)"
        raise PathNotAllowedError(
            f"{what} {str(path)!r} is outside the directories this worker may write to ({roots}); "
            "the operator sets them with COMPILATION_BRIDGE_ALLOWED_ROOTS"
        )
    ensure_private_root(root)
    return resolved


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_save(path: str | os.PathLike[str], save: Callable[[str], None]) -> None:
    """Call `save(tmp_path)` (a file or a directory), then rename it to `path`, replacing what was there.

    `save` is a library writing by path; its output is refused if it holds a symlink."""
    with open_parent(path) as (dir_fd, name, resolved):
        tmp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            save(str(resolved.parent / tmp))
            replace_from(dir_fd, tmp, name, path)
        except BaseException:
            remove(dir_fd, tmp)
            raise
