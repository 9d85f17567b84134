"""The embedded ref store: one SQLite file (WAL) in the private state folder, shared by every worker of
the user on this host, each application in its own namespace.

WAL lets readers (the per-call version check) run beside a writer; `synchronous=NORMAL` makes a commit a
write to the WAL without an fsync, which is what keeps a ref's creation near a hundred microseconds. A
power cut can lose the last commits, never corrupt the file; refs are working state, not records. The WAL
is cut back to `WAL_LIMIT_BYTES` after each checkpoint and emptied by `tidy` (the table's maintenance).
Triggers keep the per-session and per-application counts and bytes, so quotas cost one indexed read.

The file is opened through the state folder's held descriptor (`/proc/self/fd/N/...`) and created 0600
before SQLite first opens it, so its `-wal` and `-shm` files (SQLite gives them the database's mode) are
private too.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from compilation_bridge.refs.keys import StateFolder
from compilation_bridge.refs.limits import (
    ref_too_large,
    session_bytes_full,
    store_bytes_full,
    table_full,
    too_many_sessions,
)
from compilation_bridge.refs.store import Entry, Key, Quota, StoreUnavailable

DB_FILE = "refs.v2.sqlite3"
OLD_FILES = ("refs.sqlite3", "refs.sqlite3-wal", "refs.sqlite3-shm")  # the first format: one namespace
BUSY_TIMEOUT_MS = 2000  # a writer holds the lock for well under a millisecond; this is a stuck store
MMAP_BYTES = 64 << 20
CHECKPOINT_PAGES = 10_000  # about 40 MiB of WAL between automatic checkpoints
WAL_LIMIT_BYTES = 4 << 20
PRUNE_BATCH = 1000
VERSIONS_BATCH = 300  # keys per query: 900 parameters, under SQLite's smallest limit (999)
T = TypeVar("T")

# The layout's version, kept in the file (`PRAGMA user_version`): a file of another layout is emptied and
# laid out again at start (refs are working state), never half-used by statements it cannot answer.
SCHEMA_VERSION = 4
OLD_LAYOUT = ("DROP TABLE IF EXISTS refs", "DROP TABLE IF EXISTS sessions", "DROP TABLE IF EXISTS apps")
# Run in one transaction at every start: tables are kept, triggers always replaced by these definitions.
SCHEMA = """
CREATE TABLE IF NOT EXISTS refs (
    app TEXT NOT NULL, session TEXT NOT NULL, ref TEXT NOT NULL, version INTEGER NOT NULL,
    state BLOB NOT NULL, mac BLOB NOT NULL, size INTEGER NOT NULL, expires REAL NOT NULL,
    cap INTEGER NOT NULL,  -- the session's ref limit its writer applied (0: none), for the insert trigger
    run TEXT NOT NULL,  -- the Snakepit run (one BEAM's life) whose worker created it
    PRIMARY KEY (app, session, ref)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS refs_by_expiry ON refs (expires);
CREATE INDEX IF NOT EXISTS refs_by_session_expiry ON refs (app, session, expires);
CREATE TABLE IF NOT EXISTS sessions (
    app TEXT NOT NULL, session TEXT NOT NULL, n INTEGER NOT NULL, bytes INTEGER NOT NULL,
    PRIMARY KEY (app, session)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS apps (
    app TEXT PRIMARY KEY, refs INTEGER NOT NULL, sessions INTEGER NOT NULL, bytes INTEGER NOT NULL
) WITHOUT ROWID;
DROP TRIGGER IF EXISTS refs_added;
DROP TRIGGER IF EXISTS refs_removed;
DROP TRIGGER IF EXISTS refs_resized;
CREATE TRIGGER refs_added AFTER INSERT ON refs BEGIN
    INSERT INTO apps VALUES (NEW.app, 0, 0, 0) ON CONFLICT (app) DO NOTHING;
    UPDATE apps SET refs = refs + 1, bytes = bytes + NEW.size, sessions = sessions +
        NOT EXISTS (SELECT 1 FROM sessions WHERE app = NEW.app AND session = NEW.session)
        WHERE app = NEW.app;
    INSERT INTO sessions VALUES (NEW.app, NEW.session, 1, NEW.size)
        ON CONFLICT (app, session) DO UPDATE SET n = n + 1, bytes = bytes + NEW.size;
    -- past the session's limit, its least recently used refs go (in order, after the count above)
    DELETE FROM refs WHERE NEW.cap > 0 AND app = NEW.app AND session = NEW.session AND ref IN (
        SELECT ref FROM refs WHERE app = NEW.app AND session = NEW.session AND ref != NEW.ref
        ORDER BY expires
        LIMIT max(0, (SELECT n FROM sessions WHERE app = NEW.app AND session = NEW.session) - NEW.cap));
END;
CREATE TRIGGER refs_removed AFTER DELETE ON refs BEGIN
    UPDATE sessions SET n = n - 1, bytes = bytes - OLD.size WHERE app = OLD.app AND session = OLD.session;
    UPDATE apps SET refs = refs - 1, bytes = bytes - OLD.size, sessions = sessions -
        ((SELECT n FROM sessions WHERE app = OLD.app AND session = OLD.session) <= 0)
        WHERE app = OLD.app;
    DELETE FROM sessions WHERE app = OLD.app AND session = OLD.session AND n <= 0;
END;
CREATE TRIGGER refs_resized AFTER UPDATE OF size ON refs WHEN NEW.size != OLD.size BEGIN
    UPDATE sessions SET bytes = bytes + NEW.size - OLD.size WHERE app = NEW.app AND session = NEW.session;
    UPDATE apps SET bytes = bytes + NEW.size - OLD.size WHERE app = NEW.app;
END;
"""

_KEY = "app = :app AND session = :session AND ref = :ref"
_QUOTA_READ = (
    "SELECT s.n, s.bytes, a.refs, a.sessions, a.bytes FROM (SELECT 1) "
    "LEFT JOIN sessions s ON s.app = :app AND s.session = :session LEFT JOIN apps a ON a.app = :app"
)
# One statement, its own transaction: the row goes in only when every quota allows it (the triggers then
# count it and evict the session's least recently used refs past its limit); no row means a refusal.
_CREATE = (
    "INSERT INTO refs SELECT :app, :session, :ref, :version, :state, :mac, :size, :expires, :cap, :run "
    "FROM (SELECT 1) LEFT JOIN sessions s ON s.app = :app AND s.session = :session "
    "LEFT JOIN apps a ON a.app = :app "
    "WHERE (:max_total = 0 OR coalesce(a.refs, 0) < :max_total) "
    "AND (:max_sessions = 0 OR s.n IS NOT NULL OR coalesce(a.sessions, 0) < :max_sessions) "
    "AND (:max_sb = 0 OR coalesce(s.bytes, 0) + :size <= :max_sb) "
    "AND (:max_tb = 0 OR coalesce(a.bytes, 0) + :size <= :max_tb)"
)
_UPDATE = (
    "UPDATE refs SET version = :version, state = :state, mac = :mac, size = :size, expires = :expires "
    f"WHERE {_KEY} AND version = :expected "
    "AND (:max_sb = 0 OR (SELECT bytes FROM sessions WHERE app = :app AND session = :session) "
    "- size + :size <= :max_sb) "
    "AND (:max_tb = 0 OR (SELECT bytes FROM apps WHERE app = :app) - size + :size <= :max_tb) "
    "RETURNING version"
)


class SqliteStore:
    def __init__(self, folder: StateFolder, run: str = "") -> None:
        self.folder = folder
        self.run = run
        self.location = f"sqlite:{folder.path / DB_FILE}"
        for old in OLD_FILES:  # refs of the first format cannot be served any more: give their space back
            folder.remove(old)
        folder.create_private_file(DB_FILE)
        self._path = folder.proc_path(DB_FILE)
        self._local = threading.local()  # one connection per thread: sqlite3 objects are not shared
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._guard(self._lay_out)
        for suffix in ("-wal", "-shm"):  # made 0600 by SQLite after the database; checked all the same
            folder.make_private_if_present(DB_FILE + suffix)

    def _lay_out(self) -> None:
        """Tables, triggers and the layout's version, in one transaction: workers starting together lay
        the file out once, and a file of an older layout is emptied first."""
        with self._transaction() as db:
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                for statement in OLD_LAYOUT:
                    db.execute(statement)
            for statement in _statements(SCHEMA):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # ------------------------------------------------------------------------------ connections
    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(
                self._path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # Reads through a memory map, and checkpoints (copying the WAL into the file) ten times less
            # often than SQLite's default: together a third off every write transaction.
            db.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            db.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")
            db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
            self._local.db = db
            with self._all_lock:
                self._all.append(db)
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
        except (sqlite3.OperationalError, sqlite3.DatabaseError) as exc:  # locked, disk gone, unreadable
            raise StoreUnavailable(f"ref store {self.location}: {exc}") from exc

    def _read(self, sql: str, args: Any) -> Any:
        return self._guard(lambda: self._db().execute(sql, args).fetchone())

    def _rows(self, sql: str, args: Any) -> list[Any]:
        return self._guard(lambda: self._db().execute(sql, args).fetchall())

    def _write(self, sql: str, args: Any) -> tuple[int, list[Any]]:
        """One statement, its own transaction (triggers included): no BEGIN/COMMIT round trips.
        Returns the rows changed and the rows it returned (read to the end, which commits it)."""

        def run() -> tuple[int, list[Any]]:
            cursor = self._db().execute(sql, args)
            rows = cursor.fetchall()
            return cursor.rowcount, rows

        return self._guard(run)

    # ------------------------------------------------------------------------------ Store
    def create(self, key: Key, entry: Entry, expires: float, quota: Quota) -> list[str]:
        """Evictions happen inside the store (a trigger): none are reported, and a worker's copy of an
        evicted ref is found stale at its next use or sweep."""
        size = len(entry.state)
        args = {
            **key._asdict(),
            "version": entry.version,
            "state": entry.state,
            "mac": entry.mac,
            "size": size,
            "expires": expires,
            "cap": quota.max_per_session,
            "run": self.run,
            "max_total": quota.max_total,
            "max_sessions": quota.max_sessions,
            "max_sb": quota.max_session_bytes,
            "max_tb": quota.max_total_bytes,
        }
        if self._write(_CREATE, args)[0] == 0:
            with self._transaction() as db:  # refused: say which quota (read in one snapshot)
                _check_quota(db, quota, key, size)
            raise StoreUnavailable(f"ref store {self.location}: a new ref was refused for no quota")
        return []

    def version(self, key: Key, now: float) -> int | None:
        row = self._read(f"SELECT version, expires FROM refs WHERE {_KEY}", key._asdict())
        return None if row is None or row[1] < now else int(row[0])

    def versions(self, keys: Sequence[Key], now: float) -> list[int | None]:
        found: dict[Key, int] = {}
        for start in range(0, len(keys), VERSIONS_BATCH):
            batch = keys[start : start + VERSIONS_BATCH]
            rows = ", ".join(["(?, ?, ?)"] * len(batch))
            sql = (
                "SELECT app, session, ref, version FROM refs "
                f"WHERE expires >= ? AND (app, session, ref) IN (VALUES {rows})"
            )
            args = [now, *(part for key in batch for part in key)]
            found.update((Key(*row[:3]), int(row[3])) for row in self._rows(sql, args))
        return [found.get(key) for key in keys]

    def load(self, key: Key, now: float, max_bytes: int) -> Entry | None:
        row = self._read(
            "SELECT version, expires, size, CASE WHEN :max = 0 OR size <= :max THEN state END, mac "
            f"FROM refs WHERE {_KEY}",
            {**key._asdict(), "max": max_bytes},
        )
        if row is None or row[1] < now:
            return None
        if row[3] is None:
            raise ref_too_large(int(row[2]), max_bytes)
        return Entry(int(row[0]), _blob(row[3]), _blob(row[4]))

    def update(self, key: Key, entry: Entry, expected: int, expires: float, quota: Quota) -> int | None:
        args = {
            **key._asdict(),
            "version": entry.version,
            "state": entry.state,
            "mac": entry.mac,
            "size": len(entry.state),
            "expires": expires,
            "expected": expected,
            "max_sb": quota.max_session_bytes,
            "max_tb": quota.max_total_bytes,
        }
        _, rows = self._write(_UPDATE, args)
        if rows:
            return int(rows[0][0])
        self._explain_refused_update(key, expected, len(entry.state), quota)
        return None

    def _explain_refused_update(self, key: Key, expected: int, size: int, quota: Quota) -> None:
        """Raise the byte quota an update passed; return when it was a conflict or the ref is gone."""
        row = self._read(f"SELECT version, size FROM refs WHERE {_KEY}", key._asdict())
        if row is None or row[0] != expected:
            return
        growth = size - int(row[1])
        session_bytes, app_bytes = self._read(
            "SELECT (SELECT bytes FROM sessions WHERE app = :app AND session = :session), "
            "(SELECT bytes FROM apps WHERE app = :app)",
            key._asdict(),
        )
        if quota.max_session_bytes > 0 and session_bytes + growth > quota.max_session_bytes:
            raise session_bytes_full(session_bytes, growth, quota.max_session_bytes)
        raise store_bytes_full(app_bytes, growth, quota.max_total_bytes)

    def touch(self, key: Key, expires: float) -> None:
        self._write(
            f"UPDATE refs SET expires = :expires WHERE {_KEY} AND expires < :expires",
            {**key._asdict(), "expires": expires},
        )

    def release(self, key: Key) -> bool:
        return self._write(f"DELETE FROM refs WHERE {_KEY}", key._asdict())[0] > 0

    def release_session(self, app: str, session: str, before: int = 0) -> int:
        return self._write(
            "DELETE FROM refs WHERE app = ? AND session = ? AND (? = 0 OR version < ?)",
            (app, session, before, before),
        )[0]

    def count(self, app: str, session: str | None = None) -> int:
        return self._tally("refs", "n", app, session)

    def session_count(self, app: str) -> int:
        return self._tally("sessions", "", app, None)

    def stored_bytes(self, app: str, session: str | None = None) -> int:
        return self._tally("bytes", "bytes", app, session)

    def _tally(self, app_column: str, session_column: str, app: str, session: str | None) -> int:
        """A total the triggers keep: the application's (`apps`), or one session's (`sessions`)."""
        if session is None:
            row = self._read(f"SELECT {app_column} FROM apps WHERE app = ?", (app,))
        else:
            query = f"SELECT {session_column} FROM sessions WHERE app = ? AND session = ?"
            row = self._read(query, (app, session))
        return int(row[0]) if row else 0

    def prune(self, now: float) -> int:
        if self._read("SELECT 1 FROM refs WHERE expires < ? LIMIT 1", (now,)) is None:
            return 0  # the common case: a read, not a write transaction every second per worker
        dropped = 0
        while True:
            n = self._write(
                "DELETE FROM refs WHERE (app, session, ref) IN "
                "(SELECT app, session, ref FROM refs WHERE expires < ? LIMIT ?)",
                (now, PRUNE_BATCH),
            )[0]
            dropped += n
            if n < PRUNE_BATCH:
                return dropped

    def release_other_runs(self, app: str) -> int:
        if not self.run:
            return 0
        return self._write("DELETE FROM refs WHERE app = ? AND run != ?", (app, self.run))[0]

    def tidy(self) -> None:
        # TRUNCATE waits for no reader: when one is busy it does what it can, and the next pass the rest.
        self._read("PRAGMA wal_checkpoint(TRUNCATE)", ())

    def wal_bytes(self) -> int:
        return self.folder.size_of(DB_FILE + "-wal")

    def close(self) -> None:
        with contextlib.suppress(StoreUnavailable):
            self.tidy()
        with self._all_lock:
            connections, self._all = self._all, []
        for db in connections:
            with contextlib.suppress(sqlite3.Error):
                db.close()
        self._local = threading.local()


def _statements(script: str) -> list[str]:
    """A script's statements (a trigger's body, semicolons and all, stays one statement)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return [statement for statement in statements if statement]


def _blob(value: Any) -> bytes:
    # Anything but a blob was not written by a worker: hand it on as bytes for the signature to refuse.
    return value.encode() if isinstance(value, str) else bytes(value or b"")


def _check_quota(db: sqlite3.Connection, quota: Quota, key: Key, size: int) -> None:
    """Raises when a new ref of `size` bytes in the key's session passes `quota`."""
    held, session_bytes, refs, sessions, app_bytes = db.execute(_QUOTA_READ, key._asdict()).fetchone()
    held, session_bytes, refs, sessions, app_bytes = (
        int(v or 0) for v in (held, session_bytes, refs, sessions, app_bytes)
    )
    if quota.max_total > 0 and refs >= quota.max_total:
        raise table_full(refs, quota.max_total)
    if held == 0 and quota.max_sessions > 0 and sessions >= quota.max_sessions:
        raise too_many_sessions(sessions, quota.max_sessions)
    if quota.max_session_bytes > 0 and session_bytes + size > quota.max_session_bytes:
        raise session_bytes_full(session_bytes, size, quota.max_session_bytes)
    if quota.max_total_bytes > 0 and app_bytes + size > quota.max_total_bytes:
        raise store_bytes_full(app_bytes, size, quota.max_total_bytes)
