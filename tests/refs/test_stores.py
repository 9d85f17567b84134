"""Both stores answer the `Store` interface the same way: versions, quotas (counts and bytes), eviction,
expiry, releases, and one application never reaching another's entries."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from tests.refs.redisserver import RedisServer

from compilation_bridge.refs.keys import StateFolder
from compilation_bridge.refs.store import Entry, Key, Quota, QuotaExceeded, Store
from compilation_bridge.refs.store.redis import RedisStore
from compilation_bridge.refs.store.sqlite import DB_FILE, VERSIONS_BATCH, SqliteStore

NO_LIMITS = Quota(0, 0, 0)
APP, OTHER = "a" * 32, "b" * 32  # namespaces are 32 hex digits (Signer.namespace)
LATER = 1e12


def key(session: str, ref: str, app: str = APP) -> Key:
    return Key(app, session, ref)


def entry(state: bytes = b"x", version: int = 1) -> Entry:
    return Entry(version, state, b"mac")


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, folder: StateFolder) -> Iterator[Store]:
    if request.param == "sqlite":
        opened: Store = SqliteStore(folder)
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        opened = RedisStore(server.url, base=f"test:{uuid.uuid4().hex}:")
    yield opened
    opened.close()


def test_versions_are_the_writers(store: Store) -> None:
    store.create(key("s", "r"), entry(b"one", 10), LATER, NO_LIMITS)
    assert store.version(key("s", "r"), 0) == 10
    assert store.update(key("s", "r"), entry(b"two", 11), 10, LATER, NO_LIMITS) == 11
    assert (
        store.update(key("s", "r"), entry(b"lost", 11), 10, LATER, NO_LIMITS) is None
    )  # someone wrote first
    loaded = store.load(key("s", "r"), 0, 0)
    assert loaded is not None and (loaded.version, loaded.state, loaded.mac) == (11, b"two", b"mac")
    assert store.version(key("s", "missing"), 0) is None and store.load(key("s", "missing"), 0, 0) is None


def test_versions_of_many_keys_in_one_call(store: Store) -> None:
    """The sweep's batch check: present, changed, missing, expired and other applications' keys, across
    more keys than one SQLite query takes."""
    many = [key("s", f"r{i}") for i in range(VERSIONS_BATCH + 20)]
    for i, each in enumerate(many):
        store.create(each, entry(version=100 + i), LATER, NO_LIMITS)
    store.update(many[3], entry(b"new", 500), 103, LATER, NO_LIMITS)
    store.create(key("s", "short"), entry(version=7), 50.0, NO_LIMITS)
    store.create(key("s", "r1", OTHER), entry(version=9), LATER, NO_LIMITS)
    asked = [*many, key("s", "missing"), key("s", "short"), key("s", "r1", OTHER), key("t", "r1")]
    found = store.versions(asked, 60.0)
    assert found[: len(many)] == [500 if i == 3 else 100 + i for i in range(len(many))]
    assert found[len(many) :] == [None, None, 9, None]
    assert store.versions([key("s", "short")], 40.0) == [7] and store.versions([], 0) == []


def test_counts_and_releases(store: Store) -> None:
    for ref in ("a", "b"):
        store.create(key("s1", ref), entry(), LATER, NO_LIMITS)
    store.create(key("s2", "c"), entry(), LATER, NO_LIMITS)
    assert (store.count(APP), store.count(APP, "s1"), store.session_count(APP)) == (3, 2, 2)
    assert store.release(key("s1", "a")) and not store.release(key("s1", "a"))
    assert store.release_session(APP, "s1") == 1
    assert (store.count(APP), store.count(APP, "s1"), store.session_count(APP)) == (1, 0, 1)
    assert store.update(key("s1", "b"), entry(b"y", 2), 1, LATER, NO_LIMITS) is None  # never resurrected


def test_quotas(store: Store) -> None:
    store.create(key("s1", "a"), entry(), LATER, Quota(0, 2, 1))
    with pytest.raises(QuotaExceeded, match=r"too many sessions .*\(1, limit 1\)"):
        store.create(key("s2", "b"), entry(), LATER, Quota(0, 2, 1))
    store.create(key("s1", "b"), entry(), LATER, Quota(0, 2, 1))
    with pytest.raises(QuotaExceeded, match=r"table is full \(2 refs, limit 2\)"):
        store.create(key("s1", "c"), entry(), LATER, Quota(0, 2, 1))
    assert store.count(APP) == 2


def test_byte_quotas_on_creation_and_growth(store: Store) -> None:
    quota = Quota(0, 0, 0, max_session_bytes=10, max_total_bytes=15)
    store.create(key("s1", "a"), entry(b"x" * 8), LATER, quota)
    with pytest.raises(QuotaExceeded, match=r"session holds 8 bytes.*3 more.*\(10,"):
        store.create(key("s1", "b"), entry(b"x" * 3), LATER, quota)
    store.create(key("s2", "c"), entry(b"x" * 7), LATER, quota)
    with pytest.raises(QuotaExceeded, match=r"ref store holds 15 bytes .*1 more.*\(15,"):
        store.create(key("s3", "d"), entry(b"x"), LATER, quota)
    with pytest.raises(QuotaExceeded, match=r"ref store holds 15 bytes .*1 more"):
        store.update(key("s1", "a"), entry(b"x" * 9, 2), 1, LATER, quota)
    assert store.update(key("s1", "a"), entry(b"x" * 2, 2), 1, LATER, quota) == 2  # shrinking is fine
    assert store.stored_bytes(APP) == 9 and store.stored_bytes(APP, "s1") == 2
    store.release_session(APP, "s2")
    assert store.stored_bytes(APP) == 2


def test_a_state_larger_than_allowed_is_not_read(store: Store) -> None:
    store.create(key("s", "big"), entry(b"x" * 100), LATER, NO_LIMITS)
    with pytest.raises(QuotaExceeded, match="too large: 100 bytes"):
        store.load(key("s", "big"), 0, 99)
    loaded = store.load(key("s", "big"), 0, 100)
    assert loaded is not None and len(loaded.state) == 100


def test_per_session_limit_evicts_least_recently_used(store: Store) -> None:
    quota = Quota(2, 0, 0)
    store.create(key("s", "a"), entry(), 1.0 + LATER, quota)
    store.create(key("s", "b"), entry(), 2.0 + LATER, quota)
    store.touch(key("s", "a"), 3.0 + LATER)
    assert store.create(key("s", "c"), entry(), 4.0 + LATER, quota) in (["b"], [])  # SQLite names none
    assert store.create(key("other", "d"), entry(), 5.0 + LATER, quota) == []  # never another session's refs
    assert store.version(key("s", "a"), 0) == 1 and store.version(key("s", "b"), 0) is None
    assert store.version(key("s", "c"), 0) == 1 and store.count(APP, "s") == 2


def test_expired_entries_are_gone_at_once_and_pruned_for_every_application(store: Store) -> None:
    store.create(key("s", "old"), entry(), 5.0, NO_LIMITS)
    store.create(key("s:with:colons", "new"), entry(), 20.0, NO_LIMITS)
    store.create(key("s", "theirs", OTHER), entry(), 5.0, NO_LIMITS)
    assert store.version(key("s", "old"), 6.0) is None and store.load(key("s", "old"), 6.0, 0) is None
    assert store.version(key("s", "old"), 4.0) == 1  # not yet
    # Any worker prunes what expired, whoever wrote it: a stopped application leaves nothing behind.
    assert store.prune(10.0) == 2
    assert store.version(key("s:with:colons", "new"), 0) == 1
    assert (store.session_count(APP), store.count(OTHER), store.stored_bytes(OTHER)) == (1, 0, 0)


def test_applications_never_meet(store: Store) -> None:
    store.create(key("s", "r"), entry(b"mine"), LATER, Quota(0, 1, 1))
    # The other application's quotas are its own: one full application refuses nobody else.
    store.create(key("s", "r", OTHER), entry(b"theirs"), LATER, Quota(0, 1, 1))
    store.create(key("t", "q", OTHER), entry(), LATER, Quota(0, 0, 0))
    assert store.release_session(OTHER, "s") == 1
    assert store.version(key("s", "r"), 0) == 1 and store.count(APP) == 1
    assert not store.release(key("s", "r", OTHER))
    assert (store.count(OTHER), store.session_count(OTHER)) == (1, 1)


def test_sqlite_files_are_private_and_the_wal_is_given_back(folder: StateFolder) -> None:
    store = SqliteStore(folder)
    try:
        for n in range(300):
            store.create(key("s", f"r{n}"), entry(b"x" * 4000), LATER, NO_LIMITS)
        store.release_session(APP, "s")
        assert store.wal_bytes() > 1 << 20
        store.tidy()
        assert store.wal_bytes() == 0
        for name in (DB_FILE, DB_FILE + "-wal", DB_FILE + "-shm"):
            path = folder.path / name
            assert not path.exists() or path.stat().st_mode & 0o777 == 0o600, name
    finally:
        store.close()


def test_a_file_of_another_layout_is_laid_out_again(folder: StateFolder) -> None:
    import sqlite3

    with sqlite3.connect(folder.path / DB_FILE) as db:  # an older layout: fewer columns, refs in it
        db.execute("CREATE TABLE refs (app TEXT, session TEXT, ref TEXT, PRIMARY KEY (app, session, ref))")
        db.execute("INSERT INTO refs VALUES ('a', 's', 'r')")
    store = SqliteStore(folder)
    try:
        store.create(key("s", "r"), entry(), LATER, NO_LIMITS)  # would fail on the old columns
        assert store.version(key("s", "r"), 0) == 1 and store.count(APP) == 1
    finally:
        store.close()
    reopened = SqliteStore(folder)  # the same layout: kept as it is
    try:
        assert reopened.count(APP) == 1
    finally:
        reopened.close()


def test_sqlite_releases_what_other_runs_of_the_application_left(folder: StateFolder) -> None:
    """One host: a new Snakepit run of an instance ends every other run of it there first, so their refs
    have no caller left (SnakeBridge releases nothing at Application.stop)."""
    earlier, current = SqliteStore(folder, run="run0001"), SqliteStore(folder, run="run0002")
    try:
        earlier.create(key("s", "old"), entry(), LATER, NO_LIMITS)
        earlier.create(key("s", "theirs", OTHER), entry(), LATER, NO_LIMITS)
        current.create(key("s", "new"), entry(), LATER, NO_LIMITS)
        assert current.release_other_runs(APP) == 1
        assert current.version(key("s", "old"), 0) is None and current.version(key("s", "new"), 0) == 1
        assert current.count(OTHER) == 1  # another application's refs are never touched
        assert SqliteStore(folder).release_other_runs(APP) == 0  # no run named: nothing to tell apart
    finally:
        earlier.close()
        current.close()


def test_redis_keeps_other_runs_refs_for_their_lease(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, base=f"test:{uuid.uuid4().hex}:")
    try:
        store.create(key("s", "r"), entry(), LATER, NO_LIMITS)
        assert store.release_other_runs(APP) == 0 and store.count(APP) == 1  # other hosts may be alive
    finally:
        store.close()
