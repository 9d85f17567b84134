"""The ref table: live Python objects that callers hold by (session id, ref id).

Semantics follow SnakeBridge's adapter: ids are uuid4 hex, TTL counts from the last access
(`SNAKEBRIDGE_REF_TTL_SECONDS`, 0 = none), `SNAKEBRIDGE_REF_MAX` bounds the refs with LRU eviction,
and the error messages are the exact strings SnakeBridge's Elixir side pattern-matches.

One deliberate difference: `SNAKEBRIDGE_REF_MAX` is applied per session and eviction only ever drops
the creating session's own least-recently-used refs, so that one caller cannot evict another's objects.
The table as a whole is bounded separately (`COMPILATION_BRIDGE_MAX_TOTAL_REFS`), and so is the number of
sessions holding refs (`COMPILATION_BRIDGE_MAX_SESSIONS`); when either is full, new refs are refused
rather than taken from other sessions. A session whose last ref goes is forgotten at once, so ids that
never hold a ref (or no longer do) cost nothing and never count toward the limit.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from compilation_bridge.protocol.sessionids import (
    MAX_SESSION_ID_BYTES,
    check_session_id,
    is_too_long,
    utf8_size,
)
from compilation_bridge.settings import (
    MAX_RSS_MB_ENV,
    MAX_SESSIONS_ENV,
    MAX_TOTAL_REFS_ENV,
    REF_MAX_ENV,
    REF_TTL_ENV,
    env_float,
    env_int,
)

UNKNOWN_REF = "Unknown SnakeBridge reference: {}"
SESSION_MISMATCH = "SnakeBridge reference session mismatch"
INVALID_REF = "Invalid SnakeBridge reference payload"
MISSING_ID = "SnakeBridge reference missing id"

DEFAULT_REF_MAX = 10_000
MEMORY_CHECK_EVERY = 64  # refs created between two reads of the process's resident memory
DEFAULT_MAX_TOTAL_REFS = 50_000  # a config object is a few KiB: bounds the table to a few hundred MiB
DEFAULT_MAX_SESSIONS = 10_000  # as many as Snakepit's own SessionStore holds


@dataclass(frozen=True)
class RefLimits:
    ttl_seconds: float = 0.0
    max_per_session: int = DEFAULT_REF_MAX
    max_total: int = DEFAULT_MAX_TOTAL_REFS
    # Sessions holding refs (a session without refs costs nothing: it is never kept). 0: no limit.
    max_sessions: int = DEFAULT_MAX_SESSIONS
    # Refs can hold big objects (a list field of a million ints): above this resident size new refs
    # are refused with MemoryError. 0 disables the check.
    max_rss_bytes: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RefLimits:
        """The operator's limits (`compilation_bridge.settings` documents them), from `env` or the
        environment. Like the reference adapter, an unparsable value leaves the default instead of
        crashing. The least value is 0, which means "no limit" (the checks all test `> 0`)."""
        return cls(
            ttl_seconds=env_float(REF_TTL_ENV, 0.0, least=0.0, env=env),
            max_per_session=env_int(REF_MAX_ENV, DEFAULT_REF_MAX, least=0, env=env),
            max_total=env_int(MAX_TOTAL_REFS_ENV, DEFAULT_MAX_TOTAL_REFS, least=0, env=env),
            max_sessions=env_int(MAX_SESSIONS_ENV, DEFAULT_MAX_SESSIONS, least=0, env=env),
            max_rss_bytes=env_int(MAX_RSS_MB_ENV, default_max_rss_mb(), least=0, env=env) << 20,
        )


def default_max_rss_mb() -> int:
    """8 GiB, or three quarters of the machine's memory if that is less."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8192
    return min(8192, physical * 3 // 4 >> 20)


def resident_bytes() -> int:
    """Current resident set size (Linux /proc; 0 where unavailable, which disables the check)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class _Entry:
    __slots__ = ("last_access", "obj")

    def __init__(self, obj: Any, now: float) -> None:
        self.obj = obj
        self.last_access = now


class RefTable:
    """Thread-safe; every operation first drops refs whose TTL has run out."""

    def __init__(self, limits: RefLimits | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or RefLimits.from_env()
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, OrderedDict[str, _Entry]] = {}
        # Every live ref in last-access order across sessions, so TTL pruning stops at the first live one.
        self._by_access: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._puts = 0

    def put(self, session_id: str, obj: Any, origin: tuple[str, str] | None = None) -> str:
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
        refs = self._sessions.get(session_id)
        # A new session's bookkeeping costs memory too: always check before creating one.
        self._check_memory(force=refs is None)
        if self.limits.max_total > 0 and len(self._by_access) >= self.limits.max_total:
            raise RuntimeError(
                f"SnakeBridge reference table is full ({len(self._by_access)} refs); "
                "release refs or sessions before creating more"
            )
        if refs is None:
            self._check_session_count()
            refs = self._sessions[session_id] = OrderedDict()
        return refs

    def _check_session_count(self) -> None:
        limit = self.limits.max_sessions
        if limit > 0 and len(self._sessions) >= limit:
            raise RuntimeError(
                f"too many sessions hold SnakeBridge references ({len(self._sessions)}, limit {limit}); "
                "release sessions before creating refs in a new one"
            )

    def _check_memory(self, force: bool = False) -> None:
        self._puts += 1
        if self.limits.max_rss_bytes <= 0 or (self._puts % MEMORY_CHECK_EVERY and not force):
            return
        resident = resident_bytes()
        if resident > self.limits.max_rss_bytes:
            self._puts -= 1  # check again on the next creation
            raise MemoryError(
                f"worker memory {resident >> 20} MiB is above COMPILATION_BRIDGE_MAX_RSS_MB "
                f"({self.limits.max_rss_bytes >> 20} MiB); release refs or sessions before creating more"
            )

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

    def sync(self, session_id: str, ref_ids: Any) -> None:
        """Nothing to do: objects live only here (the shared table writes changed state to its store)."""

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


def ref_identity(ref: Any, session_id: str) -> str:
    """The ref id of a wire ref, after checking its shape and that it belongs to `session_id`."""
    if not isinstance(ref, dict):
        raise ValueError(INVALID_REF)
    if ref.get("__type__") in ("ref", "stream_ref"):
        ref_id = ref.get("id") or ref.get("ref_id")
    elif ref.get("__snakebridge_ref__"):
        ref_id = ref.get("ref_id")
    elif "id" in ref and ("session_id" in ref or "ref_id" in ref):
        ref_id = ref.get("id")
    else:
        raise ValueError(INVALID_REF)
    if not ref_id:
        raise ValueError(MISSING_ID)
    if not isinstance(ref_id, str):
        raise ValueError(INVALID_REF)
    if is_too_long(ref_id):  # ours are 32 hex digits; a longer one would only be echoed back in errors
        raise ValueError(
            f"SnakeBridge reference id too long: {utf8_size(ref_id)} bytes "
            f"(limit {MAX_SESSION_ID_BYTES} bytes)"
        )
    ref_session = ref.get("session_id")
    if isinstance(ref_session, str):
        check_session_id(ref_session, "reference session_id")
    if ref_session is not None and ref_session != session_id:
        raise ValueError(SESSION_MISMATCH)
    return ref_id


def is_wire_ref(value: dict[str, Any]) -> bool:
    """Whether a decoded dict is a ref by SnakeBridge's rules (tagged, legacy, or untagged id+session)."""
    if value.get("__type__") in ("ref", "stream_ref") or value.get("__snakebridge_ref__"):
        return True
    return "__type__" not in value and "id" in value and ("session_id" in value or "ref_id" in value)
