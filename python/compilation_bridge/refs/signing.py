"""HMAC signatures of ref store entries, and the application namespace derived from the same key.

Entries are only ever decoded into allowlisted config types, but a store may be shared (Redis): the
signature makes sure that what a worker restores was written by a worker holding the same key, for this
application, session, ref and version. A state moved to another ref, session or application fails, and
so does an old signed state written back over a newer one once a worker has seen the newer version
(the table refuses any version below one it has seen).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable

from compilation_bridge.refs.store import Key

_DOMAIN = b"cb-ref-v2"


class Signer:
    def __init__(
        self, key: bytes, key_path: object = None, on_disk: Callable[[], bytes | None] | None = None
    ) -> None:
        self._key = key
        self.key_path = key_path
        self._on_disk = on_disk  # reads the key file as it is now (refs.keys.StateFolder.key_on_disk)

    def replaced_on_disk(self) -> bool:
        """Whether the key file now holds another key than the one this signer was made with: an
        operator copied a host's key in after this worker had started (it keeps signing with its own
        key, in its own namespace, until it is restarted)."""
        if self._on_disk is None:
            return False
        current = self._on_disk()
        return current is not None and not hmac.compare_digest(current, self._key)

    def namespace(self, application: str) -> str:
        """The store namespace of `application`: unguessable without the key, so two applications (or
        two pools with different keys) sharing a store never meet, whatever ids their callers send."""
        digest = hmac.new(self._key, b"cb-app-v1\0" + application.encode(), hashlib.sha256)
        return digest.hexdigest()[:32]

    def sign(self, key: Key, version: int, state: bytes) -> bytes:
        head = b"\0".join((_DOMAIN, key.app.encode(), key.session.encode(), key.ref.encode()))
        message = head + b"\0" + str(version).encode() + b"\0" + state
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def verify(self, key: Key, version: int, state: bytes, mac: bytes) -> bool:
        return hmac.compare_digest(self.sign(key, version, state), mac)

    def tag(self, domain: bytes, data: bytes) -> bytes:
        """A MAC of other data kept beside the refs (the journal, Inductor's remote cache entries)."""
        return hmac.new(self._key, domain + b"\0" + data, hashlib.sha256).digest()

    def verify_tag(self, domain: bytes, data: bytes, mac: bytes) -> bool:
        return hmac.compare_digest(self.tag(domain, data), mac)
