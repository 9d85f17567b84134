"""The worker's private state folder: created 0700 for the worker's user, refused if anyone else owns it.

It holds the embedded ref store and the key that signs ref store entries, so nobody but the worker's
user may read or plant files there.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from compilation_bridge.settings import STATE_DIR_ENV, state_dir_setting


class StateDirError(RuntimeError):
    pass


def private_state_dir(path: Path | None = None) -> Path:
    """The state folder, created if missing, owned by this user and closed to everyone else."""
    folder = (path or state_dir_setting()).resolve()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid():
        raise StateDirError(
            f"state folder {folder} belongs to uid {info.st_uid}, not to the worker's user {os.getuid()}; "
            f"point {STATE_DIR_ENV} at a folder of the worker's own"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        folder.chmod(0o700)  # ours: close it (a umask or a pre-made folder may have left it open)
    return folder


def private_file(path: Path) -> None:
    """Refuse a file in the state folder that another user owns or others may write to."""
    info = path.stat()
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o022:
        raise StateDirError(f"{path} is not private to the worker's user (owner or mode); remove it")
