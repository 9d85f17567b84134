"""Only the worker's own user may call it (transport/peers.py): the kernel's socket tables read right, real
workers answering their user and refusing another, the operator's allowlist, and a verdict that a new
connection from the same address and port does not inherit.

Another user's caller is a socket made by a forked child that drops to uid 65534 ('nobody'), handed back
over a Unix socket: the kernel records a socket's creator as its owner, so the worker sees that user,
while the grpc client itself runs in this process and reaches the worker through a relay over that
socket. Dropping to another user needs root; those tests are skipped otherwise.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from compilation_bridge import settings
from compilation_bridge.testing.session import SnakeBridgeSession
from compilation_bridge.testing.worker_process import WorkerProcess
from compilation_bridge.transport import peers
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.peers import Endpoint, PeerCheck, SocketRow
from compilation_bridge.transport.server import _loopback_addresses

NOBODY = 65534
ME = os.geteuid()
as_root = pytest.mark.skipif(ME != 0, reason="acting as another user needs root")
LOOPBACKS = [
    pytest.param(
        address,
        marks=pytest.mark.skipif(address not in _loopback_addresses(), reason=f"this host has no {address}"),
    )
    for address in ("127.0.0.1", "::1")
]


def family_of(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def peer_string(sock: socket.socket) -> str:
    """What grpc's context.peer() says for a caller whose socket is `sock` (IPv6 brackets encoded, as
    grpc 1.85 writes them)."""
    host, port = sock.getsockname()[:2]
    return f"ipv6:%5B{host}%5D:{port}" if sock.family == socket.AF_INET6 else f"ipv4:{host}:{port}"


def socket_as(uid: int, address: str, port: int, source_port: int = 0) -> socket.socket:
    """A TCP socket connected to address:port and owned by `uid`: made by a child that runs as `uid` when
    that is not us, then passed to this process."""
    if uid == ME:
        return _connected(address, port, source_port)
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the child: only system calls, then out
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            sock = _connected(address, port, source_port)
            socket.send_fds(theirs, [b"ok"], [sock.fileno()])
            code = 0
        except BaseException as exc:
            theirs.sendall(repr(exc).encode())
        finally:
            os._exit(code)
    theirs.close()
    try:
        message, fds, _flags, _address = socket.recv_fds(ours, 1024, 1)
    finally:
        ours.close()
        os.waitpid(pid, 0)
    if not fds:
        raise OSError(f"the child running as uid {uid} could not connect: {message.decode()}")
    return socket.socket(fileno=fds[0])


def _connected(address: str, port: int, source_port: int) -> socket.socket:
    sock = socket.socket(family_of(address), socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, source_port))
    sock.connect((address, port))
    return sock


def reset(sock: socket.socket) -> None:
    """Close with a reset (no TIME_WAIT), so the same address and port can be bound again at once."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class Relay:
    """A loopback port whose connections are forwarded through `upstream()`, a socket of someone else's
    making: the worker sees that socket as its caller. Closing resets the upstream connections."""

    def __init__(self, upstream: Callable[[], socket.socket]) -> None:
        self._upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.upstreams: list[socket.socket] = []
        self._pumps: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            upstream = self._upstream()
            self.upstreams.append(upstream)
            for source, sink in ((downstream, upstream), (upstream, downstream)):
                pump = threading.Thread(
                    target=self._pump, args=(source, sink, sink is downstream), daemon=True
                )
                self._pumps.append(pump)
                pump.start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, pass_on_the_end: bool) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            if pass_on_the_end:  # never towards the worker: close() resets that side instead
                sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        self._listener.close()
        for upstream in self.upstreams:
            upstream.shutdown(socket.SHUT_RD)  # wakes its pump; sends nothing
        for pump in self._pumps:
            pump.join(5)
        for upstream in self.upstreams:
            reset(upstream)


def stub_through(relay: Relay) -> tuple[grpc.Channel, pb_grpc.BridgeServiceStub]:
    channel = grpc.insecure_channel(f"127.0.0.1:{relay.port}")
    return channel, pb_grpc.BridgeServiceStub(channel)


