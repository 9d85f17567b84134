"""Cache files only this worker's user can have made: an HMAC-SHA256 beside each, under a private key.

Compile cache entries are unpickled, imported or loaded as code, so one planted by anyone else (another
user, an old copy, a file edited by hand) must never be loaded. Each entry `<name>` gets `<name>.mac`
holding the hex HMAC of its name and contents under a 32-byte key from `os.urandom`, kept in
`<cache home>/state/cache-mac.key` (0600, in a 0700 folder; made on first use).

API (all paths under the allowed roots):

- `write_authenticated(path, data)`: write `data` and its MAC, each atomically.
- `read_authenticated(path) -> bytes | None`: the contents when the MAC is valid; None when the entry
  is missing, or invalid (logged once per path): the caller treats both as a cache miss.
- `seal(path)` / `is_sealed(path)`: the same for a file or a folder tree that a library wrote by path
  (the MAC then covers every file's relative path and SHA-256). Verify right before loading.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import os
from pathlib import Path

from compilation_bridge.safe_files import (
    PathNotAllowedError,
    atomic_write_bytes,
    create_exclusive,
    make_dirs,
    open_parent,
    read_bytes,
    tree_digests,
)
from compilation_bridge.settings import get_settings

logger = logging.getLogger(__name__)

MAC_SUFFIX = ".mac"
KEY_BYTES = 32
MAX_ENTRY_BYTES = 1 << 30
_DOMAIN = b"compilation-bridge cache entry v1\0"
_reported: set[str] = set()


def key_path() -> Path:
    return get_settings().cache_home() / "state" / "cache-mac.key"


def mac_path(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    return p.with_name(p.name + MAC_SUFFIX)


def write_authenticated(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path`, then its MAC. A crash between leaves an entry that reads as invalid."""
    atomic_write_bytes(path, data)
    atomic_write_bytes(mac_path(path), _tag(b"file", path, data).encode())


def read_authenticated(path: str | os.PathLike[str], max_bytes: int = MAX_ENTRY_BYTES) -> bytes | None:
    """`path`'s contents when its MAC is this worker's, else None (never an exception)."""
    try:
        data = read_bytes(path, max_bytes=max_bytes)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        _reject(path, str(e))
        return None
    if not _tag_matches(path, _tag(b"file", path, data)):
        return None
    return data


def seal(path: str | os.PathLike[str]) -> None:
    """Write the MAC of a file or folder tree that a library has just written at `path`."""
    atomic_write_bytes(mac_path(path), _tree_tag(path).encode())


def is_sealed(path: str | os.PathLike[str]) -> bool:
    """True when the file or tree at `path` is exactly what `seal` authenticated (links refused)."""
    try:
        tag = _tree_tag(path)
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as e:
        _reject(path, str(e))
        return False
    return _tag_matches(path, tag)


def _tree_tag(path: str | os.PathLike[str]) -> str:
    with open_parent(path) as (dir_fd, name, _):
        manifest = "".join(f"{rel}\0{digest}\n" for rel, digest in tree_digests(dir_fd, name, path))
    return _tag(b"tree", path, manifest.encode())


def _tag(kind: bytes, path: str | os.PathLike[str], data: bytes) -> str:
    # The name is authenticated too, so one valid entry cannot stand in for another (another range).
    message = _DOMAIN + kind + b"\0" + Path(path).name.encode() + b"\0" + data
    return hmac.new(_key(key_path()), message, hashlib.sha256).hexdigest()


def _tag_matches(path: str | os.PathLike[str], expected: str) -> bool:
    try:
        stored = read_bytes(mac_path(path), max_bytes=256)
    except FileNotFoundError:
        _reject(path, f"no {MAC_SUFFIX} file beside it")
        return False
    except (OSError, ValueError) as e:
        _reject(path, str(e))
        return False
    if not hmac.compare_digest(stored.strip(), expected.encode()):
        _reject(path, "its MAC does not match")
        return False
    return True


def _reject(path: str | os.PathLike[str], why: str) -> None:
    if str(path) not in _reported:
        _reported.add(str(path))
        logger.warning(
            "ignoring compile cache entry %s: %s; it was not written by this worker's user or has "
            "changed since, so it is compiled again instead of loaded",
            path,
            why,
        )


@functools.cache
def _key(path: Path) -> bytes:
    """The MAC key at `path`, made on first use; refused unless only the worker's user can read it."""
    make_dirs(path.parent)
    if not os.path.lexists(path):
        create_exclusive(path, os.urandom(KEY_BYTES), mode=0o600)
    try:
        key = read_bytes(path, max_bytes=KEY_BYTES, private=True)
    except PathNotAllowedError as e:
        raise PathNotAllowedError(f"compile cache key: {e}") from e
    if len(key) != KEY_BYTES:
        raise PathNotAllowedError(f"compile cache key {str(path)!r} is damaged; delete it")
    return key
