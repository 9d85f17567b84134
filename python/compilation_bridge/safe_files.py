"""Files under the operator's roots, opened so that no symlink leads out of them (no torch import).

What the worker reads back from its roots (compile caches, Inductor's cache) can run code, so:

- every root must be private to the worker's user (`ensure_private_root`): owned by it, writable by
  nobody else, and reachable only through folders no other user can rename it out of;
- every path is resolved and re-checked against the roots right before it is opened, then opened from
  the root down one folder at a time with ``O_NOFOLLOW`` (`_walk`), so a symlink swapped in below the
  root after the check is refused instead of followed, and the final component is never a symlink.

With ``follow=True`` (model folders, which are read, never written) symlinks that stay inside the roots
are followed, as a Hugging Face cache's snapshot links are; one that leads out of them is refused.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from compilation_bridge.settings import ALLOWED_ROOTS_ENV, get_settings

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted where a file is expected must not hang the worker (refused after fstat).
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_SYMLINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR)


class PathNotAllowedError(PermissionError):
    """A cache or debug-dump path outside the roots the operator allows, or one reached by a symlink."""


class UnsafeRootError(PathNotAllowedError):
    """An allowed root that another user could write into (or rename away)."""


# -- roots ----------------------------------------------------------------------------------------


def ensure_private_root(root: Path) -> None:
    """Create a missing default root (0700), refuse a missing operator root, refuse a shared root."""
    if not os.path.lexists(root):
        if get_settings().roots_from_operator:
            raise UnsafeRootError(
                f"allowed root {str(root)!r} (from {ALLOWED_ROOTS_ENV}) does not exist; create it, "
                f"private to the worker's user: mkdir -m 700 {root}"
            )
        make_private_dirs(root)
    _check_root(root)
    for parent in root.parents:
        _check_root_parent(parent, root)


def ensure_private_folder(folder: Path, setting: str, noun: str) -> None:
    """The checks of an allowed root for another private folder of the worker (`noun`, set by `setting`):
    created 0700 when missing, then owned by the worker's user, closed to others (an open mode is
    closed), and in parent folders only that user or root can change."""
    if not os.path.lexists(folder):
        make_private_dirs(folder)
    st = os.lstat(folder)
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(folder, 0o700)
    _check_root(folder, noun, setting)
    for parent in folder.parents:
        _check_root_parent(parent, folder, noun)


def make_private_dirs(path: Path) -> None:
    """Create `path` and its missing parents with mode 0700, whatever the umask."""
    missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
            os.chmod(folder, 0o700)


def _check_root(root: Path, noun: str = "allowed root", setting: str = ALLOWED_ROOTS_ENV) -> None:
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeRootError(f"{noun} {str(root)!r} is not a folder")
    if st.st_uid != os.geteuid():
        raise UnsafeRootError(
            f"{noun} {str(root)!r} is owned by uid {st.st_uid}, not by the worker's user "
            f"(uid {os.geteuid()}), who could then plant files there; use a folder of the worker's "
            f"own: mkdir -m 700 <folder> and name it in {setting}"
        )
    if st.st_mode & 0o022:
        raise UnsafeRootError(
            f"{noun} {str(root)!r} is writable by other users (mode {stat.S_IMODE(st.st_mode):o}), "
            f"who could plant files there; make it private: chmod 700 {root}"
        )


def _check_root_parent(parent: Path, root: Path, noun: str = "allowed root") -> None:
    # Whoever can write a parent can rename the root away and put their own folder in its place,
    # unless the sticky bit (as on /tmp) keeps them from renaming what they do not own.
    st = os.stat(parent)
    shared = st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX
    if st.st_uid not in (0, os.geteuid()) or shared:
        raise UnsafeRootError(
            f"{noun} {str(root)!r} lies in {str(parent)!r}, which another user owns or may write "
            f"(uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}), so it could be replaced; "
            "choose a folder whose parent folders only the worker's user or root can change"
        )


def _locate(path: str | os.PathLike[str], roots: Sequence[Path], follow: bool) -> tuple[Path, list[str]]:
    """The root `path` lies under and the names below it; refuses a path outside every root."""
    expanded = os.path.expanduser(os.fspath(path))
    absolute = os.path.realpath(expanded) if follow else os.path.abspath(expanded)
    parts = Path(absolute).parts
    for n in range(len(parts), 0, -1):
        # Symlinks above a root are the operator's business; below it, _walk refuses them.
        prefix = Path(os.path.realpath(Path(*parts[:n])))
        if prefix in roots:
            return prefix, list(parts[n:])
    listed = ", ".join(str(r) for r in roots) or "(none)"
    raise PathNotAllowedError(
        f"{str(path)!r} is outside the directories this worker may use ({listed}), or is reached "
        f"through a symbolic link out of them; the operator sets them with {ALLOWED_ROOTS_ENV}"
    )


def _roots(roots: Sequence[Path] | None) -> Sequence[Path]:
    return get_settings().allowed_roots if roots is None else roots


# -- walking down from a root ---------------------------------------------------------------------


def _open_below(dir_fd: int, name: str, flags: int, path: object, mode: int = 0o600) -> int:
    try:
        return os.open(name, flags, mode, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in _SYMLINK_ERRNOS:
            raise PathNotAllowedError(
                f"{str(path)!r}: {name!r} is a symbolic link or not a folder; this worker never follows "
                "a link below an allowed root"
            ) from e
        raise


def _walk(root: Path, names: Sequence[str], path: object, create: bool = False) -> int:
    """An fd of `root/names...`, each folder opened with O_NOFOLLOW (and made 0700 when `create`)."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for name in names:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=fd)
            next_fd = _open_below(fd, name, _DIR_FLAGS, path)
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def open_parent(
    path: str | os.PathLike[str], *, roots: Sequence[Path] | None = None, follow: bool = False
) -> Iterator[tuple[int, str, Path]]:
    """(fd of the parent folder, final name, path as resolved) for a file under the roots."""
    root, names = _locate(path, _roots(roots), follow)
    if not names:
        raise PathNotAllowedError(f"{str(path)!r} is an allowed root itself, not a file under one")
    if roots is None:
        ensure_private_root(root)
    fd = _walk(root, names[:-1], path)
    try:
        yield fd, names[-1], root.joinpath(*names)
    finally:
        os.close(fd)


