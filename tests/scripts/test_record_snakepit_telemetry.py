"""scripts/record_snakepit_telemetry.py, as far as it runs without Snakepit's sources (which the repository
does not hold): it explains itself and refuses a folder that is not Snakepit's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "record_snakepit_telemetry.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_it_says_what_it_needs() -> None:
    result = run("--help")
    assert result.returncode == 0
    assert "Snakepit" in result.stdout and "--out" in result.stdout


def test_a_folder_without_snakepit_is_refused(tmp_path: Path) -> None:
    result = run(str(tmp_path), "--out", str(tmp_path / "recording.json"))
    assert result.returncode == 2
    assert "has no priv/python/grpc_server.py" in result.stderr
    assert not (tmp_path / "recording.json").exists()