def ping(stub: pb_grpc.BridgeServiceStub) -> grpc.StatusCode:
    try:
        stub.Ping(pb.PingRequest(message="connection_test"), timeout=10)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def spawn(uids: str = "", extra_args: tuple[str, ...] = ()) -> WorkerProcess:
    env = {peers.ALLOWED_PEER_UIDS_ENV: uids, "SNAKEPIT_LOG_LEVEL": "warning"}
    return WorkerProcess.spawn(extra_env=env, extra_args=extra_args, heartbeat_interval_s=None)


@pytest.fixture(scope="module")
def worker() -> Iterator[WorkerProcess]:
    process = spawn()
    yield process
    assert process.terminate()[0] == 0


# ------------------------------------------------------------------ the kernel's tables
# Captured from /proc/net/tcp and /proc/net/tcp6 on Linux 6.18, x86_64 (little-endian).
TCP_LINES = [
    "   1: 0100007F:9AE5 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 133486 1 "
    "000000008fc0476a 100 0 0 10 0                    ",
    "   3: 0100007F:8290 0100007F:E00F 06 00000000:00000000 03:00000D69 00000000     0        0 0 3 "
    "0000000083e3f6ae                                      ",
    "   1: 0100007F:EDFD 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65534        0 137362 1 "
    "000000003c1d6615 100 0 0 10 0                    ",
]
TCP6_LINES = [
    "   4: 0000000000000000FFFF00000100007F:A8A1 0000000000000000FFFF00000100007F:DDD8 01 00000011:00000000 "
    "01:00000014 00000000     0        0 133531 3 000000002005bf6d 20 4 25 14 -1",
    "   0: 00000000000000000000000001000000:943B 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000 65534        0 137361 1 00000000c6e9ff6b 100 0 0 10 0",
    "   5: 00000000000000000000000001000000:B215 00000000000000000000000001000000:C74A 06 00000000:00000000 "
    "03:0000167C 00000000     0        0 0 3 000000008ebff06f",
]
HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"


def at(address: str, port: int) -> Endpoint:
    return peers.parse_peer(f"ipv6:[{address}]:{port}" if ":" in address else f"ipv4:{address}:{port}") or (
        pytest.fail(f"unparsable {address}")
    )


@pytest.mark.skipif(sys.byteorder != "little", reason="the lines were captured on a little-endian host")
def test_tcp_lines() -> None:
    listen, time_wait, nobodys = (peers.parse_row(line, socket.AF_INET) for line in TCP_LINES)
    assert listen == SocketRow(at("127.0.0.1", 0x9AE5), at("0.0.0.0", 0), "0A", 0, 133486, socket.AF_INET)
    assert time_wait is not None and nobodys is not None
    assert (time_wait.local, time_wait.remote) == (at("127.0.0.1", 33424), at("127.0.0.1", 57359))
    assert (time_wait.state, time_wait.uid, time_wait.inode) == ("06", 0, 0)
    assert (nobodys.local, nobodys.uid, nobodys.inode) == (at("127.0.0.1", 60925), NOBODY, 137362)
    assert peers.parse_row(HEADER, socket.AF_INET) is None


@pytest.mark.skipif(sys.byteorder != "little", reason="the lines were captured on a little-endian host")
def test_tcp6_lines() -> None:
    mapped, nobodys, loopback = (peers.parse_row(line, socket.AF_INET6) for line in TCP6_LINES)
    # grpc listens and connects on IPv6 sockets even for IPv4: ::ffff:127.0.0.1 is 127.0.0.1
    assert mapped == SocketRow(
        at("127.0.0.1", 43169), at("127.0.0.1", 56792), "01", 0, 133531, socket.AF_INET6
    )
    assert nobodys is not None and (nobodys.local, nobodys.uid) == (at("::1", 37947), NOBODY)
    assert loopback is not None and (loopback.local, loopback.remote) == (
        at("::1", 0xB215),
        at("::1", 0xC74A),
    )


@pytest.mark.parametrize(
    ("peer", "endpoint"),
    [
        ("ipv4:127.0.0.1:54160", ("127.0.0.1", 54160)),
        ("ipv6:%5B::1%5D:58136", ("::1", 58136)),  # what grpc 1.85 writes
        ("ipv6:[::1]:58136", ("::1", 58136)),
        ("ipv6:[::ffff:127.0.0.1]:5000", ("127.0.0.1", 5000)),
        ("ipv6:[fe80::1%25eth0]:5000", ("fe80::1", 5000)),
        ("unix:/tmp/socket", None),
        ("ipv4:localhost:5000", None),
        ("ipv4:127.0.0.1", None),
    ],
)
def test_peer_strings(peer: str, endpoint: tuple[str, int] | None) -> None:
    parsed = peers.parse_peer(peer)
    assert (parsed and (str(parsed.address), parsed.port)) == endpoint


