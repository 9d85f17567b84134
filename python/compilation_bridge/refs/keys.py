"""The worker's private state folder and the key kept in it.

The folder holds the embedded ref store, the key that signs ref store entries and the journal of writes
that waited for the store at shutdown, so nobody but the worker's user may read, plant or swap anything
there. It gets the same checks as an allowed root (`safe_files.ensure_private_folder`: owned by the
worker's user, closed to others, and every parent folder changeable only by that user or root), is then
opened once and held by a descriptor, and every file in it is opened relative to that descriptor without
following links, created 0600.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from compilation_bridge.safe_files import PathNotAllowedError, ensure_private_folder
from compilation_bridge.settings import STATE_DIR_ENV, state_dir_setting

KEY_FILE = "refstore.key"
KEY_BYTES = 32
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class StateDirError(PathNotAllowedError):
    pass


class StateFolder:
    """The state folder, checked and held open; files are reached only through the held descriptor."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(os.path.realpath((path or state_dir_setting()).expanduser()))
        try:
            ensure_private_folder(self.path, STATE_DIR_ENV, "state folder")
            self.fd = os.open(self.path, _DIR_FLAGS)
        except OSError as exc:
            raise StateDirError(f"state folder {self.path}: {exc}") from exc
        if os.fstat(self.fd).st_uid != os.geteuid():  # swapped between the check and the open
            os.close(self.fd)
            raise StateDirError(f"state folder {self.path} changed owner while it was opened")

    def proc_path(self, name: str) -> str:
        """A path to `name` that goes through the held descriptor, for libraries that want a path."""
        return f"/proc/self/fd/{self.fd}/{name}"

    def create_private_file(self, name: str) -> None:
        """Make `name` an empty 0600 file of ours if missing; refuse a link or another user's file."""
        fd = self._open(name, os.O_RDWR | os.O_CREAT)
        try:
            self._check_private(fd, name)
        finally:
            os.close(fd)

    def make_private_if_present(self, name: str) -> None:
        """Check a file another library made (SQLite's -wal and -shm) without opening it: closing any
        descriptor of a file drops every POSIX lock this process holds on it, and SQLite's lock on its
        -shm is what stops a worker starting beside this one from truncating the shared memory that
        this one has mapped (which kills this worker with SIGBUS)."""
        try:
            info = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if self._refuse_unless_private(info, name):
            os.chmod(name, 0o600, dir_fd=self.fd)  # a regular file of ours, in a folder only we can change

    def read(self, name: str, max_bytes: int) -> bytes | None:
        """A private file's bytes (None when missing); refused when larger than `max_bytes`."""
        try:
            fd = self._open(name, os.O_RDONLY)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as file:
            self._check_private(file.fileno(), name)
            data = file.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise StateDirError(f"{self.path / name} is larger than {max_bytes} bytes; remove it")
        return data

    def write(self, name: str, data: bytes) -> None:
        """Replace `name` atomically with a new 0600 file."""
        tmp = self._written_temp(name, data)
        try:
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            self.remove(tmp)
            raise

    def create_once(self, name: str, data: bytes) -> None:
        """Create `name` holding `data` unless it exists: readers see no file or the whole of it, and of
        two processes creating it at once, the first to link its file in place wins."""
        tmp = self._written_temp(name, data)
        try:
            os.link(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd, follow_symlinks=False)
        except FileExistsError:
            pass
        finally:
            self.remove(tmp)

    def _written_temp(self, name: str, data: bytes) -> str:
        """A new 0600 temporary file beside `name` holding `data`, on disk; returns its name."""
        tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        fd = self._open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
        except BaseException:
            self.remove(tmp)
            raise
        return tmp

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def size_of(self, name: str) -> int:
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_size
        except FileNotFoundError:
            return 0

    def key(self) -> bytes:
        """The key that signs ref store entries, made on first use. Workers starting together in a new
        folder all read the first key made, never a partly written one. Every worker sharing one store
        needs the same key file."""
        text = self.read(KEY_FILE, 4 * KEY_BYTES)
        if text is None:
            self.create_once(KEY_FILE, secrets.token_hex(KEY_BYTES).encode())
            text = self.read(KEY_FILE, 4 * KEY_BYTES) or b""
        key = _parsed_key(text)
        if key is None:
            raise StateDirError(f"{self.path / KEY_FILE} does not hold a key of {KEY_BYTES} bytes")
        return key

    def key_on_disk(self) -> bytes | None:
        """The key the file holds now, never creating one; None when it is missing, unreadable or not
        a key. A worker reads its key once: this tells whether an operator has copied another one in
        since (hosts sharing a Redis store need one key)."""
        try:
            text = self.read(KEY_FILE, 4 * KEY_BYTES)
        except OSError:  # StateDirError included: a file that is not private is no key to adopt
            return None
        return None if text is None else _parsed_key(text)

    def _open(self, name: str, flags: int) -> int:
        try:
            return os.open(name, flags | _NOFOLLOW, 0o600, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StateDirError(f"{self.path / name} is a symbolic link; remove it") from exc
            raise

    def _check_private(self, fd: int, name: str) -> None:
        if self._refuse_unless_private(os.fstat(fd), name):
            os.fchmod(fd, 0o600)

    def _refuse_unless_private(self, info: os.stat_result, name: str) -> bool:
        """Refuse a file that is not a regular file of the worker's user or that others may write; True
        when it is ours but readable by others (an older release or a umask left it so): narrow it."""
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            raise StateDirError(f"{self.path / name} is not a file of the worker's user; remove it")
        if stat.S_IMODE(info.st_mode) & 0o022:
            raise StateDirError(f"{self.path / name} may be written by other users; remove it")
        return bool(stat.S_IMODE(info.st_mode) & 0o077)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _parsed_key(text: bytes) -> bytes | None:
    """The key written as hex in `text`, or None when it is not one of at least KEY_BYTES bytes."""
    try:
        key = bytes.fromhex(text.decode().strip())
    except (UnicodeDecodeError, ValueError):
        return None
    return key if len(key) >= KEY_BYTES else None
