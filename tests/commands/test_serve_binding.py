"""`serve` (and Snakepit's launch script) hold their port on every loopback address or refuse to start,
naming the address, port 0 included; `--port` must be a port number."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator

import grpc
import pytest

from compilation_bridge.transport import server as server_module
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.options import ServeOptions, parse
from compilation_bridge.transport.server import BIND_ATTEMPTS, build_server


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "compilation_bridge", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def ipv4_listener() -> Iterator[int]:
    """Someone else's IPv4-only listener on 127.0.0.1; yields its port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


def test_serve_refuses_a_port_taken_on_ipv4_only(ipv4_listener: int) -> None:
    """grpc alone would serve on ::1 and say "serving on localhost:N" while 127.0.0.1:N is another's."""
    done = run_cli("serve", "--port", str(ipv4_listener), timeout=30)
    assert done.returncode == 1
    assert f"cannot start: cannot listen on 127.0.0.1:{ipv4_listener}: Address already in use" in done.stderr
    assert "serving on" not in done.stderr


@pytest.mark.skipif(not has_ipv6_loopback(), reason="this host has no IPv6 loopback")
def test_serve_refuses_a_port_taken_on_ipv6_only() -> None:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as other:
        other.bind(("::1", 0))
        other.listen()
        port = other.getsockname()[1]
        done = run_cli("serve", "--port", str(port), timeout=30)
    assert done.returncode == 1
    assert f"cannot listen on [::1]:{port}: Address already in use" in done.stderr


def test_the_launch_script_path_refuses_it_too(ipv4_listener: int) -> None:
    """python/grpc_server.py (Snakepit's launch) shares the binding: an explicit port from Snakepit's
    base_port + counter that another process holds on IPv4 is an error, not a half-bound worker."""
    options = parse(["--adapter", "x", "--port", str(ipv4_listener)], env={})
    with pytest.raises(OSError, match=rf"^cannot listen on 127\.0\.0\.1:{ipv4_listener}: "):
        build_server(options)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("explicit", [False, True], ids=["port 0", "explicit port"])
def test_a_free_port_is_served_on_every_loopback_address(explicit: bool) -> None:
    running = build_server(ServeOptions(port=_free_port() if explicit else 0))
    try:
        addresses = [("127.0.0.1", socket.AF_INET)] + (
            [("::1", socket.AF_INET6)] if has_ipv6_loopback() else []
        )
        for address, family in addresses:
            with socket.socket(family, socket.SOCK_STREAM) as client:
                client.settimeout(5)
                client.connect((address, running.port))
    finally:
        running.stop()


class Squatter:
    """Wraps server._add_port: once the worker's first loopback address has its port, another process's
    listener (SO_REUSEPORT, as grpc's default) takes that port on ::1, for the first `times` servers."""

    def __init__(self, add_port: Callable[[grpc.Server, str, int], int], times: int) -> None:
        self._add_port = add_port
        self._times = times
        self.taken: list[int] = []
        self.listeners: list[socket.socket] = []

    def __call__(self, server: grpc.Server, host: str, port: int) -> int:
        bound = self._add_port(server, host, port)
        if host == "127.0.0.1" and port == 0 and len(self.taken) < self._times:
            other = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            other.bind(("::1", bound))
            other.listen()
            self.listeners.append(other)
            self.taken.append(bound)
        return bound

    def close(self) -> None:
        for listener in self.listeners:
            listener.close()


@pytest.fixture
def squatter(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], Squatter]]:
    made: list[Squatter] = []

    def make(times: int) -> Squatter:
        made.append(Squatter(server_module._add_port, times))
        monkeypatch.setattr(server_module, "_add_port", made[-1])
        return made[-1]

    yield make
    for one in made:
        one.close()


@pytest.mark.skipif(not has_ipv6_loopback(), reason="this host has no IPv6 loopback")
def test_port_0_taken_on_ipv6_by_another_is_picked_again(squatter: Callable[[int], Squatter]) -> None:
    """The kernel's pick for 127.0.0.1 may be another process's port on ::1: grpc alone served ::1 and
    127.0.0.1 clients reached that process (a Snakepit caller gets another server's answers)."""
    taken = squatter(2)
    running = build_server(ServeOptions(port=0))
    try:
        assert len(taken.taken) == 2 and running.port not in taken.taken
        for address in ("127.0.0.1", "[::1]"):
            with grpc.insecure_channel(f"{address}:{running.port}") as channel:
                reply = pb_grpc.BridgeServiceStub(channel).Ping(pb.PingRequest(message="x"), timeout=10)
                assert reply.message == "Pong from Python: x"
    finally:
        running.stop()


@pytest.mark.skipif(not has_ipv6_loopback(), reason="this host has no IPv6 loopback")
def test_port_0_taken_every_time_is_an_error(squatter: Callable[[int], Squatter]) -> None:
    taken = squatter(BIND_ATTEMPTS)
    with pytest.raises(OSError, match=r"^cannot listen on \[::1\]:\d+: Address already in use"):
        build_server(ServeOptions(port=0))
    assert len(taken.taken) == BIND_ATTEMPTS