def test_the_live_tables_show_our_sockets_and_their_owner() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        client = socket_as(ME, "127.0.0.1", port)
        server, _ = listener.accept()
        with client, server:
            rows = peers.read_rows(client.getsockname()[1])
            theirs = [r for r in rows if r.local == at(*client.getsockname()[:2])]
            mine = [r for r in rows if r.remote == at(*client.getsockname()[:2])]
            assert [(r.inode, r.uid) for r in theirs] == [(os.fstat(client.fileno()).st_ino, ME)]
            assert [r.inode for r in mine] == [os.fstat(server.fileno()).st_ino]
            assert peers.socket_fds()[mine[0].inode] == server.fileno()


# ------------------------------------------------------------------ the verdict, from socket rows
WORKER_END, LOCAL_CALLER, REMOTE_CALLER = (
    at("127.0.0.1", 50051),
    at("127.0.0.1", 40000),
    at("192.0.2.7", 40000),
)


@pytest.mark.parametrize(
    ("caller", "theirs", "allowed_uids", "beyond_loopback", "allowed", "why"),
    [
        (LOCAL_CALLER, (ME, 7, "01"), (), False, True, ""),
        (LOCAL_CALLER, (NOBODY + 1, 7, "01"), (), False, False, f"runs as uid {NOBODY + 1}"),
        (LOCAL_CALLER, (NOBODY + 1, 7, "01"), (NOBODY + 1,), False, True, ""),
        # closed or orphaned: the uid column then says nothing about who made it
        (LOCAL_CALLER, (0, 0, "06"), (0,), False, False, "held by no process"),
        (LOCAL_CALLER, None, (), False, False, "cannot find the socket"),
        (LOCAL_CALLER, None, (), True, False, "cannot find the socket"),  # loopback is always this host
        (REMOTE_CALLER, None, (), False, False, "cannot find the socket"),
        (REMOTE_CALLER, None, (), True, True, ""),  # another host, and the operator bound beyond loopback
        (REMOTE_CALLER, (NOBODY + 1, 7, "01"), (), True, False, f"runs as uid {NOBODY + 1}"),  # this host
    ],
)
def test_judge(
    caller: Endpoint,
    theirs: tuple[int, int, str] | None,
    allowed_uids: tuple[int, ...],
    beyond_loopback: bool,
    allowed: bool,
    why: str,
) -> None:
    mine = SocketRow(WORKER_END, caller, "01", ME, 9, socket.AF_INET)
    rows = [mine]
    if theirs is not None:
        uid, inode, state = theirs
        rows.append(SocketRow(caller, WORKER_END, state, uid, inode, socket.AF_INET))
    verdict = PeerCheck(allowed_uids, beyond_loopback).judge("ipv4:x", caller, mine, rows)
    assert verdict.allowed is allowed
    assert why in verdict.reason
    if not allowed:
        assert peers.ALLOWED_PEER_UIDS_ENV in verdict.reason


def test_without_proc_every_call_is_refused() -> None:
    verdict = PeerCheck((), available=False).verdict("ipv4:127.0.0.1:40000")
    assert not verdict.allowed and "no /proc/net/tcp" in verdict.reason


def test_the_setting(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    for text, uids in [("", frozenset()), (" 65534, 1000 ", frozenset({65534, 1000})), ("7,any", None)]:
        monkeypatch.setenv(settings.ALLOWED_PEER_UIDS_ENV, text)
        assert settings.allowed_peer_uids_setting() == uids
    monkeypatch.setenv(settings.ALLOWED_PEER_UIDS_ENV, "bob,7")
    # On the settings logger itself: an earlier test may have configured its level or propagation.
    logger = logging.getLogger("compilation_bridge")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.WARNING, logger="compilation_bridge"):
            assert settings.allowed_peer_uids_setting() == frozenset({7})
    finally:
        logger.removeHandler(caplog.handler)
    assert "ignoring 'bob'" in caplog.text
    monkeypatch.setenv(settings.ALLOWED_PEER_UIDS_ENV, "any")
    assert peers.peer_interceptors("localhost") == []
    monkeypatch.setenv(settings.ALLOWED_PEER_UIDS_ENV, "")
    assert len(peers.peer_interceptors("localhost")) == 1


