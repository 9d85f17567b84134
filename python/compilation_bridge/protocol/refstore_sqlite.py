"""The embedded ref store: one SQLite file (WAL) in the private state folder, shared by every worker of
the user on this host.

WAL lets readers (the per-call version check) run beside a writer; `synchronous=NORMAL` makes a commit a
write to the WAL without an fsync, which is what keeps a ref's creation near a hundred microseconds. A
power cut can lose the last commits, never corrupt the file; refs are working state, not records.
Triggers keep the per-session and total counts (two or three statements per change), so quotas cost one
indexed read each.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from compilation_bridge.protocol.refstore import (
    Entry,
    Quota,
    StoreUnavailable,
    table_full,
    too_many_sessions,
)

DB_FILE = "refs.sqlite3"
BUSY_TIMEOUT_MS = 5000  # a writer holds the lock for well under a millisecond; this is a stuck store
MMAP_BYTES = 64 << 20
CHECKPOINT_PAGES = 10_000  # about 40 MiB of WAL between checkpoints
T = TypeVar("T")

# Run in one transaction at every start: tables are kept, triggers always replaced by these definitions.
SCHEMA = """
CREATE TABLE IF NOT EXISTS refs (
    session TEXT NOT NULL, ref TEXT NOT NULL, version INTEGER NOT NULL,
    state BLOB NOT NULL, mac BLOB NOT NULL, last_access REAL NOT NULL,
    PRIMARY KEY (session, ref)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS refs_by_access ON refs (last_access);
CREATE INDEX IF NOT EXISTS refs_by_session_access ON refs (session, last_access);
CREATE TABLE IF NOT EXISTS sessions (session TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS totals (name TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO totals VALUES ('refs', 0), ('sessions', 0);
DROP TRIGGER IF EXISTS refs_added;
DROP TRIGGER IF EXISTS refs_removed;
CREATE TRIGGER refs_added AFTER INSERT ON refs BEGIN
    UPDATE totals SET n = n + CASE name WHEN 'refs' THEN 1
        ELSE NOT EXISTS (SELECT 1 FROM sessions WHERE session = NEW.session) END;
    INSERT INTO sessions VALUES (NEW.session, 1) ON CONFLICT (session) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER refs_removed AFTER DELETE ON refs BEGIN
    UPDATE sessions SET n = n - 1 WHERE session = OLD.session;
    UPDATE totals SET n = n - CASE name WHEN 'refs' THEN 1
        ELSE (SELECT n FROM sessions WHERE session = OLD.session) <= 0 END;
    DELETE FROM sessions WHERE session = OLD.session AND n <= 0;
END;
"""


class SqliteStore:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / DB_FILE
        self.location = f"sqlite:{self.path}"
        self._local = threading.local()  # one connection per thread: sqlite3 objects are not shared
        # One transaction, so workers starting together create the schema once.
        self._guard(lambda: self._db().executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;"))
        self.path.chmod(0o600)

    # ------------------------------------------------------------------------------ connections
    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # Reads through a memory map, and checkpoints (copying the WAL into the file) ten times less
            # often than SQLite's default: together a third off every write transaction.
            db.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            db.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")
            self._local.db = db
        return db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = self._guard(self._db)
        self._guard(lambda: db.execute("BEGIN IMMEDIATE"))
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._guard(lambda: db.execute("COMMIT"))

    def _guard(self, operation: Callable[[], T]) -> T:
        try:
            return operation()
        except sqlite3.OperationalError as exc:  # locked past the timeout, disk gone, file unreadable
            raise StoreUnavailable(f"ref store {self.location}: {exc}") from exc

    def _read(self, sql: str, *args: Any) -> Any:
        return self._guard(lambda: self._db().execute(sql, args).fetchone())

    def _write(self, sql: str, *args: Any) -> tuple[int, list[Any]]:
        """One statement, its own transaction (triggers included): no BEGIN/COMMIT round trips.
        Returns the rows changed and the rows it returned (read to the end, which commits it)."""

        def run() -> tuple[int, list[Any]]:
            cursor = self._db().execute(sql, args)
            rows = cursor.fetchall()
            return cursor.rowcount, rows

        return self._guard(run)

    # ------------------------------------------------------------------------------ Store
    def create(self, session: str, ref_id: str, entry: Entry, now: float, quota: Quota) -> list[str]:
        with self._transaction() as db:
            held = _check_quota(db, quota, session)
            db.execute(
                "INSERT INTO refs VALUES (?, ?, ?, ?, ?, ?)",
                (session, ref_id, entry.version, entry.state, entry.mac, now),
            )
            excess = (held or 0) + 1 - quota.max_per_session
            return _evict(db, session, excess) if quota.max_per_session > 0 and excess > 0 else []

    def upsert(self, session: str, ref_id: str, entry: Entry, now: float) -> int:
        _, rows = self._write(
            "INSERT INTO refs VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session, ref) DO UPDATE SET "
            "version = version + 1, state = excluded.state, mac = excluded.mac RETURNING version",
            *(session, ref_id, entry.version, entry.state, entry.mac, now),
        )
        return int(rows[0][0])

    def version(self, session: str, ref_id: str) -> int | None:
        row = self._read("SELECT version FROM refs WHERE session = ? AND ref = ?", session, ref_id)
        return None if row is None else int(row[0])

    def load(self, session: str, ref_id: str) -> Entry | None:
        row = self._read(
            "SELECT version, state, mac FROM refs WHERE session = ? AND ref = ?", session, ref_id
        )
        return None if row is None else Entry(int(row[0]), _blob(row[1]), _blob(row[2]))

    def update(self, session: str, ref_id: str, state: bytes, mac: bytes, expected: int) -> int | None:
        _, rows = self._write(
            "UPDATE refs SET version = version + 1, state = ?, mac = ? "
            "WHERE session = ? AND ref = ? AND version = ? RETURNING version",
            *(state, mac, session, ref_id, expected),
        )
        return int(rows[0][0]) if rows else None

    def touch(self, session: str, ref_id: str, now: float) -> None:
        self._write("UPDATE refs SET last_access = ? WHERE session = ? AND ref = ?", now, session, ref_id)

    def release(self, session: str, ref_id: str) -> bool:
        return self._write("DELETE FROM refs WHERE session = ? AND ref = ?", session, ref_id)[0] > 0

    def release_session(self, session: str) -> int:
        return self._write("DELETE FROM refs WHERE session = ?", session)[0]

    def count(self, session: str | None = None) -> int:
        if session is None:
            row = self._read("SELECT n FROM totals WHERE name = 'refs'")
        else:
            row = self._read("SELECT n FROM sessions WHERE session = ?", session)
        return int(row[0]) if row else 0

    def session_count(self) -> int:
        return int(self._read("SELECT n FROM totals WHERE name = 'sessions'")[0])

    def prune(self, before: float) -> int:
        return self._write("DELETE FROM refs WHERE last_access < ?", before)[0]

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


def _blob(value: Any) -> bytes:
    # Anything but a blob was not written by a worker: hand it on as bytes for the signature to refuse.
    return value.encode() if isinstance(value, str) else bytes(value or b"")


def _check_quota(db: sqlite3.Connection, quota: Quota, session: str) -> int | None:
    """Raises when a new ref in `session` exceeds `quota`; the refs the session holds (None: none)."""
    held, refs, sessions = db.execute(_QUOTA_READ, (session,)).fetchone()
    if quota.max_total > 0 and refs >= quota.max_total:
        raise table_full(refs)
    if held is None and quota.max_sessions > 0 and sessions >= quota.max_sessions:
        raise too_many_sessions(sessions, quota.max_sessions)
    return held


_QUOTA_READ = (
    "SELECT (SELECT n FROM sessions WHERE session = ?), (SELECT n FROM totals WHERE name = 'refs'), "
    "(SELECT n FROM totals WHERE name = 'sessions')"
)


def _evict(db: sqlite3.Connection, session: str, excess: int) -> list[str]:
    rows = db.execute(
        "DELETE FROM refs WHERE session = ? AND ref IN "
        "(SELECT ref FROM refs WHERE session = ? ORDER BY last_access LIMIT ?) RETURNING ref",
        (session, session, excess),
    ).fetchall()
    return [row[0] for row in rows]
