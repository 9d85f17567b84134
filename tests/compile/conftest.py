"""Shared fixtures: every compile test writes its cache under its own temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compilation_bridge.settings import reload_settings


@pytest.fixture
def cache_dir(tmp_path: Path) -> str:
    return str(tmp_path / "cache")


@pytest.fixture
def allowed_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Only `tmp_path/allowed` (and Inductor's own cache, wherever it is) may be written."""
    import os

    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    root = tmp_path / "allowed"
    root.mkdir()
    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default_cache_dir()
    monkeypatch.setenv("COMPILATION_BRIDGE_ALLOWED_ROOTS", os.pathsep.join([str(root), inductor]))
    reload_settings()
    yield root
    monkeypatch.undo()
    reload_settings()