@pytest.mark.parametrize(
    ("host", "beyond"),
    [
        *[("localhost", False), ("127.0.0.1", False), ("::1", False), ("[::1]", False)],
        *[("0.0.0.0", True), ("::", True), ("10.1.2.3", True), ("worker.example", True)],
    ],
)
def test_what_binds_beyond_loopback(host: str, beyond: bool) -> None:
    assert peers.beyond_loopback(host) is beyond


def test_refusals_are_logged_within_a_budget(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    budget = peers.WarningBudget(per_minute=2, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="compilation_bridge.transport"):
        for n in range(5):
            budget.warn("refused %d", n)
        now[0] = 61.0
        budget.warn("refused %d", 5)
    assert [r.getMessage() for r in caplog.records] == [
        "refused 0",
        "refused 1",
        "refused 5 (and 3 more refused connections not logged)",
    ]


# ------------------------------------------------------------------ the cache, with real sockets
@pytest.mark.parametrize("address", LOOPBACKS)
def test_a_new_connection_from_the_same_port_is_checked_afresh(address: str) -> None:
    # This process plays the worker: the listener's accepted sockets are its own.
    check = PeerCheck(())
    with socket.create_server((address, 0), family=family_of(address)) as listener:
        port = listener.getsockname()[1]
        first = socket_as(ME, address, port)
        source_port = first.getsockname()[1]
        accepted, _ = listener.accept()
        peer = peer_string(first)
        assert check.verdict(peer).allowed
        cached = check.cached(peer)
        assert cached is not None and cached.fd == accepted.fileno() and cached.still_open()
        assert check.verdict(peer).allowed  # from the cache

        # The caller resets; grpc may not have closed the worker's end yet: no longer connected.
        reset(first)
        with pytest.raises(OSError):
            accepted.recv(1)
        assert not cached.still_open()

        # Another user (or, without root, another socket) binds the same port and connects again; the
        # worker's new end even gets the old descriptor's number, as a busy server's would.
        second = socket_as(NOBODY if ME == 0 else ME, address, port, source_port=source_port)
        assert peer_string(second) == peer
        again, _ = listener.accept()
        os.dup2(again.fileno(), accepted.fileno())
        again.close()
        assert not cached.still_open()  # same descriptor number, another socket
        verdict = check.verdict(peer)
        fresh = check.cached(peer)
        assert fresh is not None and fresh.link != cached.link and fresh.fd == accepted.fileno()
        if ME == 0:
            assert not verdict.allowed and f"runs as uid {NOBODY}, the worker as uid 0" in verdict.reason
        else:
            assert verdict.allowed
        second.close()
        accepted.close()


def test_the_cache_is_bounded() -> None:
    check = PeerCheck((), cache_size=2)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        callers = [socket_as(ME, "127.0.0.1", port) for _ in range(3)]
        accepted = [listener.accept()[0] for _ in callers]
        try:
            assert all(check.verdict(peer_string(c)).allowed for c in callers)
            assert len(check) == 2
            assert check.cached(peer_string(callers[0])) is None  # the least recently used went
        finally:
            for sock in callers + accepted:
                sock.close()


# ------------------------------------------------------------------ real workers
@pytest.mark.parametrize("address", LOOPBACKS)
def test_a_worker_answers_its_own_user(worker: WorkerProcess, address: str) -> None:
    host = f"[{address}]" if ":" in address else address
    with grpc.insecure_channel(f"{host}:{worker.port}") as channel:
        stub = pb_grpc.BridgeServiceStub(channel)
        assert stub.Ping(pb.PingRequest(message="x"), timeout=10).message == "Pong from Python: x"
        health = health_pb2_grpc.HealthStub(channel)
        assert (
            health.Check(health_pb2.HealthCheckRequest(), timeout=10).status
            == health_pb2.HealthCheckResponse.SERVING
        )
        watch = health.Watch(health_pb2.HealthCheckRequest(), timeout=10)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING  # answered from callbacks still
        watch.cancel()
        session = SnakeBridgeSession(stub, worker.session_id, session_id="peers")
        config = session.call_class("vllm.config", "CompilationConfig", mode=3)
        assert session.get_attr(config, "mode") == 3


@as_root
@pytest.mark.parametrize("address", LOOPBACKS)
def test_a_worker_refuses_another_user(worker: WorkerProcess, address: str) -> None:
    logged = worker.log_text().count(f"runs as uid {NOBODY}")
    relay = Relay(lambda: socket_as(NOBODY, address, worker.port))
    channel, stub = stub_through(relay)
    try:
        with pytest.raises(grpc.RpcError) as refused:
            stub.Ping(pb.PingRequest(message="x"), timeout=10)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        details = refused.value.details() or ""
        assert f"runs as uid {NOBODY}, the worker as uid {ME}" in details
        assert peers.ALLOWED_PEER_UIDS_ENV in details
        # every RPC: health, streams, tools
        health = health_pb2_grpc.HealthStub(channel)
        for call in (
            lambda: health.Check(health_pb2.HealthCheckRequest(), timeout=10),
            lambda: next(health.Watch(health_pb2.HealthCheckRequest(), timeout=10)),
            lambda: next(
                stub.ExecuteStreamingTool(pb.ExecuteToolRequest(tool_name="snakebridge.stream"), timeout=10)
            ),
            lambda: stub.ExecuteTool(pb.ExecuteToolRequest(tool_name="snakebridge.call"), timeout=10),
        ):
            with pytest.raises(grpc.RpcError) as again:
                call()
            assert again.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        channel.close()
        relay.close()
    # one warning for the connection, not one per call
    time.sleep(0.2)
    assert worker.log_text().count(f"runs as uid {NOBODY}") == logged + 1
    # and the worker's own user is still answered through the same kind of relay
    relay = Relay(lambda: socket_as(ME, address, worker.port))
    channel, stub = stub_through(relay)
    try:
        assert ping(stub) == grpc.StatusCode.OK
    finally:
        channel.close()
        relay.close()


@as_root
def test_the_operators_allowlist_lets_a_user_in() -> None:
    worker = spawn(uids=f"1234, {NOBODY}")
    relay = Relay(lambda: socket_as(NOBODY, "127.0.0.1", worker.port))
    channel, stub = stub_through(relay)
    try:
        assert ping(stub) == grpc.StatusCode.OK
    finally:
        channel.close()
        relay.close()
        assert worker.terminate()[0] == 0


@as_root
def test_a_reconnect_from_the_same_port_does_not_inherit_the_verdict(worker: WorkerProcess) -> None:
    source_port = socket_as(ME, "127.0.0.1", worker.port)
    port = source_port.getsockname()[1]
    reset(source_port)  # only to learn a free port

    relay = Relay(lambda: socket_as(ME, "127.0.0.1", worker.port, source_port=port))
    channel, stub = stub_through(relay)
    assert ping(stub) == grpc.StatusCode.OK  # the worker now holds a verdict for 127.0.0.1:<port>
    channel.close()
    relay.close()  # resets the connection

    relay = Relay(lambda: socket_as(NOBODY, "127.0.0.1", worker.port, source_port=port))
    channel, stub = stub_through(relay)
    try:
        assert ping(stub) == grpc.StatusCode.PERMISSION_DENIED
        assert relay.upstreams[0].getsockname()[1] == port
    finally:
        channel.close()
        relay.close()


@as_root
def test_a_worker_bound_beyond_loopback_still_checks_local_users() -> None:
    host = "::" if "::1" in _loopback_addresses() else "0.0.0.0"
    worker = spawn(extra_args=("--host", host))
    relay = Relay(lambda: socket_as(NOBODY, "127.0.0.1", worker.port))
    channel, stub = stub_through(relay)
    try:
        assert ping(stub) == grpc.StatusCode.PERMISSION_DENIED
        assert ping(worker.stub) == grpc.StatusCode.OK
    finally:
        channel.close()
        relay.close()
        assert worker.terminate()[0] == 0


def test_the_design_names_the_rule() -> None:
    design = (Path(__file__).resolve().parents[2] / "docs" / "design.md").read_text()
    assert "### Callers" in design and peers.ALLOWED_PEER_UIDS_ENV in design
