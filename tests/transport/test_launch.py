"""Start-up as a person sees it: a host beyond loopback is warned about, and a ready file that cannot
be written is one error line and exit status 1, never a traceback; one nobody read is gone at exit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compilation_bridge.transport.options import beyond_loopback
from compilation_bridge.transport.readyfile import withdraw_ready_file

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "COMPILATION_BRIDGE_REF_STORE": "off",
        **extra,
    }


def _serve_until_ready(tmp_path: Path, host: str) -> str:
    """stderr of `compilation-bridge serve --host HOST` up to its "serving on" line, then SIGTERM."""
    process = subprocess.Popen(
        [sys.executable, "-m", "compilation_bridge", "serve", "--port", "0", "--host", host],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=_env(tmp_path),
    )
    assert process.stderr is not None
    lines = []
    try:
        for line in process.stderr:
            lines.append(line)
            if " serving on " in line:
                break
    finally:
        process.terminate()
        process.wait(30)
    return "".join(lines)


@pytest.mark.parametrize(
    ("host", "beyond"),
    [
        ("localhost", False),
        ("127.0.0.1", False),
        ("127.0.0.2", False),
        ("::1", False),
        ("[::1]", False),
        ("0.0.0.0", True),
        ("::", True),
        ("192.168.1.20", True),
        ("build-host.example", True),  # a name may resolve anywhere
    ],
)
def test_beyond_loopback(host: str, beyond: bool) -> None:
    assert beyond_loopback(host) is beyond


def test_serving_on_every_interface_is_warned_about(tmp_path: Path) -> None:
    err = _serve_until_ready(tmp_path, "0.0.0.0")
    assert "WARNING - [corr=-] binding 0.0.0.0: the worker then listens beyond loopback" in err
    assert " serving on 0.0.0.0:" in err


def test_serving_on_loopback_is_not(tmp_path: Path) -> None:
    err = _serve_until_ready(tmp_path, "127.0.0.1")
    assert " serving on 127.0.0.1:" in err
    assert "beyond loopback" not in err


def test_a_ready_file_in_a_missing_folder_is_one_error_line(tmp_path: Path) -> None:
    """Snakepit's own way (SNAKEPIT_READY_FILE), which no flag check sees."""
    ready = tmp_path / "missing" / "ready"
    done = subprocess.run(
        [sys.executable, str(REPO / "python" / "grpc_server.py"), "--snakepit-run-id", "r1", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(tmp_path, SNAKEPIT_READY_FILE=str(ready)),
    )
    assert done.returncode == 1, done.stderr
    assert f"ERROR - [corr=-] cannot start: cannot write the ready file {ready}: " in done.stderr
    assert "Traceback" not in done.stderr


def test_a_ready_file_nobody_read_is_withdrawn_at_exit(tmp_path: Path) -> None:
    """Snakepit deletes the ready file once read and names it predictably in the shared temporary
    folder: one left behind (its reader stopped before reading) would give a later worker of that name
    this worker's port. A file Snakepit replaced or removed is left alone."""
    ready = tmp_path / "ready"
    process = subprocess.Popen(
        [sys.executable, str(REPO / "python" / "grpc_server.py"), "--snakepit-run-id", "r1", "--port", "0"],
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env=_env(tmp_path, SNAKEPIT_READY_FILE=str(ready)),
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert ready.read_text().isdigit()
    finally:
        process.terminate()
        assert process.wait(30) == 0
    assert not ready.exists()


def test_a_ready_file_that_holds_another_port_is_left(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    ready.write_text("5")
    withdraw_ready_file(str(ready), 6)
    assert ready.read_text() == "5"
    withdraw_ready_file(str(ready), 5)
    assert not ready.exists()
    withdraw_ready_file(str(ready), 5)  # already gone: nothing to do
