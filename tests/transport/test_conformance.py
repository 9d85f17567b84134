"""Wire conformance: a worker spawned exactly as Snakepit spawns it, called exactly as SnakeBridge calls.

Every function of the generated `Vllm.Config.CompilationConfig` (the seed) is sent at least once and its
wire result compared with the same call made in-process, so that the transport adds nothing and loses
nothing. Also: the process contract (argv, ready file, setsid, loopback, health), heartbeats during
long calls, sessions and release, bad input, and SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from compilation_bridge.protocol.codec import Encoder
from compilation_bridge.testing.fake_elixir import ElixirBridgeServer
from compilation_bridge.testing.session import CallError, SnakeBridgeSession, wire_ref
from compilation_bridge.testing.worker_process import WorkerProcess, launch_script
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.vllm_config import CompilationConfig, VllmConfig

pytestmark = pytest.mark.timeout(120)

GETTERS = [
    "_attention_ops",
    "backend",
    "bs_to_padded_graph_size",
    "cache_dir",
    "compilation_time",
    "compile_mm_encoder",
    "compile_ranges_split_points",
    "compile_sizes",
    "cudagraph_capture_sizes",
    "cudagraph_copy_inputs",
    "cudagraph_mode",
    "cudagraph_num_of_warmups",
    "cudagraph_specialize_lora",
    "debug_dump_path",
    "level",
    "local_cache_dir",
    "max_cudagraph_capture_size",
    "mode",
    "splitting_ops",
    "use_inductor_graph_partition",
]
# (method, args) as the generated wrapper sends them; set_splitting_ops_for_v1's optional
# data_parallel_size travels in its `args` list.
METHODS: list[tuple[str, list[Any]]] = [
    ("_skip_none_validation", [None, None]),
    ("adjust_cudagraph_sizes_for_spec_decode", [2, 1]),
    ("compute_bs_to_padded_graph_size", []),
    ("compute_hash", []),
    ("custom_op_log_check", []),
    ("get_compile_ranges", []),
    ("is_attention_compiled_piecewise", []),
    ("is_custom_op_enabled", ["rms_norm"]),
    ("post_init_cudagraph_sizes", []),
    ("set_splitting_ops_for_attn_fusion", []),
    ("set_splitting_ops_for_v1", ["naive", 1]),
    ("splitting_ops_contain_attention", []),
    ("validate_compile_cache_save_format", ["binary"]),
    ("validate_cudagraph_mode_before", ["piecewise"]),
    ("validate_mode_before", ["VLLM_COMPILE"]),
    ("validate_pass_config_before", [{"fuse_norm_quant": True}]),
]
CONSTRUCTIONS: list[tuple[list[Any], dict[str, Any]]] = [
    ([None, None, None], {}),
    ([None, 3, None], {"cudagraph_capture_sizes": [1, 2, 4, 8], "max_cudagraph_capture_size": 8}),
    ([], {"mode": 3, "compile_ranges_split_points": [16], "cudagraph_mode": "PIECEWISE"}),
]


def strip_ids(value: Any) -> Any:
    """Ref ids and sessions differ between the two runs; everything else must be equal."""
    if isinstance(value, dict):
        return {k: strip_ids(v) for k, v in value.items() if k not in ("id", "session_id")}
    if isinstance(value, list):
        return [strip_ids(v) for v in value]
    return value


def local_outcome(fn: Any) -> tuple[Any, ...]:
    def make_ref(obj: Any, stream_type: str | None) -> dict[str, Any]:
        ref = {"__type__": "stream_ref" if stream_type else "ref", "__schema__": 1}
        ref.update(python_module="vllm.config", library="vllm")
        ref.update(type_name=type(obj).__name__, __type_name__=type(obj).__name__)
        return {**ref, **({"stream_type": stream_type} if stream_type else {})}

    try:
        return ("ok", strip_ids(json.loads(json.dumps(Encoder(make_ref).encode(fn())))))
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc))


def wire_outcome(fn: Any) -> tuple[Any, ...]:
    try:
        return ("ok", strip_ids(fn()))
    except CallError as exc:
        return ("error", exc.error["type"], exc.error["message"])


@pytest.mark.parametrize(("args", "kwargs"), CONSTRUCTIONS)
def test_every_seed_function_matches_in_process(
    session: SnakeBridgeSession, args: list[Any], kwargs: dict[str, Any]
) -> None:
    wire = session.call_class("vllm.config", "CompilationConfig", args, **kwargs)
    local = CompilationConfig(*args, **kwargs)
    assert wire["type_name"] == "CompilationConfig" and wire["session_id"] == session.session_id
    for name in GETTERS:
        assert wire_outcome(lambda n=name: session.get_attr(wire, n)) == local_outcome(
            lambda n=name: getattr(local, n)
        ), name
    for name, method_args in METHODS:
        got = wire_outcome(lambda n=name, a=method_args: session.call_method(wire, n, a))
        expected = local_outcome(lambda n=name, a=method_args: getattr(local, n)(*a))
        assert got == expected, name
    # ... and the object state after all those calls is the same too.
    assert session.call_method(wire, "compute_hash") == local.compute_hash()
    assert session.call_method(wire, "__repr__") == repr(local)


def test_init_backend_with_a_vllm_config_ref(session: SnakeBridgeSession) -> None:
    cc = session.call_class("vllm.config", "CompilationConfig", [None, None, None])
    vllm_config = session.call_class("vllm.config", "VllmConfig", [], compilation_config=wire_ref(cc))
    local_cc = CompilationConfig()
    local_vllm = VllmConfig(compilation_config=local_cc)
    got = wire_outcome(lambda: session.call_method(cc, "init_backend", [wire_ref(vllm_config)]))
    assert got == local_outcome(lambda: local_cc.init_backend(local_vllm))
    # VllmConfig keeps the same CompilationConfig object and mutates it: so does the wire.
    assert session.call_method(cc, "compute_hash") == local_cc.compute_hash()


def test_construction_semantics_over_the_wire(session: SnakeBridgeSession) -> None:
    with pytest.raises(CallError) as info:
        session.call_class("vllm.config", "CompilationConfig", [None, None, None], mode=3)
    assert info.value.error["type"] == "ValidationError"
    assert "Got multiple values for argument" in info.value.error["message"]
    assert info.value.error["context"]["function"] == "__init__"
    positional = session.call_class("vllm.config", "CompilationConfig", [None, 3, None])
    assert session.get_attr(positional, "mode") == 3
    keyword = session.call_class("vllm.config", "CompilationConfig", [], mode="VLLM_COMPILE")
    assert session.get_attr(keyword, "mode") == 3
    assert (
        session.get_attr(session.call_class("vllm.config", "CompilationConfig", [None] * 3), "mode") is None
    )


def test_set_attr_and_module_attr(session: SnakeBridgeSession) -> None:
    cc = session.call_class("vllm.config", "CompilationConfig", [None, None, None])
    assert session.set_attr(cc, "cache_dir", "/tmp/vc") is True
    assert session.get_attr(cc, "cache_dir") == "/tmp/vc"
    mode_cls = session.module_attr("vllm.config", "CompilationMode")
    assert session.get_attr(mode_cls, "DYNAMO_TRACE_ONCE") == 2


def test_release_ref_and_session(session: SnakeBridgeSession) -> None:
    refs = [session.call_class("vllm.config", "CompilationConfig", [None, None, None]) for _ in range(3)]
    assert session.release_ref(refs[0]) is True
    assert session.release_ref(refs[0]) is False
    with pytest.raises(CallError) as info:
        session.call_method(refs[0], "compute_hash")
    assert info.value.error["type"] == "KeyError"
    assert info.value.error["message"] == f"'Unknown SnakeBridge reference: {refs[0]['id']}'"
    assert session.release_session() == 2
    assert session.release_session() == 0


def test_ref_limits_from_the_environment() -> None:
    worker = WorkerProcess.spawn(extra_env={"SNAKEBRIDGE_REF_MAX": "2"}, heartbeat_interval_s=None)
    try:
        session = SnakeBridgeSession(worker.stub, worker.session_id, session_id="bounded")
        first, second, third = (session.call_class("vllm.config", "PassConfig", []) for _ in range(3))
        with pytest.raises(CallError) as info:
            session.call_method(first, "compute_hash")
        assert info.value.error["message"] == f"'Unknown SnakeBridge reference: {first['id']}'"
        assert session.call_method(second, "compute_hash") == session.call_method(third, "compute_hash")
    finally:
        worker.terminate()


def test_sessions_do_not_see_each_other(worker: WorkerProcess) -> None:
    alice = SnakeBridgeSession(worker.stub, worker.session_id, session_id="alice")
    mallory = SnakeBridgeSession(worker.stub, worker.session_id, session_id="mallory")
    ref = alice.call_class("vllm.config", "CompilationConfig", [None, None, None])
    payload = mallory.for_ref(ref, "compute_hash", [], {})
    payload["session_id"] = "mallory"
    payload["call_type"] = "method"
    with pytest.raises(CallError) as info:
        mallory.execute("snakebridge.call", payload)
    assert info.value.error["message"] == "SnakeBridge reference session mismatch"
    assert mallory.release_session() == 0
    assert alice.call_method(ref, "compute_hash")


def test_inspect_and_enumerable_protocol(session: SnakeBridgeSession) -> None:
    cc = session.call_class("vllm.config", "CompilationConfig", [None, None, None])
    assert session.call_method(cc, "__repr__").startswith("{'level': None")
    assert session.call_method(cc, "__str__") == session.call_method(cc, "__repr__")
    path = session.call_class("vllm.config", "CompilationConfig", [None, None, "/tmp/dump"])
    dump = session.get_attr(path, "debug_dump_path")
    assert dump["type_name"] in ("PosixPath", "Path")
    assert session.call_method(dump, "__str__") == "/tmp/dump"
    with pytest.raises(CallError) as info:
        session.get_attr(dump, "parent")
    assert info.value.error["type"] == "PermissionError"


def test_refused_and_missing_names(session: SnakeBridgeSession) -> None:
    cc = session.call_class("vllm.config", "CompilationConfig", [None, None, None])
    with pytest.raises(CallError) as info:
        session.get_attr(cc, "nothing_here")
    assert (info.value.error["type"], info.value.error["message"]) == (
        "AttributeError",
        "'CompilationConfig' object has no attribute 'nothing_here'",
    )
    for name in ("__class__", "__dict__", "__globals__"):
        with pytest.raises(CallError) as info:
            session.call_method(cc, name)
        assert info.value.error["type"] in ("PermissionError", "AttributeError"), name
    with pytest.raises(CallError) as info:
        session.call("builtins", "eval", ["1+1"])
    assert info.value.error["type"] == "ImportError"


def test_streaming_tool(worker: WorkerProcess) -> None:
    session = SnakeBridgeSession(worker.stub, worker.session_id, session_id="streamer")
    chunks = session.stream(session.base("vllm.config", "CompilationConfig", [None, None, None], {}))
    assert chunks[-1] == {"is_final": True}
    assert chunks[0]["type_name"] == "CompilationConfig"
    bad = session.base("os", "listdir", [], {})
    with pytest.raises(grpc.RpcError) as info:
        session.stream(bad)
    assert info.value.code() == grpc.StatusCode.INTERNAL
    assert json.loads(info.value.details())["type"] == "ImportError"


def test_bad_wire_input_keeps_the_worker_serving(worker: WorkerProcess, session: SnakeBridgeSession) -> None:
    keep = session.call_class("vllm.config", "CompilationConfig", [None, None, None])
    request = session.request("snakebridge.call", session.base("vllm.config", "PassConfig", [], {}))
    request.parameters["args"].value = b"[not json"
    response = worker.stub.ExecuteTool(request)
    error = json.loads(response.error_message)
    assert (
        not response.success
        and error["type"] == "ValueError"
        and "'args' is not valid JSON" in error["message"]
    )
    big = session.request(
        "snakebridge.call",
        {**session.base("vllm.config", "PassConfig", [], {}), "pad": "x" * ((4 << 20) + 300_000)},
    )
    response = worker.stub.ExecuteTool(big)
    assert not response.success and "request too large" in json.loads(response.error_message)["message"]
    with pytest.raises(grpc.RpcError) as info:  # beyond the transport limit gRPC itself refuses
        worker.stub.ExecuteTool(
            session.request("snakebridge.call", {"pad": "x" * (8 << 20)}),
        )
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    response = worker.stub.ExecuteTool(pb.ExecuteToolRequest(tool_name="nope"))
    assert json.loads(response.error_message)["type"] == "AttributeError"
    assert session.call_method(keep, "compute_hash")


def test_process_contract(worker: WorkerProcess) -> None:
    pid = worker.process.pid
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert any(arg.endswith(b"grpc_server.py") for arg in cmdline)
    assert b"--snakepit-run-id" in cmdline
    assert os.getpgid(pid) == pid  # SNAKEPIT_PROCESS_GROUP=1 -> setsid before readiness
    response = worker.stub.Ping(pb.PingRequest(message="connection_test"))
    assert response.message == "Pong from Python: connection_test" and response.server_time.seconds > 0
    with socket.create_connection(("127.0.0.1", worker.port), timeout=2):
        pass
    assert _listening_addresses(worker.port) <= {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
    assert worker.stub.Heartbeat(pb.HeartbeatRequest(session_id="anything")).session_valid
    assert worker.stub.InitializeSession(pb.InitializeSessionRequest(session_id="x")).success


def test_config_calls_never_load_torch() -> None:
    worker = WorkerProcess.spawn(heartbeat_interval_s=None)
    try:
        session = SnakeBridgeSession(worker.stub, worker.session_id, session_id="light")
        for args, kwargs in CONSTRUCTIONS:
            cc = session.call_class("vllm.config", "CompilationConfig", args, **kwargs)
            for name in GETTERS:
                session.get_attr(cc, name)
            session.call_method(cc, "compute_hash")
            session.call_class("vllm.config", "VllmConfig", [], compilation_config=wire_ref(cc))
        maps = Path(f"/proc/{worker.process.pid}/maps").read_text()
        assert "libtorch" not in maps, "torch was imported although no request needed it"
        rss_mib = worker.rss_kib() / 1024
        print(f"ready after {worker.ready_after_s * 1000:.0f} ms; RSS after config calls {rss_mib:.0f} MiB")
        assert rss_mib <= 150
    finally:
        worker.terminate()


def _listening_addresses(port: int) -> set[str]:
    addresses = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            host, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:
                continue
            raw = bytes.fromhex(host)
            if family == socket.AF_INET:
                raw = raw[::-1]
            else:
                raw = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
            addresses.add(socket.inet_ntop(family, raw))
    return addresses


def test_concurrent_sessions_stay_isolated(worker: WorkerProcess) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def client(n: int) -> list[str]:
        session = SnakeBridgeSession(worker.stub, worker.session_id, session_id=f"concurrent-{n}")
        hashes = []
        for size in range(1, 6):
            cc = session.call_class(
                "vllm.config", "CompilationConfig", [None, 3, None], compile_sizes=[size * n]
            )
            assert session.get_attr(cc, "compile_sizes") == [size * n]
            hashes.append(session.call_method(cc, "compute_hash"))
        assert session.release_session() == 5
        return hashes

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(client, range(1, 7)))
    expected = [
        [CompilationConfig(None, 3, None, compile_sizes=[s * n]).compute_hash() for s in range(1, 6)]
        for n in range(1, 7)
    ]
    assert results == expected


def test_health_service_and_no_reflection_by_default(worker: WorkerProcess) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    health = health_pb2_grpc.HealthStub(worker.channel)
    status = health.Check(health_pb2.HealthCheckRequest(service="snakepit.bridge.BridgeService"))
    assert status.status == health_pb2.HealthCheckResponse.SERVING
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stub = reflection_pb2_grpc.ServerReflectionStub(worker.channel)
    with pytest.raises(grpc.RpcError) as refused:
        list(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED  # COMPILATION_BRIDGE_REFLECTION=1 enables it


def test_telemetry_stream_is_held_open(worker: WorkerProcess) -> None:
    controls = [pb.TelemetryControl(toggle=pb.TelemetryToggle(enabled=True))]
    done = threading.Event()

    def requests() -> Any:
        yield from controls
        done.wait(5)

    call = worker.stub.StreamTelemetry(requests())
    time.sleep(0.3)
    assert call.is_active() if hasattr(call, "is_active") else True
    call.cancel()
    done.set()


def test_health_check_flag() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(launch_script()),
            "--health-check",
            "--adapter",
            "snakebridge_adapter.SnakeBridgeAdapter",
        ],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0 and result.stdout == b""


def test_unknown_flags_are_tolerated_and_stdout_stays_clean() -> None:
    worker = WorkerProcess.spawn(
        extra_args=[
            "--max-workers",
            "4",
            "--thread-safety-check",
            "--mode",
            "threaded",
            "--heartbeat-enabled",
            "true",
        ],
        heartbeat_interval_s=None,
    )
    try:
        assert worker.stub.Ping(pb.PingRequest(message="x")).message.endswith("x")
    finally:
        code, _elapsed = worker.terminate()
    assert code == 0


HOOKS = {"COMPILATION_BRIDGE_TEST_HOOKS": "1"}


def test_heartbeats_and_pings_answer_during_long_calls() -> None:
    worker = WorkerProcess.spawn(extra_env=HOOKS, heartbeat_interval_s=None)
    try:
        session = SnakeBridgeSession(worker.stub, worker.session_id, session_id="long")
        errors: list[BaseException] = []

        def long_call(fn: str) -> None:
            try:
                session.call("compilation_bridge.testing", fn, [2.0])
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=long_call, args=(fn,)) for fn in ("sleep", "spin", "sleep")]
        for thread in threads:
            thread.start()
        time.sleep(0.2)
        latencies = [worker.heartbeat_once(timeout_s=10) for _ in range(20)]
        ping = worker.stub.Ping(pb.PingRequest(message="health_check_#PID<0.1.0>"), timeout=5)
        for thread in threads:
            thread.join()
        assert not errors and ping.message
        assert min(latencies) >= 0 and not worker.heartbeats.failures
        print(f"heartbeat latency during long calls: max {max(latencies) * 1000:.1f} ms")
    finally:
        worker.terminate()


@pytest.mark.parametrize("busy", [False, True])
def test_sigterm_exits_zero(busy: bool) -> None:
    worker = WorkerProcess.spawn(extra_env=HOOKS, heartbeat_interval_s=None)
    session = SnakeBridgeSession(worker.stub, worker.session_id, session_id="term")
    if busy:
        future = worker.stub.ExecuteTool.future(
            session.request("snakebridge.call", session.base("compilation_bridge.testing", "sleep", [30], {}))
        )
        time.sleep(0.3)
    code, elapsed = worker.terminate(signal.SIGTERM)
    assert code == 0, worker.log_text()
    assert elapsed < 6.0  # Snakepit's graceful window; the target (<= 1 s) is reported by bench
    print(f"SIGTERM ({'during a call' if busy else 'idle'}): exit 0 after {elapsed * 1000:.0f} ms")
    if busy:
        with pytest.raises(grpc.RpcError):
            future.result(timeout=5)


def test_sigint_exits_zero() -> None:
    worker = WorkerProcess.spawn(heartbeat_interval_s=None)
    assert worker.terminate(signal.SIGINT)[0] == 0


def test_dependent_worker_exits_when_elixir_is_gone() -> None:
    elixir = ElixirBridgeServer()
    config = {
        "enabled": True,
        "interval_ms": 100,
        "timeout_ms": 200,
        "max_missed_heartbeats": 2,
        "dependent": True,
    }
    worker = WorkerProcess.spawn(
        elixir_address=elixir.address,
        extra_env={"SNAKEPIT_HEARTBEAT_CONFIG": json.dumps(config)},
        heartbeat_interval_s=None,
    )
    try:
        time.sleep(0.5)
        assert worker.process.poll() is None and elixir.heartbeats
        assert worker.session_id in elixir.heartbeats  # heartbeats carry the initialized session
        assert elixir.sessions == [worker.session_id]  # ... which was created in Elixir's store once
        elixir.stop()
        assert worker.process.wait(timeout=10) == 0
    finally:
        worker.terminate()
