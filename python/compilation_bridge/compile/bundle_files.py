"""The only place where a bundle's bytes (compile/bundle.py) are written and read back.

`write_verified(path, data)` writes `data` with this worker's MAC beside it (`compile/authenticated.py`:
an HMAC-SHA256 under a private key kept outside the cache directory), and returns the bytes' SHA-256;
`read_verified(path)` returns the bytes only when that MAC is valid; `read_sealed(path)` reads an
artifact the compiler sealed (`authenticated.seal`) when it wrote it. Nothing read from a cache directory
is unpickled or executed unless it came back through `read_verified`, and the bundle's manifest names
its payload's SHA-256 too, so a payload valid on its own cannot stand in for another.
"""

from __future__ import annotations

import hashlib
import os

from compilation_bridge.compile.authenticated import (
    MAC_SUFFIX,
    is_sealed,
    read_authenticated,
    write_authenticated,
)
from compilation_bridge.safe_files import read_bytes

# A bundle is the model's weights-free graph plus compiled kernels: far below this; a larger file is not
# read into memory at all.
MAX_BYTES = 512 << 20
DIGEST_SUFFIX = MAC_SUFFIX  # the file beside each entry that vouches for it


class UnverifiedArtifact(ValueError):
    """An artifact without a valid MAC of this worker (planted, edited, truncated or missing)."""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_verified(path: str | os.PathLike[str], data: bytes) -> str:
    """Write `data` to `path` with its MAC (data first: a MAC never vouches for missing bytes)."""
    write_authenticated(path, data)
    return digest(data)


def read_verified(path: str | os.PathLike[str]) -> bytes:
    """The bytes at `path`, or `UnverifiedArtifact` when they are missing, too large or not as written."""
    data = read_authenticated(path, max_bytes=MAX_BYTES)
    if data is None:
        raise UnverifiedArtifact(f"{os.path.basename(path)} carries no valid MAC of this worker")
    return data


def read_sealed(path: str | os.PathLike[str]) -> bytes:
    """A compiled artifact that the compiler sealed when it wrote it (to be copied into a bundle)."""
    if not is_sealed(path):
        raise UnverifiedArtifact(f"{os.path.basename(path)} carries no valid MAC of this worker")
    return read_bytes(path, max_bytes=MAX_BYTES)
