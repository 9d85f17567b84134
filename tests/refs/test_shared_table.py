"""Two dispatchers over one store behave as one worker: refs, changes and releases seen by both."""

from __future__ import annotations

import math
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.refs.redisserver import RedisServer
from tests.workers import construct, payload

from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.refs.keys import StateFolder
from compilation_bridge.refs.limits import RefLimits
from compilation_bridge.refs.shared import (
    MAINTAIN_EVERY_S,
    RETRY_MAX_S,
    SWEEP_BATCH,
    SWEEP_PERIOD_S,
    SharedRefTable,
)
from compilation_bridge.refs.signing import Signer
from compilation_bridge.refs.store import Key
from compilation_bridge.refs.store.redis import RedisStore
from compilation_bridge.refs.store.sqlite import DB_FILE, SqliteStore

Workers = Callable[..., Dispatcher]


@pytest.fixture
def workers(folder: StateFolder, signer: Signer) -> Iterator[Workers]:
    """A factory of 'workers' (dispatchers) sharing the test's SQLite store, each table started."""
    opened: list[SharedRefTable] = []

    def worker(
        limits: RefLimits | None = None,
        key: Signer | None = None,
        clock: Any = None,
        application: str = "default",
    ) -> Dispatcher:
        extra = {"clock": clock} if clock else {}
        table = SharedRefTable(
            SqliteStore(folder), key or signer, application, limits or RefLimits(), **extra
        )
        return _started(table, opened)

    yield worker
    for table in opened:
        table.close(0)


def _started(table: SharedRefTable, opened: list[SharedRefTable]) -> Dispatcher:
    """A 'worker' over `table`, started as a Worker starts it; `opened` closes it at the end."""
    table.start()
    opened.append(table)
    return Dispatcher(refs=table)


def call(dispatcher: Dispatcher, **fields: Any) -> Any:
    reply = dispatcher.execute("snakebridge.call", payload("S", **fields), "worker-session")
    assert reply.success, reply.error
    return reply.result


def fails(dispatcher: Dispatcher, tool: str = "snakebridge.call", **fields: Any) -> dict[str, Any]:
    reply = dispatcher.execute(tool, payload("S", **fields), "worker-session")
    assert not reply.success, reply.result
    return reply.error


def get(dispatcher: Dispatcher, ref: dict[str, Any], attr: str) -> Any:
    return call(dispatcher, call_type="get_attr", attr=attr, instance=ref)


def method(dispatcher: Dispatcher, ref: dict[str, Any], name: str, *args: Any) -> Any:
    return call(dispatcher, call_type="method", function=name, instance=ref, args=list(args))


def test_a_ref_made_on_one_worker_is_served_by_another(workers: Workers) -> None:
    a, b = workers(), workers()
    ref = construct(a, "S", None, 3, None, compile_ranges_split_points=[8, 32])
    assert get(b, ref, "mode") == 3
    assert method(b, ref, "compute_hash") == method(a, ref, "compute_hash")
    assert method(b, ref, "__repr__") == method(a, ref, "__repr__")


def test_changes_are_seen_by_the_next_call_on_any_worker(workers: Workers) -> None:
    a, b = workers(), workers()
    ref = construct(a, "S", mode=3, cudagraph_capture_sizes=[4, 1, 2], max_cudagraph_capture_size=4)
    assert get(b, ref, "mode") == 3  # b now holds a local copy
    call(a, call_type="set_attr", attr="cache_dir", instance=ref, args=["/tmp/x"])
    assert get(b, ref, "cache_dir") == "/tmp/x"  # b's copy was stale: never served
    method(b, ref, "post_init_cudagraph_sizes")  # a mutating method, on the other worker
    assert get(a, ref, "cudagraph_capture_sizes") == [1, 2, 4]
    assert get(a, ref, "bs_to_padded_graph_size")[:5] == [0, 1, 2, 4, 4]  # an init=False field
    assert method(a, ref, "compute_hash") == method(b, ref, "compute_hash")


def test_set_splitting_ops_on_another_worker(workers: Workers) -> None:
    a, b = workers(), workers()
    ref = construct(a, "S", mode=3)
    method(b, ref, "set_splitting_ops_for_v1", "allgather_reducescatter")
    assert get(a, ref, "splitting_ops") == get(b, ref, "splitting_ops") != None  # noqa: E711


def test_refs_returned_by_calls_are_values_too(workers: Workers) -> None:
    a, b = workers(), workers()
    config = construct(a, "S", mode=3, compile_ranges_split_points=[8])
    pass_config = get(a, config, "pass_config")
    ranges = method(a, config, "get_compile_ranges")
    assert method(b, pass_config, "__repr__") == method(a, pass_config, "__repr__")
    assert method(b, pass_config, "compute_hash") == method(a, pass_config, "compute_hash")
    first = ranges[0]
    assert get(b, first, "end") == get(a, first, "end")
    full = construct(a, "S", mode=3, cudagraph_mode="FULL")
    member = get(a, full, "cudagraph_mode")  # an enum member: a ref, restored as the member itself
    assert get(b, member, "name") == "FULL" and get(b, member, "value") == 2


