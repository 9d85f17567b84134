"""scripts/realclient_test.sh takes the offline client kit from one place only: $REALCLIENT_KIT, else
`shared/realclient` beside the checkout. A kit-shaped folder anywhere else next to the checkout is never
run (the script used to run the first `../*/realclient/setup.sh` a glob found). Run for real in a
stand-in layout: `mix` and the kits' `setup.sh` are stand-ins that record that they ran."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KIT = """#!/bin/sh
echo "{name} $1" >> "{log}"
echo 'export REALCLIENT_DEPS={name}'
"""
MIX = """#!/bin/sh
echo "mix $* (deps: ${{REALCLIENT_DEPS:-none}})" >> "{log}"
"""


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """tmp/clone (the script, an empty integration/snakepit), tmp/bin/mix, and a decoy kit in tmp/decoy."""
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    (clone / "integration" / "snakepit").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "realclient_test.sh", clone / "scripts")
    _executable(tmp_path / "bin" / "mix", MIX.format(log=tmp_path / "ran.log"))
    _kit(tmp_path, tmp_path / "decoy" / "realclient", "decoy")
    return tmp_path


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _kit(layout: Path, folder: Path, name: str) -> None:
    _executable(folder / "setup.sh", KIT.format(name=name, log=layout / "ran.log"))


def _run(layout: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    environment = {k: v for k, v in os.environ.items() if k != "REALCLIENT_KIT"}
    environment.update(PATH=f"{layout / 'bin'}{os.pathsep}{os.environ['PATH']}", **env)
    done = subprocess.run(
        ["bash", str(layout / "clone" / "scripts" / "realclient_test.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
    )
    log = layout / "ran.log"
    return done, log.read_text().splitlines() if log.exists() else []


def test_the_kit_beside_the_checkout_is_used_and_no_other(layout: Path) -> None:
    _kit(layout, layout / "shared" / "realclient", "shared")
    done, ran = _run(layout)
    assert done.returncode == 0, done.stderr
    assert ran[0] == f"shared {layout / 'clone' / '.realclient'}"
    assert not any(line.startswith("decoy") for line in ran)
    assert ran[-1] == "mix test (deps: shared)"
    assert "offline kit in ../shared/realclient" in done.stderr


def test_without_it_the_packages_come_from_hex(layout: Path) -> None:
    done, ran = _run(layout)
    assert done.returncode == 0, done.stderr
    assert ran[0] == "mix local.hex --force --if-missing (deps: none)"
    assert not any(line.startswith("decoy") for line in ran)
    assert "no offline kit in ../shared/realclient; fetching vllm 0.3.0" in done.stderr


def test_realclient_kit_names_it(layout: Path) -> None:
    _kit(layout, layout / "shared" / "realclient", "shared")
    _kit(layout, layout / "elsewhere", "chosen")
    done, ran = _run(layout, REALCLIENT_KIT=str(layout / "elsewhere"))
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in ran if not line.startswith("mix")] == ["chosen"]


def test_a_realclient_kit_without_setup_is_refused(layout: Path) -> None:
    (layout / "empty").mkdir()
    done, ran = _run(layout, REALCLIENT_KIT=str(layout / "empty"))
    assert done.returncode == 2
    assert f"REALCLIENT_KIT={layout / 'empty'} holds no setup.sh" in done.stderr
    assert ran == []  # neither a kit nor hex
