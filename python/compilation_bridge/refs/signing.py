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

from compilation_bridge.refs.store import Key

_DOMAIN = b"cb-ref-v2"


class Signer:
    def __init__(self, key: bytes, key_path: object = None) -> None:
        self._key = key
        self.key_path = key_path

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
