"""Ctrl-C during `compilation-bridge compile`: one line, `interrupted`, exit status 130, no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_ctrl_c_while_a_piece_compiles(tmp_path: Path) -> None:
    # A cold Inductor cache, so that the interrupt lands in a real compile (C++ compiler subprocesses).
    env = dict(
        os.environ,
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
        COMPILATION_BRIDGE_ALLOWED_ROOTS=str(tmp_path),
    )
    config = json.dumps({"mode": 3, "cache_dir": str(tmp_path / "cache"), "compile_sizes": [12]})
    command = [sys.executable, "-m", "compilation_bridge", "compile", "--config", config, "--tokens", "12"]
    # Its own session, so that the signal goes to its process group as a terminal's Ctrl-C does.
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    ) as process:
        assert process.stderr is not None and process.stdout is not None
        before = []
        for line in process.stderr:
            before.append(line)
            if "piece 1/" in line:
                os.killpg(process.pid, signal.SIGINT)
                break
        after = process.stderr.read()
        out = process.stdout.read()
        status = process.wait(timeout=60)
    assert any("piece 1/" in line for line in before), "".join(before)
    assert status == 130
    assert after == "interrupted\n"
    assert out == ""
