"""Each attack on the ref store found on the first shared design, reproduced, and now failing by effect.

Isolation (applications sharing one store), bounds (bytes, leases, memory), trust (rollback, moved
entries, secrets), availability (the control path) and lifetime (nothing accepted is lost at the end).
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.refs.redisserver import RedisServer
from tests.workers import construct, payload

from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.refs.journal import Journal
from compilation_bridge.refs.keys import StateFolder
from compilation_bridge.refs.limits import DEFAULT_LEASE_S, RefLimits
from compilation_bridge.refs.shared import SharedRefTable
from compilation_bridge.refs.signing import Signer
from compilation_bridge.refs.store import Store
from compilation_bridge.refs.store.redis import RedisStore
from compilation_bridge.refs.store.sqlite import DB_FILE, SqliteStore

Tables = Callable[..., SharedRefTable]


@pytest.fixture
def tables(folder: StateFolder, signer: Signer) -> Iterator[Tables]:
    """SharedRefTables over the test's SQLite store (or a given store), started, closed at the end."""
    opened: list[SharedRefTable] = []

    def table(
        application: str = "app-one",
        limits: RefLimits | None = None,
        store: Store | None = None,
        clock: Any = None,
        journal: bool = False,
    ) -> SharedRefTable:
        store = store or SqliteStore(folder)
        extra: dict[str, Any] = {"clock": clock} if clock else {}
        if journal:
            extra["journal"] = Journal(folder, signer, store.location)
        made = SharedRefTable(store, signer, application, limits or RefLimits(), **extra)
        made.start()
        opened.append(made)
        return made

    yield table
    for made in opened:
        made.close(0)


def fails(dispatcher: Dispatcher, session: str = "S", **fields: Any) -> dict[str, Any]:
    reply = dispatcher.execute("snakebridge.call", payload(session, **fields), "w")
    assert not reply.success, reply.result
    return reply.error


def mode_of(dispatcher: Dispatcher, ref: dict[str, Any]) -> Any:
    reply = dispatcher.execute(
        "snakebridge.call", payload("S", call_type="get_attr", attr="mode", instance=ref), "w"
    )
    assert reply.success, reply.error
    return reply.result


# ------------------------------------------------------------------------------ isolation
def test_another_application_cannot_read_change_or_release_a_ref(tables: Tables) -> None:
    mine, theirs = Dispatcher(refs=tables("app-one")), Dispatcher(refs=tables("app-two"))
    ref = construct(mine, "S", mode=3)
    # Same session id, same ref id: still another application's namespace.
    assert (
        "Unknown SnakeBridge reference"
        in fails(theirs, call_type="get_attr", attr="mode", instance=ref)["message"]
    )
    fails(theirs, call_type="set_attr", attr="cache_dir", instance=ref, args=["/tmp/theirs"])
    assert theirs.execute("snakebridge.release_ref", payload("S", ref=ref), "w").result is False
    assert theirs.execute("snakebridge.release_session", payload("S"), "w").result == 0
    assert theirs.refs.release_session_soon("S") == 0
    time.sleep(0.3)  # let the other application's flusher run the queued release
    assert mode_of(mine, ref) == 3


def test_another_applications_short_ttl_never_prunes_my_refs(tables: Tables) -> None:
    now = [1000.0]
    mine = Dispatcher(refs=tables("app-one", clock=lambda: now[0]))
    theirs = tables("app-two", RefLimits(ttl_seconds=1), clock=lambda: now[0])
    ref = construct(mine, "S", mode=3)
    theirs.put("T", 1)
    now[0] += 600  # ten minutes: far past their TTL, far inside my lease
    assert theirs.store.prune(now[0]) == 1  # their own ref, and only it
    assert mode_of(mine, ref) == 3


def test_one_applications_sessions_never_lock_another_out(tables: Tables) -> None:
    limits = RefLimits(max_sessions=50)
    greedy, other = tables("greedy", limits), tables("other", limits)
    for n in range(50):
        greedy.put(f"s{n}", n)
    with pytest.raises(RuntimeError, match=r"too many sessions .*\(50, limit 50\)"):
        greedy.put("one-more", 0)
    other.put("fresh", 1)  # its own quota


def test_two_pools_with_different_keys_never_meet_in_one_redis(
    redis_server: RedisServer, tables: Tables
) -> None:
    base = f"test:{uuid.uuid4().hex}:"
    one = tables("same-name", store=RedisStore(redis_server.url, base=base))
    two = SharedRefTable(RedisStore(redis_server.url, base=base), Signer(b"z" * 32), "same-name")
    ref = one.put("S", [1, 2])
    with pytest.raises(KeyError):
        two.get("S", ref)
    assert two.count() == 0 and one.count() == 1
    two.close(0)


