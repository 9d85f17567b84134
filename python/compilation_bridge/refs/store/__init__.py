"""The ref store: where every ref's state lives so that any worker of a pool (or of many hosts) can serve it.

`Store` is the small interface the shared ref table needs; `sqlite` (embedded, one host) and `redis`
(many hosts) implement it in their own modules. Entries are opaque signed bytes here: what they hold is
`refs.state`'s business, who wrote them `refs.signing`'s.

Every entry belongs to one application (a namespace the worker derives from its Snakepit instance and
its key, never from a caller): quotas, counts, releases and evictions only ever see that application's
entries. Every entry also carries its own expiry (its writer's lease, renewed by use), so expired
entries can be dropped by any worker without knowing whose they are: an application that stopped or
crashed leaves nothing behind for longer than its lease.

Versions are chosen by the writer and signed with the state, so a store (or whoever can write to it)
cannot hand a worker an older state as the current one without the worker noticing.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

# The lease of an entry that never expires: finite, so that expiry times still order entries by last use
# (eviction) and stay exact enough in Redis scores and Lua numbers.
FOREVER_S = 1e12


class Key(NamedTuple):
    """Where an entry lives: the application, the caller's session, the ref id."""

    app: str
    session: str
    ref: str


class StoreUnavailable(ConnectionError):
    """The store cannot be reached (Redis down, SQLite file locked for too long)."""


class QuotaExceeded(RuntimeError):
    """A new ref would exceed the application's limits; the message says which, its value and its maximum."""


@dataclass(frozen=True)
class Quota:
    max_per_session: int  # refs; 0: none; beyond it the session's least recently used refs go
    max_total: int  # refs of the application; 0: none; beyond it new refs are refused
    max_sessions: int  # sessions of the application holding refs; 0: none
    max_session_bytes: int = 0  # encoded state held by one session; 0: none
    max_total_bytes: int = 0  # encoded state held by the application; 0: none


@dataclass(frozen=True)
class Entry:
    version: int
    state: bytes
    mac: bytes


def new_version() -> int:
    """A first version: milliseconds since the epoch, times 1024, plus a random part. Versions only grow,
    also across a store that lost its data, and stay below 2**53 (exact in Redis' Lua numbers)."""
    return versions_from_now() | secrets.randbelow(1 << 10)


def versions_from_now() -> int:
    """The least version a ref created from this millisecond on can have."""
    return (time.time_ns() // 1_000_000) << 10


class Store(Protocol):
    location: str  # for messages and logs: scheme, host, port, db; never a secret

    def create(self, key: Key, entry: Entry, expires: float, quota: Quota) -> list[str]:
        """Add a ref within `quota`; returns the ids of the session's refs evicted for it."""
        ...

    def version(self, key: Key, now: float) -> int | None:
        """The ref's version, or None when it is gone or its lease ran out before `now`."""
        ...

    def versions(self, keys: Sequence[Key], now: float) -> list[int | None]:
        """`version` of every key, in order, in one round trip per few hundred keys (the table checks
        its copies against the store in batches)."""
        ...

    def load(self, key: Key, now: float, max_bytes: int) -> Entry | None:
        """The ref's entry (None: gone or expired); raises QuotaExceeded, before reading the state, when
        the state is larger than `max_bytes` (0: no limit)."""
        ...

    def update(self, key: Key, entry: Entry, expected: int, expires: float, quota: Quota) -> int | None:
        """Replace the state if the ref is still at version `expected`; `entry.version` on success, None
        when the ref is gone or another worker wrote first. Raises QuotaExceeded past the byte quotas."""
        ...

    def touch(self, key: Key, expires: float) -> None: ...

    def release(self, key: Key) -> bool: ...

    def release_session(self, app: str, session: str, before: int = 0) -> int:
        """Drop the session's refs; with `before`, only those whose version is below it (a release
        queued at a moment drops what existed then, not refs made later: versions start at the time of
        creation, see `new_version`)."""
        ...

    def count(self, app: str, session: str | None = None) -> int: ...

    def session_count(self, app: str) -> int: ...

    def stored_bytes(self, app: str, session: str | None = None) -> int: ...

    def release_other_runs(self, app: str) -> int:
        """Drop the application's refs made in other Snakepit runs than this store's writer's, where the
        store can tell that no such run is alive (one host: Snakepit's start-up cleanup has ended every
        other run of the instance there); 0 where it cannot (many hosts share it)."""
        ...

    def prune(self, now: float) -> int:
        """Drop every entry whose lease ran out before `now`, whichever application wrote it."""
        ...

    def tidy(self) -> None:
        """Give back space the store holds beyond its data (SQLite's write-ahead log)."""
        ...

    def close(self) -> None: ...
