"""The only place where the warm-start bundle's bytes are written and read back.

`write_verified(path, data)` writes `data` and, beside it, `<path>.sha256` (the digest of what was
written); `read_verified(path)` returns the bytes only when they match that digest. Nothing read from a
cache directory is unpickled or executed unless it came back through `read_verified`. Authentication of
cache entries (an HMAC over the bytes, keyed outside the cache directory) slots in here and only here.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from compilation_bridge.compile.files import atomic_save, atomic_write_text

DIGEST_SUFFIX = ".sha256"
# A bundle is the model's weights-free graph plus compiled kernels: far below this; a larger file is not
# read into memory at all.
MAX_BYTES = 512 << 20


class UnverifiedArtifact(ValueError):
    """An artifact whose bytes do not match the digest written with it (or that has no digest)."""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_bytes(tmp: str, data: bytes) -> None:
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_verified(path: str | os.PathLike[str], data: bytes) -> str:
    """Write `data` to `path` and its digest beside it (data first: a digest never names missing bytes)."""
    atomic_save(path, lambda tmp: _write_bytes(tmp, data))
    value = digest(data)
    atomic_write_text(f"{path}{DIGEST_SUFFIX}", value + "\n")
    return value


def read_verified(path: str | os.PathLike[str]) -> bytes:
    """The bytes at `path`, or `UnverifiedArtifact` when they are missing, too large or not as written."""
    target = Path(path)
    try:
        expected = Path(f"{path}{DIGEST_SUFFIX}").read_text().strip()
        if target.stat().st_size > MAX_BYTES:
            raise UnverifiedArtifact(f"{target.name} is larger than {MAX_BYTES} bytes")
        data = target.read_bytes()
    except OSError as e:
        raise UnverifiedArtifact(f"{target.name} or its digest cannot be read: {e}") from e
    if digest(data) != expected:
        raise UnverifiedArtifact(f"{target.name} does not match the digest written with it")
    return data
