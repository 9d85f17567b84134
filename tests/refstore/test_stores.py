"""Both stores answer the `Store` interface the same way: versions, quotas, eviction, TTL, releases."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.refstore.redisserver import RedisServer

from compilation_bridge.protocol.refstore import Entry, Quota, QuotaExceeded, Store
from compilation_bridge.protocol.refstore_redis import RedisStore
from compilation_bridge.protocol.refstore_sqlite import SqliteStore

NO_LIMITS = Quota(0, 0, 0)


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, state_dir: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        opened: Store = SqliteStore(state_dir)
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        opened = RedisStore(server.url, prefix=f"test:{uuid.uuid4().hex}:")
    yield opened
    opened.close()


def test_versions_count_changes(store: Store) -> None:
    store.create("s", "r", Entry(1, b"one", b"mac1"), 1.0, NO_LIMITS)
    assert store.version("s", "r") == 1
    assert store.update("s", "r", b"two", b"mac2", expected=1) == 2
    assert store.update("s", "r", b"lost", b"mac3", expected=1) is None  # someone else wrote first
    entry = store.load("s", "r")
    assert (entry.version, entry.state, entry.mac) == (2, b"two", b"mac2")
    assert store.version("s", "missing") is None and store.load("s", "missing") is None


def test_counts_and_releases(store: Store) -> None:
    for ref in ("a", "b"):
        store.create("s1", ref, Entry(1, b"x", b"m"), 1.0, NO_LIMITS)
    store.create("s2", "c", Entry(1, b"x", b"m"), 1.0, NO_LIMITS)
    assert (store.count(), store.count("s1"), store.session_count()) == (3, 2, 2)
    assert store.release("s1", "a") and not store.release("s1", "a")
    assert store.release_session("s1") == 1
    assert (store.count(), store.count("s1"), store.session_count()) == (1, 0, 1)
    assert store.update("s1", "b", b"y", b"m", expected=1) is None  # released: never resurrected


def test_quotas(store: Store) -> None:
    store.create("s1", "a", Entry(1, b"x", b"m"), 1.0, Quota(0, 2, 1))
    with pytest.raises(QuotaExceeded, match="too many sessions"):
        store.create("s2", "b", Entry(1, b"x", b"m"), 2.0, Quota(0, 2, 1))
    store.create("s1", "b", Entry(1, b"x", b"m"), 2.0, Quota(0, 2, 1))
    with pytest.raises(QuotaExceeded, match="table is full"):
        store.create("s1", "c", Entry(1, b"x", b"m"), 3.0, Quota(0, 2, 1))
    assert store.count() == 2


def test_per_session_limit_evicts_least_recently_used(store: Store) -> None:
    quota = Quota(2, 0, 0)
    store.create("s", "a", Entry(1, b"x", b"m"), 1.0, quota)
    store.create("s", "b", Entry(1, b"x", b"m"), 2.0, quota)
    store.touch("s", "a", 3.0)
    assert store.create("s", "c", Entry(1, b"x", b"m"), 4.0, quota) == ["b"]
    assert store.create("other", "d", Entry(1, b"x", b"m"), 5.0, quota) == []  # never another session's refs
    assert store.version("s", "a") == 1 and store.version("s", "b") is None


def test_prune_drops_refs_unused_since(store: Store) -> None:
    store.create("s", "old", Entry(1, b"x", b"m"), 1.0, NO_LIMITS)
    store.create("s:with:colons", "new", Entry(1, b"x", b"m"), 10.0, NO_LIMITS)
    assert store.prune(5.0) == 1
    assert store.version("s", "old") is None and store.version("s:with:colons", "new") == 1
    assert store.session_count() == 1


def test_upsert_writes_whatever_the_version(store: Store) -> None:
    assert store.upsert("s", "r", Entry(77, b"x", b"m"), 1.0) == 77
    assert store.upsert("s", "r", Entry(5, b"y", b"m"), 1.0) == 78
    assert store.count("s") == 1