# ------------------------------------------------------------------------------ bounds
def test_a_state_over_the_byte_quotas_is_refused_in_band(tables: Tables) -> None:
    dispatcher = Dispatcher(refs=tables(limits=RefLimits(max_ref_bytes=4096, max_session_bytes=20_000)))
    error = fails(
        dispatcher,
        call_type="class",
        **{"class": "CompilationConfig"},
        kwargs={"compile_sizes": list(range(2000))},
    )
    assert "state too large" in error["message"] and "limit 4096" in error["message"]
    for _ in range(100):  # a config's state is a few KB: the session's quota ends this loop
        reply = dispatcher.execute(
            "snakebridge.call", payload("S", call_type="class", **{"class": "CompilationConfig"}), "w"
        )
        if not reply.success:
            break
    assert (
        reply.error is not None
        and "session holds" in reply.error["message"]
        and "20000" in reply.error["message"]
    )
    assert dispatcher.refs.stored_bytes("S") <= 20_000  # type: ignore[attr-defined]
    construct(dispatcher, "other-session")  # everyone else is still served


def test_a_small_request_never_makes_a_large_stored_state(tables: Tables) -> None:
    table = tables()
    dispatcher = Dispatcher(refs=table)
    big = {"cudagraph_capture_sizes": [1, 1 << 20], "max_cudagraph_capture_size": 1 << 20}
    ref = construct(dispatcher, "S", mode=3, **big)
    reply = dispatcher.execute(
        "snakebridge.call",
        payload("S", call_type="method", function="post_init_cudagraph_sizes", instance=ref),
        "w",
    )
    assert reply.success, reply.error
    assert table.stored_bytes("S") < 16_384  # the million-entry padding table is derived, not stored


def test_a_change_over_the_quota_is_not_kept(tables: Tables) -> None:
    dispatcher = Dispatcher(refs=tables(limits=RefLimits(max_ref_bytes=4096)))
    ref = construct(dispatcher, "S")
    error = fails(
        dispatcher, call_type="set_attr", attr="compile_sizes", instance=ref, args=[list(range(2000))]
    )
    assert "was not kept" in error["message"] and "too large" in error["message"]
    reply = dispatcher.execute(
        "snakebridge.call", payload("S", call_type="get_attr", attr="compile_sizes", instance=ref), "w"
    )
    assert reply.success and reply.result in ([], None)  # the stored state stands


def test_every_entry_has_a_lease_so_a_stopped_application_leaves_nothing(
    tables: Tables, folder: StateFolder
) -> None:
    now = [1000.0]
    table = tables(clock=lambda: now[0])
    assert table.limits.lease == DEFAULT_LEASE_S
    for n in range(20):
        table.put("S", n)  # an application that then stops: SnakeBridge releases nothing
    now[0] += DEFAULT_LEASE_S + 1
    assert table.store.prune(now[0]) == 20  # any worker's maintenance, of any application
    assert table.count() == 0 and table.stored_bytes() == 0


def test_the_memory_limit_is_checked_on_every_put(tables: Tables) -> None:
    table = tables(limits=RefLimits(max_rss_bytes=1 << 20))  # far below any Python process
    with pytest.raises(MemoryError, match="COMPILATION_BRIDGE_MAX_RSS_MB"):
        table.put("S", [1])


def test_a_restore_that_would_pass_the_memory_limit_is_refused_before_decoding(tables: Tables) -> None:
    from compilation_bridge.refs.limits import resident_bytes

    maker = tables()
    ref = maker.put("S", list(range(200_000)))  # about 1.3 MB encoded
    reader = tables(limits=RefLimits(max_rss_bytes=resident_bytes() + (4 << 20)))
    with pytest.raises(MemoryError, match="to restore a ref"):
        reader.get("S", ref)


def test_the_local_cache_keeps_digests_not_copies(tables: Tables) -> None:
    table = tables()
    dispatcher = Dispatcher(refs=table)
    ref = construct(dispatcher, "S", compile_sizes=list(range(1000)))
    for _ in range(12):
        dispatcher.execute(
            "snakebridge.call", payload("S", call_type="get_attr", attr="pass_config", instance=ref), "w"
        )
    assert all(len(local.digest) == 16 and not hasattr(local, "state") for local in table._local.values())


