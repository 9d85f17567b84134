"""Changes that wait for the ref store, and the journal that keeps them across a worker's end.

While the store is unreachable a worker keeps what it accepted (new refs, changes, releases) as
`Pending` records. If it must stop before the store is back, it writes them to a journal file in its
private state folder, signed with the store's key; the next worker of the same application and store
takes them at start and writes them as soon as the store answers. A journal that fails its signature,
is too large or malformed is set aside and reported, never loaded.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from typing import Any

import orjson

from compilation_bridge.refs.keys import StateFolder
from compilation_bridge.refs.pending import KINDS, Pending
from compilation_bridge.refs.signing import Signer
from compilation_bridge.refs.store import Key

log = logging.getLogger("compilation_bridge.refs")

MAX_JOURNAL_BYTES = 1 << 30
_DOMAIN = b"cb-journal-v1"


class Journal:
    def __init__(self, folder: StateFolder, signer: Signer, location: str) -> None:
        self.folder = folder
        self.signer = signer
        self.location = location

    def _name(self, app: str) -> str:
        # One journal per application and store: a worker never writes another store's changes.
        return "pending-" + hashlib.sha256(f"{app}\0{self.location}".encode()).hexdigest()[:24] + ".json"

    def save(self, app: str, pending: dict[Key, Pending]) -> None:
        records = [
            [p.kind, key.session, key.ref, base64.b64encode(p.state).decode() if p.state else None, p.before]
            for key, p in pending.items()
        ]
        body = orjson.dumps({"app": app, "records": records})
        mac = self.signer.tag(_DOMAIN, body)
        self.folder.write(self._name(app), mac.hex().encode() + b"\n" + body)

    def take(self, app: str) -> dict[Key, Pending]:
        """The journaled changes of `app` (the file is removed: from now on they are this worker's)."""
        name = self._name(app)
        try:
            data = self.folder.read(name, MAX_JOURNAL_BYTES)
        except OSError as exc:
            log.warning("ref store journal %s not loaded: %s", name, exc)
            return {}
        if data is None:
            return {}
        self.folder.remove(name)
        try:
            return self._parse(app, data)
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("ref store journal %s refused and dropped: %s", name, exc)
            return {}

    def _parse(self, app: str, data: bytes) -> dict[Key, Pending]:
        mac_hex, _, body = data.partition(b"\n")
        if not self.signer.verify_tag(_DOMAIN, body, bytes.fromhex(mac_hex.decode())):
            raise ValueError("its signature does not match this worker's key")
        tree: Any = orjson.loads(body)
        if tree.get("app") != app:
            raise ValueError("it belongs to another application")
        pending: dict[Key, Pending] = {}
        for kind, session, ref, state, before in tree["records"]:
            if kind not in KINDS or not isinstance(session, str) or not isinstance(ref, str):
                raise ValueError("malformed record")
            if type(before) is not int:
                raise ValueError("malformed record")
            saved = base64.b64decode(state) if state else None
            pending[Key(app, session, ref)] = Pending(kind, saved, before)
        log.warning("ref store journal: %d changes of an earlier worker will be written", len(pending))
        return pending
