"""What a worker accepted while its store could not take it: new refs, changes and releases.

The shared table keeps them here and its own thread writes them as soon as the store answers; at
shutdown what is left goes to the journal (`journal.py`). Both queues are bounded: callers choose the
session ids and make the refs. One warning says the store went away, one that it is back.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from compilation_bridge.refs.store import Key
from compilation_bridge.refs.table import RefStoreUnavailable

log = logging.getLogger("compilation_bridge.refs")

MAX_QUEUED_SESSIONS = 10_000  # session releases waiting for the store
KINDS = ("write", "release", "release_session")


@dataclass(frozen=True, eq=False)  # compared by identity: the flusher asks "is it still this record?"
class Pending:
    kind: str
    state: bytes | None = None
    before: int = 0  # a session release: only refs whose version is below this (0: all)

    @classmethod
    def write(cls, state: bytes) -> Pending:
        return cls("write", state)

    @classmethod
    def release(cls) -> Pending:
        return cls("release")

    @classmethod
    def release_session(cls, before: int) -> Pending:
        return cls("release_session", before=before)


class PendingChanges:
    def __init__(self, app: str, max_changes: int) -> None:
        self.app = app
        self._max_changes = max(max_changes, 1)
        self._lock = threading.Lock()
        self._changes: dict[Key, Pending] = {}
        self._sessions: dict[str, int] = {}  # session -> release its refs below this version
        self._outage = False  # the store failed since everything here was last written

    def __len__(self) -> int:
        with self._lock:
            return len(self._changes) + len(self._sessions)

    def __contains__(self, key: Key) -> bool:
        return key in self._changes

    def keep(self, key: Key, pending: Pending, exc: Exception | None) -> None:
        """Keep `pending` for `key` (replacing what waited for it); `exc`: why the store did not take it."""
        with self._lock:
            if key not in self._changes and len(self._changes) >= self._max_changes:
                raise RefStoreUnavailable(f"too many changes wait for the ref store: {exc}")
            self._changes[key] = pending
        if exc is not None:
            self.store_failed(exc)

    def queue_session_release(self, session: str, before: int) -> None:
        with self._lock:
            if session in self._sessions or len(self._sessions) < MAX_QUEUED_SESSIONS:
                self._sessions[session] = max(before, self._sessions.get(session, 0))
            # (past the bound, while the store is away, a session's refs go with their lease)

    def pop(self, key: Key) -> Pending | None:
        with self._lock:
            return self._changes.pop(key, None)

    def drop_session(self, session: str) -> list[Key]:
        """Forget the session's waiting changes (it is being released); their keys."""
        with self._lock:
            keys = [key for key in self._changes if key.session == session]
            for key in keys:
                del self._changes[key]
        return keys

    def snapshot(self) -> tuple[list[tuple[str, int]], list[tuple[Key, Pending]]]:
        with self._lock:
            return list(self._sessions.items()), list(self._changes.items())

    def session_written(self, session: str, before: int) -> None:
        with self._lock:
            if self._sessions.get(session) == before:
                del self._sessions[session]

    def written(self, key: Key, pending: Pending) -> None:
        with self._lock:
            if self._changes.get(key) is pending:  # unless a call queued another change meanwhile
                del self._changes[key]

    def for_journal(self) -> dict[Key, Pending]:
        """Everything that waits, session releases included, as journal records."""
        with self._lock:
            records = dict(self._changes)
            for session, before in self._sessions.items():
                records[Key(self.app, session, "")] = Pending.release_session(before)
        return records

    def take(self, records: dict[Key, Pending]) -> None:
        """Records of an earlier worker (from the journal), written with the rest."""
        with self._lock:
            for key, pending in records.items():
                if pending.kind == "release_session":
                    self._sessions[key.session] = max(pending.before, self._sessions.get(key.session, 0))
                else:
                    self._changes[key] = pending

    def store_failed(self, exc: Exception) -> None:
        if not self._outage:
            self._outage = True
            log.warning("ref store unreachable (%s); keeping changes until it is back", exc)

    def store_back(self) -> None:
        if self._outage:
            self._outage = False
            log.warning("ref store reachable again; pending changes written")