def test_a_ref_read_from_another_stays_part_of_it_on_every_worker(workers: Workers) -> None:
    a, b = workers(), workers()
    vc = call(a, call_type="class", python_module="vllm.config", **{"class": "VllmConfig"})
    cc = get(b, vc, "compilation_config")  # made on b, inside b's copy of vc
    call(a, call_type="set_attr", attr="cache_dir", instance=cc, args=["/tmp/through-the-child"])
    for worker in (a, b):  # the parent sees the change made through the child, on both workers
        assert get(worker, get(worker, vc, "compilation_config"), "cache_dir") == "/tmp/through-the-child"
    pass_config = get(a, cc, "pass_config")  # a grandchild
    call(b, call_type="set_attr", attr="fuse_norm_quant", instance=pass_config, args=[True])
    assert get(a, get(a, cc, "pass_config"), "fuse_norm_quant") is True
    assert method(a, vc, "compute_hash") == method(b, vc, "compute_hash")
    a.execute("snakebridge.release_ref", payload("S", ref=vc), "w")
    assert get(b, cc, "cache_dir") == "/tmp/through-the-child"  # the parent gone, the child stands


def test_release_ref_and_session_act_on_the_store(workers: Workers) -> None:
    a, b = workers(), workers()
    one, two = construct(a), construct(a)
    get(b, one, "mode")
    assert a.execute("snakebridge.release_ref", payload("S", ref=one), "w").result is True
    assert (
        "Unknown SnakeBridge reference"
        in fails(b, call_type="get_attr", attr="mode", instance=one)["message"]
    )
    assert b.execute("snakebridge.release_session", payload("S"), "w").result == 1
    assert (
        "Unknown SnakeBridge reference"
        in fails(a, call_type="get_attr", attr="mode", instance=two)["message"]
    )
    assert a.refs.count() == 0


def test_quotas_count_what_a_session_holds_in_the_store(workers: Workers) -> None:
    limits = RefLimits(max_per_session=2, max_total=3, max_sessions=2)
    a, b = workers(limits), workers(limits)
    first = construct(a, "S")
    construct(b, "S")
    construct(a, "S")  # evicts the session's least recently used ref, wherever it was made
    assert "Unknown" in fails(b, call_type="get_attr", attr="mode", instance=first)["message"]
    construct(b, "T")
    assert "table is full" in fails(a, call_type="class", **{"class": "CompilationConfig"})["message"]


def test_a_tampered_entry_is_refused(workers: Workers, state_dir: Path) -> None:
    a, b = workers(), workers()
    ref = construct(a)
    with sqlite3.connect(state_dir / DB_FILE) as db:
        db.execute(
            "UPDATE refs SET state = CAST(replace(state, 'mode', 'modf') AS BLOB), version = version + 1"
        )
    err = fails(b, call_type="get_attr", attr="mode", instance=ref)
    assert "failed authentication" in err["message"]


def test_another_key_is_another_namespace(workers: Workers) -> None:
    a, b = workers(), workers(key=Signer(b"k" * 32))
    ref = construct(a)
    assert (
        "Unknown SnakeBridge reference"
        in fails(b, call_type="get_attr", attr="mode", instance=ref)["message"]
    )


def test_an_entry_signed_with_another_key_is_refused(workers: Workers, state_dir: Path) -> None:
    a, b = workers(), workers()
    ref = construct(a)
    forger = Signer(b"k" * 32)
    with sqlite3.connect(state_dir / DB_FILE) as db:
        version, state = db.execute("SELECT version, state FROM refs").fetchone()
        key = Key(a.refs.app, "S", ref["id"])  # type: ignore[attr-defined]
        db.execute(
            "UPDATE refs SET version = ?, mac = ?", (version + 1, forger.sign(key, version + 1, state))
        )
    assert "failed authentication" in fails(b, call_type="get_attr", attr="mode", instance=ref)["message"]


def test_objects_that_are_not_data_say_where_they_live(workers: Workers) -> None:
    a, b = workers(), workers()
    ref_id = a.refs.put("S", iter([1, 2]))
    err = fails(
        b, call_type="stream_next", stream_ref={"__type__": "stream_ref", "id": ref_id, "session_id": "S"}
    )
    assert "lives only in worker" in err["message"]


