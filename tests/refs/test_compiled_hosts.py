"""Two hosts (own state, caches and workers; one Redis): a compiled model made on A is served on B.

B rebuilds the `CompiledModel` from its recipe in the ref store; with the Redis store and
`COMPILATION_BRIDGE_INDUCTOR_REMOTE_CACHE`, Inductor's FX graph and AOTAutograd caches live in the same
Redis, every entry behind a MAC, so B's compile finds A's artifacts there and nobody else's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import redis
from tests.refs.redisserver import RedisServer

from compilation_bridge.refs.keys import KEY_FILE
from compilation_bridge.testing.session import SnakeBridgeSession, wire_ref
from compilation_bridge.testing.worker_process import WorkerProcess, host_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_a_compiled_model_moves_to_another_host(tmp_path: Path, redis_server: RedisServer) -> None:
    cache = {"COMPILATION_BRIDGE_INDUCTOR_REMOTE_CACHE": "1"}
    env_a = {**host_env(tmp_path / "a", redis_server.url), **cache}
    env_b = {**host_env(tmp_path / "b", redis_server.url), **cache}
    host_a = WorkerProcess.spawn(extra_env=env_a)
    try:
        Path(env_b["COMPILATION_BRIDGE_STATE_DIR"]).mkdir(mode=0o700)
        shutil.copy2(
            Path(env_a["COMPILATION_BRIDGE_STATE_DIR"]) / KEY_FILE, env_b["COMPILATION_BRIDGE_STATE_DIR"]
        )
        host_b = WorkerProcess.spawn(extra_env=env_b)
    except BaseException:
        host_a.terminate()
        raise
    try:
        on_a = SnakeBridgeSession(host_a.stub, host_a.session_id, "session_compile", timeout_s=300)
        on_b = SnakeBridgeSession(host_b.stub, host_b.session_id, "session_compile", timeout_s=300)
        cc = on_a.call_class("vllm.config", "CompilationConfig", [None, 3, None], backend="inductor")
        model = on_a.call(
            "compilation_bridge.compile", "compile_model", [wire_ref(cc)], max_num_tokens=16, num_layers=1
        )
        ran_on_a = on_a.call_method(model, "run", [8])
        assert _inductor_keys(redis_server) > 0, "host A wrote nothing to Inductor's remote caches"
        ran_on_b = on_b.call_method(model, "run", [8])  # rebuilt on B from the recipe
        assert ran_on_b["num_tokens"] == ran_on_a["num_tokens"] == 8
        assert ran_on_b["max_abs_diff_vs_eager"] < 1e-3
        report = on_b.call_method(model, "report")
        assert report["model_options"] == {"num_layers": 1} and report["mode"] == "VLLM_COMPILE"
        assert on_b.get_attr(cc, "mode") == 3
    finally:
        host_a.terminate()
        host_b.terminate()


def _inductor_keys(server: RedisServer) -> int:
    client = redis.Redis.from_url(server.url)
    try:
        return sum(1 for key in client.scan_iter(count=1000) if not key.startswith(b"compilation-bridge:"))
    finally:
        client.close()


def test_on_one_host_the_rebuilt_model_loads_from_the_compile_cache(tmp_path: Path) -> None:
    env = host_env(tmp_path / "host", "sqlite")
    first, second = WorkerProcess.spawn(extra_env=env), WorkerProcess.spawn(extra_env=env)
    try:
        on_first = SnakeBridgeSession(first.stub, first.session_id, "session_warm", timeout_s=300)
        on_second = SnakeBridgeSession(second.stub, second.session_id, "session_warm", timeout_s=300)
        cc = on_first.call_class("vllm.config", "CompilationConfig", [None, 3, None], backend="inductor")
        model = on_first.call(
            "compilation_bridge.compile", "compile_model", [wire_ref(cc)], max_num_tokens=16, num_layers=1
        )
        on_first.call_method(model, "run", [8])
        assert on_first.call_method(model, "report")["num_artifacts_saved"] > 0
        assert on_second.call_method(model, "run", [8])["num_tokens"] == 8  # rebuilt: a warm load
        report = on_second.call_method(model, "report")
        assert report["num_artifacts_loaded"] > 0 and report["num_artifacts_saved"] == 0
    finally:
        first.terminate()
        second.terminate()


def test_remote_cache_entries_without_the_mac_are_misses(redis_server: RedisServer) -> None:
    """Inductor unpickles what its remote cache returns: a value planted without the key never gets there."""
    from compilation_bridge import remote_cache
    from compilation_bridge.refs.signing import Signer

    torch_remote_cache = pytest.importorskip("torch._inductor.remote_cache")
    backend = remote_cache._backend_class(torch_remote_cache, redis_server.url, Signer(b"k" * 32).tag)()
    backend.put("pt2:test::key", b"compiled artefact")
    assert backend.get("pt2:test::key") == b"compiled artefact"
    client = redis.Redis.from_url(redis_server.url)
    try:
        stored = client.get("pt2:test::key")
        assert stored is not None and stored.endswith(b"compiled artefact") and len(stored) == 32 + 17
        client.set("pt2:test::key", b"\x80\x04cos\nsystem\n")  # a pickle someone planted
        assert backend.get("pt2:test::key") is None
        client.set("pt2:test::other", stored)  # a genuine entry moved to another key
        assert backend.get("pt2:test::other") is None
    finally:
        client.close()
