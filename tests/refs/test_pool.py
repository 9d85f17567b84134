"""Real workers (spawned as Snakepit spawns them) sharing one store: no ref is lost to routing or kill -9.

Each call goes to a worker chosen at random, as Snakepit's pool may route a session's calls.
"""

from __future__ import annotations

import random
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.refs.redisserver import RedisServer

from compilation_bridge.refs.keys import KEY_FILE
from compilation_bridge.refs.shared import RETRY_MAX_S
from compilation_bridge.testing.session import CallError, SnakeBridgeSession
from compilation_bridge.testing.worker_process import WorkerProcess

CALLERS, ROUNDS = 8, 5


def spawn_pool(size: int, state_dir: Path, **env: str) -> list[WorkerProcess]:
    extra = {"COMPILATION_BRIDGE_STATE_DIR": str(state_dir), **env}
    return [WorkerProcess.spawn(extra_env=extra) for _ in range(size)]


def stop_pool(workers: list[WorkerProcess]) -> None:
    for worker in workers:
        worker.terminate()


class Routed:
    """One caller's session, each call sent to any live worker of the pool."""

    def __init__(self, workers: list[WorkerProcess], session_id: str) -> None:
        self.workers = workers
        self.session_id = session_id
        self.used: list[int] = []

    def on(self, index: int | None = None) -> SnakeBridgeSession:
        live = [i for i, w in enumerate(self.workers) if w.process.poll() is None]
        index = random.choice(live) if index is None else index
        self.used.append(index)
        worker = self.workers[index]
        return SnakeBridgeSession(worker.stub, worker.session_id, self.session_id, timeout_s=60)

    def sequence(self) -> None:
        config = self.on().call_class("vllm.config", "CompilationConfig", [None, 3, None])
        assert self.on().get_attr(config, "mode") == 3
        assert len(self.on().call_method(config, "compute_hash")) == 64
        assert self.on().release_ref(config) is True


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[list[WorkerProcess]]:
    workers = spawn_pool(3, tmp_path / "state")
    yield workers
    stop_pool(workers)


def test_concurrent_callers_lose_no_ref(pool: list[WorkerProcess]) -> None:
    failures: list[str] = []
    lock = threading.Lock()

    def caller(number: int) -> set[int]:
        routed = Routed(pool, f"session_caller_{number}")
        for _ in range(ROUNDS):
            try:
                routed.sequence()
            except Exception as exc:
                with lock:
                    failures.append(f"{type(exc).__name__}: {exc}")
        return set(routed.used)

    with ThreadPoolExecutor(CALLERS) as executor:
        used = list(executor.map(caller, range(CALLERS)))
    assert failures == []
    assert all(len(workers) > 1 for workers in used)  # every caller was served by several workers


def test_a_ref_outlives_the_worker_that_made_it(pool: list[WorkerProcess]) -> None:
    routed = Routed(pool, "session_kill")
    config = routed.on(0).call_class("vllm.config", "CompilationConfig", mode=3, cache_dir="/tmp/a")
    routed.on(0).set_attr(config, "cache_dir", "/tmp/b")
    expected = routed.on(0).call_method(config, "compute_hash")
    pool[0].terminate(signal.SIGKILL)
    assert routed.on(1).get_attr(config, "cache_dir") == "/tmp/b"
    assert routed.on(2).call_method(config, "compute_hash") == expected


def test_two_hosts_share_refs_through_redis(tmp_path: Path, redis_server: RedisServer) -> None:
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    env = {"COMPILATION_BRIDGE_REF_STORE": redis_server.url}
    group_a = spawn_pool(2, host_a, **env)
    try:
        host_b.mkdir(mode=0o700)
        shutil.copy2(host_a / KEY_FILE, host_b / KEY_FILE)  # what an operator does once per host
        group_b = spawn_pool(2, host_b, **env)
    except BaseException:
        stop_pool(group_a)
        raise
    try:
        _share_between(group_a, group_b)
    finally:
        stop_pool(group_a + group_b)


def _share_between(group_a: list[WorkerProcess], group_b: list[WorkerProcess]) -> None:
    on_a, on_b = Routed(group_a, "session_hosts"), Routed(group_b, "session_hosts")
    sizes = {"cudagraph_capture_sizes": [2, 1], "max_cudagraph_capture_size": 2}
    config = on_a.on().call_class("vllm.config", "CompilationConfig", mode=3, **sizes)
    on_b.on().call_method(config, "post_init_cudagraph_sizes")
    assert on_a.on().get_attr(config, "cudagraph_capture_sizes") == [1, 2]
    assert on_a.on().call_method(config, "compute_hash") == on_b.on().call_method(config, "compute_hash")
    assert on_b.on().release_ref(config) is True
    with pytest.raises(Exception, match="Unknown SnakeBridge reference"):
        on_a.on().get_attr(config, "mode")


