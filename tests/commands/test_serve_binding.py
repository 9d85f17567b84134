"""`serve` (and Snakepit's launch script) hold their port on every loopback address or refuse to start,
naming the address; `--port` must be a port number."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from compilation_bridge.transport.options import ServeOptions, parse
from compilation_bridge.transport.server import build_server


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