def test_copies_of_refs_released_elsewhere_are_swept(workers: Workers) -> None:
    now = [1000.0]
    a, b = workers(clock=lambda: now[0]), workers(clock=lambda: now[0])
    ref = construct(a)
    get(b, ref, "mode")
    assert b.execute("snakebridge.release_ref", payload("S", ref=ref), "w").result is True
    assert len(a.refs._local) == 1
    construct(a, "T")
    sweep_one_period(a)
    assert [key.session for key in a.refs._local] == ["T"]


def test_copies_in_use_never_hide_stale_copies_from_the_sweep(workers: Workers) -> None:
    """Under a pool's steady traffic, refs made on one worker are released through another. Their copies
    must go within a sweep period even behind many copies in use, or they pile up to the table's limit
    (the memory a soak through Snakepit saw grow without a plateau)."""
    a, b = workers(), workers()
    in_use = [construct(a, "live") for _ in range(SWEEP_BATCH + 50)]
    changed = construct(a, "S")
    released = [construct(a, "gone") for _ in range(40)]
    for ref in released:
        assert b.execute("snakebridge.release_ref", payload("gone", ref=ref), "w").result is True
    call(b, call_type="set_attr", attr="cache_dir", instance=changed, args=["/tmp/elsewhere"])
    for ref in in_use:  # used: copies in use stay in the least recently used part of the order
        assert a.refs.get("live", ref["id"]) is not None
    sweep_one_period(a)
    sweep_one_period(a)  # a period is "about": each pass takes a tenth of what is held then
    assert {key.session for key in a.refs._local} == {"live"}
    assert len(a.refs._local) == len(in_use)
    assert get(a, changed, "cache_dir") == "/tmp/elsewhere"  # loaded again when used


def sweep_one_period(worker: Dispatcher) -> None:
    """What the table's own thread does over one SWEEP_PERIOD_S."""
    for _ in range(math.ceil(SWEEP_PERIOD_S / MAINTAIN_EVERY_S)):
        worker.refs._sweep()


def test_a_class_held_by_ref_is_served_anywhere(workers: Workers) -> None:
    a, b = workers(), workers()
    cls = a.refs.put("S", a.surface.module_attr("vllm.config", "CompilationConfig"))
    assert b.refs.get("S", cls) is b.surface.module_attr("vllm.config", "CompilationConfig")


def test_ttl_drops_unused_refs_everywhere(workers: Workers) -> None:
    now = [1000.0]
    limits = RefLimits(ttl_seconds=10)
    a, b = workers(limits, clock=lambda: now[0]), workers(limits, clock=lambda: now[0])
    ref = construct(a)
    now[0] += 5
    assert get(b, ref, "mode") is None
    now[0] += 8  # used 8 s ago on b: still alive
    assert get(a, ref, "mode") is None
    now[0] += 30  # an expired entry is gone at once, before any prune
    assert "Unknown" in fails(a, call_type="get_attr", attr="mode", instance=ref)["message"]
    assert a.refs.count() == 1 and a.refs.store.prune(now[0]) == 1 and a.refs.count() == 0


# ------------------------------------------------------------------------------ Redis, and its outage


@pytest.fixture
def redis_workers(redis_server: RedisServer, signer: Signer) -> Iterator[Workers]:
    base = f"test:{uuid.uuid4().hex}:"
    opened: list[SharedRefTable] = []

    def worker() -> Dispatcher:
        table = SharedRefTable(RedisStore(redis_server.url, base=base), signer, "default", RefLimits())
        return _started(table, opened)

    yield worker
    for table in opened:
        table.close(0)


def test_redis_shares_refs_and_changes(redis_workers: Workers) -> None:
    a, b = redis_workers(), redis_workers()
    ref = construct(a, "S", mode=3)
    call(b, call_type="set_attr", attr="cache_dir", instance=ref, args=["/tmp/y"])
    assert get(a, ref, "cache_dir") == "/tmp/y"
    assert method(a, ref, "compute_hash") == method(b, ref, "compute_hash")


def test_an_unreachable_store_loses_nothing(redis_workers: Workers, redis_server: RedisServer) -> None:
    a, b = redis_workers(), redis_workers()
    held = construct(a, "S", mode=3)
    only_on_a = construct(a, "S", mode=2)
    get(b, held, "mode")
    redis_server.stop()
    try:
        assert get(b, held, "mode") == 3  # local refs keep working
        err = fails(b, call_type="get_attr", attr="mode", instance=only_on_a)
        assert err["type"] == "RefStoreUnavailable" and "unreachable" in err["message"]
        made_while_down = construct(b, "S", mode=1)
        call(b, call_type="set_attr", attr="cache_dir", instance=held, args=["/tmp/down"])
    finally:
        redis_server.resume()
    time.sleep(RETRY_MAX_S + 0.5)  # no call needed: the table's own thread writes what waited
    assert get(a, made_while_down, "mode") == 1
    assert get(a, held, "cache_dir") == "/tmp/down"
    assert get(b, only_on_a, "mode") == 2