def make_dirs(path: str | os.PathLike[str]) -> Path:
    """Create `path` (0700) under a private root, refusing symlinked folders; return it resolved."""
    root, names = _locate(path, get_settings().allowed_roots, follow=False)
    ensure_private_root(root)
    os.close(_walk(root, names, path, create=True))
    return root.joinpath(*names)


# -- reading and writing --------------------------------------------------------------------------


def read_bytes(
    path: str | os.PathLike[str],
    *,
    max_bytes: int | None = None,
    roots: Sequence[Path] | None = None,
    follow: bool = False,
    private: bool = False,
) -> bytes:
    """A regular file's bytes, opened without following a link out of the roots.

    `private`: the file must also be the worker user's and unreadable by anyone else (a key)."""
    with open_parent(path, roots=roots, follow=follow) as (dir_fd, name, _):
        fd = _open_below(dir_fd, name, _READ_FLAGS, path)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise PathNotAllowedError(f"{str(path)!r} is not a regular file")
        if private and (st.st_uid != os.geteuid() or st.st_mode & 0o077):
            raise PathNotAllowedError(
                f"{str(path)!r} must belong to the worker's user and be readable by it alone "
                f"(uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}); chmod 600 it or delete it"
            )
        data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise ValueError(f"{str(path)!r} is larger than {max_bytes} bytes")
    return data


def _tmp_name(name: str) -> str:
    return f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def _write_new(dir_fd: int, name: str, data: bytes, path: object, mode: int) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(_open_below(dir_fd, name, flags, path, mode), "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o666) -> None:
    """Write to a temporary name in the same folder, then rename over `path` (never through a link)."""
    with open_parent(path) as (dir_fd, name, _):
        tmp = _tmp_name(name)
        try:
            _write_new(dir_fd, tmp, data, path, mode)  # the umask applies, as for an ordinary open()
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            _remove(dir_fd, tmp)
            raise


def create_exclusive(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o600) -> bool:
    """Write `path` whole unless it exists (two workers may race); True when this call made it."""
    with open_parent(path) as (dir_fd, name, _):
        tmp = _tmp_name(name)
        try:
            _write_new(dir_fd, tmp, data, path, mode)
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            return True
        except FileExistsError:
            return False
        finally:
            _remove(dir_fd, tmp)


def replace_from(dir_fd: int, tmp: str, name: str, path: object) -> None:
    """Rename `tmp` (a file or a folder tree a library wrote) to `name`, refusing any link in it."""
    check_no_links(dir_fd, tmp, path)
    st = _lstat_or_none(dir_fd, name)
    if st is not None and stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def remove(dir_fd: int, name: str) -> None:
    _remove(dir_fd, name)


def _remove(dir_fd: int, name: str) -> None:
    st = _lstat_or_none(dir_fd, name)
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd, ignore_errors=True)
    else:
        os.unlink(name, dir_fd=dir_fd)


def _lstat_or_none(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


# -- folder trees (a library's multi-file output) -------------------------------------------------


def check_no_links(dir_fd: int, name: str, path: object) -> None:
    """Refuse `name` when it is, or (for a folder) holds, anything but regular files and folders."""
    for _ in tree_digests(dir_fd, name, path):
        pass


def tree_digests(dir_fd: int, name: str, path: object, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(relative path, SHA-256) of every regular file in `name`, sorted; a link or device is refused."""
    st = _lstat_or_none(dir_fd, name)
    if st is not None and stat.S_ISREG(st.st_mode):
        yield prefix or name, _file_sha256(dir_fd, name, path)
        return
    fd = _open_below(dir_fd, name, _DIR_FLAGS, path)
    try:
        for entry in sorted(os.listdir(fd)):
            entry_st = os.stat(entry, dir_fd=fd, follow_symlinks=False)
            if not (stat.S_ISREG(entry_st.st_mode) or stat.S_ISDIR(entry_st.st_mode)):
                raise PathNotAllowedError(f"{str(path)!r} holds {entry!r}, neither a file nor a folder")
            yield from tree_digests(fd, entry, path, f"{prefix}/{entry}" if prefix else entry)
    finally:
        os.close(fd)


def _file_sha256(dir_fd: int, name: str, path: object) -> str:
    digest = hashlib.sha256()
    with os.fdopen(_open_below(dir_fd, name, _READ_FLAGS, path), "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise PathNotAllowedError(f"{str(path)!r}: {name!r} is not a regular file")
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