# ------------------------------------------------------------------------------ trust
def _rows(state_dir: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(state_dir / DB_FILE) as db:
        return db.execute("SELECT ref, version, state, mac FROM refs").fetchall()


def test_an_old_signed_state_written_back_is_refused(tables: Tables, state_dir: Path) -> None:
    a, b = Dispatcher(refs=tables()), Dispatcher(refs=tables())
    ref = construct(a, "S", mode=3)
    old = _rows(state_dir)[0]
    a.execute(
        "snakebridge.call", payload("S", call_type="set_attr", attr="mode", instance=ref, args=[2]), "w"
    )
    assert mode_of(b, ref) == 2  # b has seen the newer version
    with sqlite3.connect(state_dir / DB_FILE) as db:  # whoever can write the store replays the old entry
        db.execute("UPDATE refs SET version = ?, state = ?, mac = ?", old[1:])
    error = fails(b, call_type="get_attr", attr="mode", instance=ref)
    assert error["type"] == "RefStoreIntegrityError" and "older" in error["message"]


def test_an_entry_moved_to_another_ref_is_refused(tables: Tables, state_dir: Path) -> None:
    a, b = Dispatcher(refs=tables()), Dispatcher(refs=tables())
    first, second = construct(a, "S", mode=3), construct(a, "S", mode=1)
    rows = {row[0]: row for row in _rows(state_dir)}
    with sqlite3.connect(state_dir / DB_FILE) as db:
        db.execute(
            "UPDATE refs SET version = ?, state = ?, mac = ? WHERE ref = ?",
            (*rows[first["id"]][1:], second["id"]),
        )
    assert "failed authentication" in fails(b, call_type="get_attr", attr="mode", instance=second)["message"]


# ------------------------------------------------------------------------------ availability and lifetime
class _ThreadsOfStore:
    """A store that records which thread made each call (and otherwise is the store it wraps)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.calls: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._store, name)
        if not callable(target):
            return target

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, threading.get_ident()))
            return target(*args, **kwargs)

        return recorded


def test_cleanup_never_waits_for_a_hung_store(tables: Tables, redis_server: RedisServer) -> None:
    """CleanupSession runs on the threads kept for Ping and Heartbeat: it makes no store call there at
    all (a hung store would hold the thread for its whole timeout); the table's own thread does it."""
    store = _ThreadsOfStore(RedisStore(redis_server.url, base=f"test:{uuid.uuid4().hex}:"))
    table = tables(store=store)
    table.put("S", [1])
    store.calls.clear()
    assert table.release_session_soon("S") == 1
    deadline = time.monotonic() + 10
    while table.count("S") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert table.count("S") == 0
    releases = [thread for name, thread in store.calls if name == "release_session"]
    assert releases and threading.get_ident() not in releases


def test_a_queued_session_release_spares_refs_made_after_it(tables: Tables) -> None:
    """CleanupSession's release runs later, on the table's thread: it must drop what existed when it was
    asked, not a ref the session made right after (a pool routes the next call anywhere)."""
    asked, other_worker = tables(), tables()
    before = other_worker.put("S", [1])
    time.sleep(0.002)
    asked.release_session_soon("S")
    after = other_worker.put("S", [2])  # made by another worker before the release ran
    deadline = time.monotonic() + 10
    while asked.pending_count() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert other_worker.get("S", after) == [2]
    with pytest.raises(KeyError):
        other_worker.get("S", before)


def test_changes_accepted_during_an_outage_outlive_the_worker(
    tables: Tables, redis_server: RedisServer, folder: StateFolder
) -> None:
    base = f"test:{uuid.uuid4().hex}:"
    first = tables(store=RedisStore(redis_server.url, base=base), journal=True)
    redis_server.stop()
    try:
        ref = first.put("S", [1, 2, 3])  # accepted while the store is down
        first.close(0.2)  # the worker ends (SIGTERM) before the store is back: journaled
    finally:
        redis_server.resume()
    second = tables(store=RedisStore(redis_server.url, base=base), journal=True)
    deadline = time.monotonic() + 10
    while second.pending_count() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert second.get("S", ref) == [1, 2, 3]


def test_a_tampered_journal_is_dropped(folder: StateFolder, signer: Signer) -> None:
    journal = Journal(folder, signer, "sqlite:x")
    from compilation_bridge.refs.pending import Pending
    from compilation_bridge.refs.store import Key

    journal.save("app", {Key("app", "S", "r"): Pending.write(b"{}")})
    name = next(p.name for p in folder.path.iterdir() if p.name.startswith("pending-"))
    data = (folder.path / name).read_bytes()
    (folder.path / name).write_bytes(data.replace(b'"S"', b'"T"'))
    assert journal.take("app") == {}
    assert not (folder.path / name).exists()
