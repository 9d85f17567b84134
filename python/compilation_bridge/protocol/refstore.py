"""The ref store: where every ref's state lives so that any worker of a pool (or of many hosts) can serve it.

`Store` is the small interface the shared ref table needs; `sqlite` (embedded, one host) and `redis`
(many hosts) implement it in their own modules. Entries are opaque signed bytes here: what they hold is
`refstate`'s business, who wrote them `refsign`'s. Every operation is one short statement or script, so
a version check costs one round trip.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Protocol


class StoreUnavailable(ConnectionError):
    """The store cannot be reached (Redis down, SQLite file locked for too long)."""


class QuotaExceeded(RuntimeError):
    """A new ref would exceed the store-wide limits; the message is the one the local table gives."""


@dataclass(frozen=True)
class Quota:
    max_per_session: int  # 0: none; beyond it the session's least recently used refs go
    max_total: int  # 0: none; beyond it new refs are refused
    max_sessions: int  # 0: none; beyond it refs in a new session are refused


@dataclass(frozen=True)
class Entry:
    # Versions start at a random number, so that a store that lost its data (a Redis restarted without
    # persistence) never hands out again a version a worker's stale copy still carries.
    version: int
    state: bytes
    mac: bytes


def first_version() -> int:
    return secrets.randbelow(1 << 40) + 1  # below 2**53: exact in Redis' Lua numbers


def table_full(count: int) -> QuotaExceeded:
    return QuotaExceeded(
        f"SnakeBridge reference table is full ({count} refs); release refs or sessions before creating more"
    )


def too_many_sessions(count: int, limit: int) -> QuotaExceeded:
    return QuotaExceeded(
        f"too many sessions hold SnakeBridge references ({count}, limit {limit}); "
        "release sessions before creating refs in a new one"
    )


class Store(Protocol):
    location: str  # for messages and logs; never holds a password

    def create(self, session: str, ref_id: str, entry: Entry, now: float, quota: Quota) -> list[str]:
        """Add a ref within `quota`; returns the ids of the session's refs evicted for it."""
        ...

    def upsert(self, session: str, ref_id: str, entry: Entry, now: float) -> int:
        """Write a ref whatever its version (refs accepted while the store was unreachable); an existing
        ref gets the next version, a new one `entry.version`."""
        ...

    def version(self, session: str, ref_id: str) -> int | None: ...

    def load(self, session: str, ref_id: str) -> Entry | None: ...

    def update(self, session: str, ref_id: str, state: bytes, mac: bytes, expected: int) -> int | None:
        """Replace the state if the ref is still at `expected`; the new version, or None when the ref is
        gone or another worker wrote a newer state first."""
        ...

    def touch(self, session: str, ref_id: str, now: float) -> None: ...

    def release(self, session: str, ref_id: str) -> bool: ...

    def release_session(self, session: str) -> int: ...

    def count(self, session: str | None = None) -> int: ...

    def session_count(self) -> int: ...

    def prune(self, before: float) -> int:
        """Drop refs last used before `before` (TTL); returns how many."""
        ...

    def close(self) -> None: ...
