"""The local ref table: objects only in this worker (`COMPILATION_BRIDGE_REF_STORE=off`).

TTL counts from the last access (`SNAKEBRIDGE_REF_TTL_SECONDS`, 0 = none) and `SNAKEBRIDGE_REF_MAX`
bounds the refs with LRU eviction. One deliberate difference from SnakeBridge: `SNAKEBRIDGE_REF_MAX` is
applied per session and eviction only ever drops the creating session's own least-recently-used refs,
so that one caller cannot evict another's objects. The table as a whole is bounded separately
(`refs.limits`), and so is the number of sessions holding refs; when either is full, new refs are
refused rather than taken from other sessions. A session whose last ref goes is forgotten at once, so
ids that never hold a ref (or no longer do) cost nothing and never count toward the limit.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from compilation_bridge.refs.limits import RefLimits, table_full, too_many_sessions
from compilation_bridge.refs.table import UNKNOWN_REF, Origin


class _Entry:
    __slots__ = ("last_access", "obj")

    def __init__(self, obj: Any, now: float) -> None:
        self.obj = obj
        self.last_access = now


class LocalRefTable:
    """Thread-safe; every operation first drops refs whose TTL has run out."""

    def __init__(self, limits: RefLimits | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or RefLimits.from_env()
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, OrderedDict[str, _Entry]] = {}
        # Every live ref in last-access order across sessions, so TTL pruning stops at the first live one.
        self._by_access: OrderedDict[tuple[str, str], None] = OrderedDict()

    def put(self, session_id: str, obj: Any, origin: Origin | None = None) -> str:
        # `origin` (the ref and attribute the object was read from) matters to the shared table only:
        # here the object simply stays the one inside its parent.
        ref_id = uuid.uuid4().hex
        with self._lock:
            now = self._clock()
            self._prune(now)
            refs = self._session_for_put(session_id)
            refs[ref_id] = _Entry(obj, now)
            self._by_access[(session_id, ref_id)] = None
            limit = self.limits.max_per_session
            while limit > 0 and len(refs) > limit:
                old_id, _ = refs.popitem(last=False)
                del self._by_access[(session_id, old_id)]
        return ref_id

    def _session_for_put(self, session_id: str) -> OrderedDict[str, _Entry]:
        """The session's refs, after every limit allowed one more. A session is created only here, and
        only to be filled at once, so the table never holds a session without refs."""
        self.limits.check_memory()
        refs = self._sessions.get(session_id)
        limit = self.limits.max_total
        if limit > 0 and len(self._by_access) >= limit:
            raise RuntimeError(str(table_full(len(self._by_access), limit)))
        if refs is None:
            limit = self.limits.max_sessions
            if limit > 0 and len(self._sessions) >= limit:
                raise RuntimeError(str(too_many_sessions(len(self._sessions), limit)))
            refs = self._sessions[session_id] = OrderedDict()
        return refs

    def get(self, session_id: str, ref_id: str) -> Any:
        with self._lock:
            now = self._clock()
            self._prune(now)
            refs = self._sessions.get(session_id)
            entry = refs.get(ref_id) if refs is not None else None
            if refs is None or entry is None:
                raise KeyError(UNKNOWN_REF.format(ref_id))
            entry.last_access = now
            refs.move_to_end(ref_id)
            self._by_access.move_to_end((session_id, ref_id))
            return entry.obj

    def release(self, session_id: str, ref_id: str) -> bool:
        with self._lock:
            self._prune(self._clock())
            refs = self._sessions.get(session_id)
            if refs is None or refs.pop(ref_id, None) is None:
                return False
            del self._by_access[(session_id, ref_id)]
            if not refs:
                del self._sessions[session_id]
            return True

    def release_session(self, session_id: str) -> int:
        with self._lock:
            self._prune(self._clock())
            refs = self._sessions.pop(session_id, None)
            if not refs:
                return 0
            for ref_id in refs:
                del self._by_access[(session_id, ref_id)]
            return len(refs)

    def release_session_soon(self, session_id: str) -> int:
        return self.release_session(session_id)  # no store to wait for

    def sync(self, session_id: str, ref_ids: Iterable[str]) -> None:
        """Nothing to do: objects live only here (the shared table writes changed state to its store)."""

    def start(self) -> None:
        """Nothing runs in the background."""

    def close(self, timeout_s: float) -> None:
        """Nothing waits: the objects end with the worker."""

    def session_count(self) -> int:
        with self._lock:
            self._prune(self._clock())
            return len(self._sessions)

    def count(self, session_id: str | None = None) -> int:
        with self._lock:
            self._prune(self._clock())
            if session_id is None:
                return len(self._by_access)
            return len(self._sessions.get(session_id, ()))

    def _prune(self, now: float) -> None:
        ttl = self.limits.ttl_seconds
        if ttl <= 0:
            return
        while self._by_access:
            session_id, ref_id = next(iter(self._by_access))
            refs = self._sessions[session_id]
            if now - refs[ref_id].last_access <= ttl:
                return
            del self._by_access[(session_id, ref_id)]
            del refs[ref_id]
            if not refs:
                del self._sessions[session_id]
