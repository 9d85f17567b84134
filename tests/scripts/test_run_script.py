"""scripts/run.sh ends by saying how to reach the `compilation-bridge` command (it is in .venv only),
and the commands it prints work as printed. The demo runs for real, through this checkout's .venv; the
set-up step is a stand-in (the venv exists already)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """run.sh beside a set-up script that does nothing and a .venv/bin/python that is this interpreter."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "run.sh", tmp_path / "scripts")
    (tmp_path / "scripts" / "setup_venv.sh").write_text("exit 0\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    (bin_dir / "python").chmod(0o755)
    return tmp_path


def test_it_ends_with_what_to_try_next(checkout: Path) -> None:
    done = subprocess.run(
        ["bash", str(checkout / "scripts" / "run.sh")], capture_output=True, text=True, timeout=150
    )
    assert done.returncode == 0, done.stderr
    assert "worker stopped with SIGTERM: exit status 0" in done.stdout
    tail = done.stdout.split("worker stopped with SIGTERM", 1)[1]
    assert "\nnext: the `compilation-bridge` command is in .venv." in tail
    assert "\n  . .venv/bin/activate\n" in tail


def test_the_commands_it_prints_work_as_printed() -> None:
    """Each `.venv/bin/compilation-bridge ...` line of the script, run as printed in this checkout."""
    script = (REPO / "scripts" / "run.sh").read_text()
    printed = [
        line.strip() for line in script.splitlines() if line.startswith("  .venv/bin/compilation-bridge")
    ]
    assert len(printed) == 3
    assert (REPO / ".venv" / "bin" / "compilation-bridge").exists()
    for line in printed:
        done = subprocess.run(shlex.split(line), cwd=REPO, capture_output=True, text=True, timeout=150)
        assert done.returncode == 0, (line, done.stderr[-2000:])
        assert done.stdout
