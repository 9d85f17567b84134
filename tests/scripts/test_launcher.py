"""scripts/snakepit-python finds the project through its own resolved path and refuses an interpreter
another user could have planted: one in a folder, or below a folder, that another user may write.

The planted folders are made world-writable (0777, no sticky bit) rather than owned by someone else, so
the refusal comes from the mode and the tests mean the same whether they run as root or not."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "scripts" / "snakepit-python"
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
PLANTED = "#!/bin/sh\necho planted\n"
WHO_RUNS = "import sys; print(sys.executable)"


def run(launcher: Path, python: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COMPILATION_BRIDGE_PYTHON"}
    if python is not None:
        env["COMPILATION_BRIDGE_PYTHON"] = python
    return subprocess.run(
        [str(launcher), "-c", WHO_RUNS], env=env, capture_output=True, text=True, timeout=60
    )


def folder(path: Path, mode: int) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)  # explicitly: mkdir's mode passes through the umask
    return path


def plant(where: Path) -> Path:
    fake = where / "python"
    fake.write_text(PLANTED)
    fake.chmod(0o755)
    return fake


def refused(done: subprocess.CompletedProcess[str], culprit: Path) -> bool:
    return (
        done.returncode != 0
        and "planted" not in done.stdout
        and f"{culprit} is writable by another user" in done.stderr
    )


@pytest.mark.skipif(not VENV_PYTHON.exists(), reason="no .venv in this checkout")
def test_a_symlink_to_the_launcher_runs_the_projects_interpreter(tmp_path: Path) -> None:
    # The attack: a symlink to the launcher in a folder another user writes, beside their own .venv.
    shared = folder(tmp_path / "shared", 0o777)
    folder(shared / "scripts", 0o777)
    (shared / "scripts" / "snakepit-python").symlink_to(LAUNCHER)
    plant(folder(shared / ".venv" / "bin", 0o777))
    done = run(shared / "scripts" / "snakepit-python")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(VENV_PYTHON)


def test_an_interpreter_in_a_world_writable_folder_is_refused(tmp_path: Path) -> None:
    shared = folder(tmp_path / "shared", 0o777)
    done = run(LAUNCHER, str(plant(shared)))
    assert refused(done, shared), (done.returncode, done.stdout, done.stderr)
    assert done.returncode == 126


def test_a_link_into_a_world_writable_folder_is_refused(tmp_path: Path) -> None:
    # The link itself lies in a private folder; what it points at does not.
    shared = folder(tmp_path / "shared", 0o777)
    mine = folder(tmp_path / "mine", 0o700)
    (mine / "python").symlink_to(plant(shared))
    done = run(LAUNCHER, str(mine / "python"))
    assert refused(done, shared), (done.returncode, done.stdout, done.stderr)


def test_a_folder_above_the_interpreter_counts(tmp_path: Path) -> None:
    shared = folder(tmp_path / "shared", 0o777)
    below = folder(shared / "private", 0o700)  # private itself, but its parent's users may rename it
    done = run(LAUNCHER, str(plant(below)))
    assert refused(done, shared), (done.returncode, done.stdout, done.stderr)


def layout(root: Path, bin_mode: int, interpreter: Path) -> Path:
    """A copy of the project's layout: the launcher copied (so it finds this root), the package linked,
    and `.venv/bin/python` a link to `interpreter` in a `.venv/bin` of the given mode."""
    folder(root / "scripts", 0o755)
    shutil.copy(LAUNCHER, root / "scripts" / "snakepit-python")
    (root / "python").symlink_to(REPO / "python")
    (folder(root / ".venv" / "bin", bin_mode) / "python").symlink_to(interpreter)
    return root / "scripts" / "snakepit-python"


def test_a_layout_whose_venv_links_to_a_planted_interpreter_is_refused(tmp_path: Path) -> None:
    shared = folder(tmp_path / "shared", 0o777)
    launcher = layout(folder(tmp_path / "copy", 0o755), 0o755, plant(shared))
    done = run(launcher)
    assert refused(done, shared), (done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize(("mode", "runs"), [(0o755, True), (0o1777, True), (0o777, False), (0o775, False)])
def test_the_venv_folders_mode_decides(tmp_path: Path, mode: int, runs: bool) -> None:
    # The same layout, linking to the real interpreter: only the mode of .venv/bin differs. Sticky
    # folders pass, as /tmp does: there no other user can rename or delete what is ours.
    root = folder(tmp_path / "copy", 0o755)
    done = run(layout(root, mode, Path(sys.executable)))
    if runs:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == str(root / ".venv" / "bin" / "python")
    else:
        assert refused(done, root / ".venv" / "bin"), (done.returncode, done.stdout, done.stderr)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    theirs = folder(tmp_path / "theirs", 0o755)
    fake = plant(theirs)
    os.chown(theirs, 65534, 65534)
    done = run(LAUNCHER, str(fake))
    assert refused(done, theirs), (done.returncode, done.stdout, done.stderr)
    assert "owner uid 65534" in done.stderr
