"""scripts/setup_venv.sh, run for real against stand-in interpreters: it takes torch's CPU build from
PyTorch's CPU index when that answers, says so when it falls back, names the build it got, and prints one
`setup:` line per step. The stand-in `.venv/bin/pip` records its arguments instead of installing."""

from __future__ import annotations

import functools
import http.server
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/bin/sh
# torch's build is whatever the test says; everything else is the real interpreter
case "$*" in *"import torch"*) echo "$FAKE_TORCH_BUILD"; exit 0 ;; esac
exec {python} "$@"
"""
FAKE_PIP = """#!/bin/sh
echo "$*" >> "{log}"
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout holding only the script, with a .venv whose python and pip are stand-ins."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "setup_venv.sh", tmp_path / "scripts")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in {
        "python": FAKE_PYTHON.format(python=sys.executable),
        "pip": FAKE_PIP.format(log=tmp_path / "pip.log"),
    }.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return tmp_path


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # the test's output is the script's, not the server's


@pytest.fixture
def cpu_index(tmp_path: Path) -> Iterator[str]:
    """A reachable stand-in for https://download.pytorch.org/whl/cpu."""
    root = tmp_path / "index"
    (root / "whl" / "cpu").mkdir(parents=True)
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def setup(checkout: Path, index: str, build: str = "2.13.0+cpu CPU") -> tuple[list[str], list[str]]:
    """Runs the script; returns its stderr lines and the pip calls it made."""
    done = subprocess.run(
        ["bash", "scripts/setup_venv.sh", "test"],
        cwd=checkout,
        env={"PATH": "/usr/bin:/bin", "TORCH_CPU_INDEX": index, "FAKE_TORCH_BUILD": build},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines(), (checkout / "pip.log").read_text().splitlines()


def test_the_cpu_build_comes_from_pytorchs_cpu_index_when_it_answers(checkout: Path, cpu_index: str) -> None:
    lines, pip_calls = setup(checkout, cpu_index)
    assert pip_calls == [
        f"install -q --extra-index-url {cpu_index} torch==2.13.0",
        "install -q -e .[test]",
    ]
    assert lines == [
        f"setup: installing torch 2.13.0, CPU build, from {cpu_index}",
        "setup: installing compilation-bridge[test] and its dependencies",
        "setup: ready: torch 2.13.0+cpu CPU build",
    ]


def test_an_unreachable_index_falls_back_to_pips_sources_and_says_so(checkout: Path) -> None:
    index = f"http://127.0.0.1:{closed_port()}/whl/cpu"
    lines, pip_calls = setup(checkout, index)
    assert pip_calls[0] == "install -q torch==2.13.0"
    assert lines[0] == (
        f"setup: installing torch 2.13.0 from pip's configured sources ({index} is not reachable)"
    )


def test_a_cuda_build_is_named_as_such(checkout: Path) -> None:
    lines, _ = setup(checkout, f"http://127.0.0.1:{closed_port()}/whl/cpu", build="2.13.0 CUDA")
    assert lines[-1] == (
        "setup: ready, but with torch 2.13.0 CUDA build: "
        "no CPU build was available, so pip took the default one"
    )
