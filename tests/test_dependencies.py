"""torch initialises NumPy support at import and warns when numpy is missing; numpy is a dependency."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
WARNING = "Failed to initialize NumPy"


def test_numpy_is_a_dependency() -> None:
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "numpy" in {Requirement(d).name for d in dependencies}


@pytest.mark.skipif(
    importlib.util.find_spec("numpy") is None,
    reason="numpy is declared in pyproject.toml but this environment predates it: pip install -e .",
)
def test_importing_torch_prints_no_numpy_warning() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import torch; torch.ones(1)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert WARNING not in done.stderr


def test_transformers_is_the_oracles_release() -> None:
    """vLLM's ModelConfig hash is transformers' JSON of its config, which names the release."""
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {r.name: r.specifier for r in map(Requirement, dependencies)}
    oracle = (REPO / "tests" / "oracle" / "requirements.txt").read_text().splitlines()
    assert f"transformers{pins['transformers']}" in oracle
