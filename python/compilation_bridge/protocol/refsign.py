"""HMAC signatures of ref store entries, with a key kept in the private state folder.

Entries are only ever decoded into allowlisted config types, but a store may be shared (Redis): the
signature makes sure that what a worker restores was written by a worker holding the same key, and that
an entry was not altered or moved to another ref. Every worker sharing one store needs the same key file.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from compilation_bridge.protocol.statedir import private_file

KEY_FILE = "refstore.key"
KEY_BYTES = 32


def load_or_create_key(state_dir: Path) -> bytes:
    path = state_dir / KEY_FILE
    if not path.exists():
        _create_key(path)
    private_file(path)
    key = bytes.fromhex(path.read_text().strip())
    if len(key) < KEY_BYTES:
        raise ValueError(f"{path} holds a key shorter than {KEY_BYTES} bytes")
    return key


def _create_key(path: Path) -> None:
    # O_EXCL: two workers starting together keep whichever key was written first.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(KEY_BYTES))


class Signer:
    def __init__(self, key: bytes, key_path: Path | None = None) -> None:
        self._key = key
        self.key_path = key_path

    def sign(self, session: str, ref_id: str, state: bytes) -> bytes:
        message = b"\0".join((b"cb-ref-v1", session.encode(), ref_id.encode(), state))
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def verify(self, session: str, ref_id: str, state: bytes, mac: bytes) -> bool:
        return hmac.compare_digest(self.sign(session, ref_id, state), mac)