def test_workers_ride_out_a_store_outage(tmp_path: Path, redis_server: RedisServer) -> None:
    workers = spawn_pool(2, tmp_path / "state", COMPILATION_BRIDGE_REF_STORE=redis_server.url)
    try:
        routed = Routed(workers, "session_outage")
        held = routed.on(0).call_class("vllm.config", "CompilationConfig", mode=3)
        redis_server.stop()
        try:
            assert routed.on(0).get_attr(held, "mode") == 3  # held by worker 0: keeps working
            with pytest.raises(CallError) as refused:
                routed.on(1).get_attr(held, "mode")  # worker 1 would have to load it
            assert refused.value.error["type"] == "RefStoreUnavailable"
            assert "unreachable" in refused.value.error["message"]
            made_while_down = routed.on(0).call_class("vllm.config", "CompilationConfig", mode=2)
        finally:
            redis_server.resume()
        time.sleep(RETRY_MAX_S + 0.5)  # no call needed: worker 0's flusher writes what waited
        assert routed.on(1).get_attr(made_while_down, "mode") == 2
        assert routed.on(1).get_attr(held, "mode") == 3
    finally:
        stop_pool(workers)


def test_sigterm_during_an_outage_loses_nothing(tmp_path: Path, redis_server: RedisServer) -> None:
    """What a worker accepted while the store was down survives its SIGTERM: journaled in its state
    folder, written by the next worker of the host once the store is back."""
    env = {"COMPILATION_BRIDGE_REF_STORE": redis_server.url}
    first = spawn_pool(1, tmp_path / "state", **env)
    try:
        redis_server.stop()
        made_while_down = (
            Routed(first, "session_term").on(0).call_class("vllm.config", "CompilationConfig", mode=2)
        )
    finally:
        code, _ = first[0].terminate(signal.SIGTERM)
        redis_server.resume()
    assert code == 0
    assert any(p.name.startswith("pending-") for p in (tmp_path / "state").iterdir())
    second = spawn_pool(1, tmp_path / "state", **env)
    try:
        routed = Routed(second, "session_term")
        deadline = time.monotonic() + 20
        while True:
            try:
                assert routed.on(0).get_attr(made_while_down, "mode") == 2
                break
            except CallError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        stop_pool(second)


def test_a_hung_store_never_holds_up_ping_heartbeat_or_cleanup(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A Redis that stops answering (SIGSTOP: connections hang, nothing refuses them) must not take the
    threads kept for the control path: CleanupSession queues its release, Ping and Heartbeat answer."""
    from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb

    workers = spawn_pool(1, tmp_path / "state", COMPILATION_BRIDGE_REF_STORE=redis_server.url)
    worker = workers[0]
    try:
        session = Routed(workers, "session_hung").on(0)
        held = session.call_class("vllm.config", "CompilationConfig", mode=3)
        assert redis_server.process is not None
        redis_server.process.send_signal(signal.SIGSTOP)
        try:
            with ThreadPoolExecutor(16) as pool:
                cleanups = [
                    pool.submit(
                        worker.stub.CleanupSession, pb.CleanupSessionRequest(session_id=f"s{n}"), timeout=5
                    )
                    for n in range(16)
                ]
                for future in cleanups:
                    assert future.result().success
            # Deadlines below the store's own timeout (2 s): a control call that waited for the hung store
            # would miss them, however quiet or loaded the machine.
            for _ in range(5):
                worker.stub.Ping(pb.PingRequest(message="still there"), timeout=1.5)
                worker.stub.Heartbeat(pb.HeartbeatRequest(session_id=worker.session_id), timeout=1.5)
        finally:
            redis_server.process.send_signal(signal.SIGCONT)
        assert session.get_attr(held, "mode") == 3
    finally:
        stop_pool(workers)


def test_a_restarted_application_starts_with_an_empty_store(tmp_path: Path) -> None:
    """Five stop/start cycles of an application (a new BEAM: a new Snakepit run id each time) leave the
    refs of the last run only, not of every run (SnakeBridge releases nothing at Application.stop)."""
    import sqlite3

    from compilation_bridge.refs.store.sqlite import DB_FILE
    from compilation_bridge.testing.worker_process import run_id

    extra = {"COMPILATION_BRIDGE_STATE_DIR": str(tmp_path / "state")}
    for cycle in range(5):
        run = f"{run_id()[:5]}{cycle:02d}"
        worker = WorkerProcess.spawn(extra_env=extra, run=run)
        try:
            session = SnakeBridgeSession(worker.stub, worker.session_id, f"session_{cycle}", timeout_s=60)
            for _ in range(20):
                session.call_class("vllm.config", "CompilationConfig", mode=3)
        finally:
            worker.terminate()
        with sqlite3.connect(tmp_path / "state" / DB_FILE) as db:
            counted = db.execute("SELECT count(*) FROM refs").fetchone()[0]
        assert counted == 20, f"cycle {cycle}: {counted} refs in the store"
