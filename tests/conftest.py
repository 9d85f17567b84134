"""Suite-wide isolation: the config model's platform and the operator settings are process-global.

Tests (and the differential twin) select `cpu` or `cuda` in-process or change the operator's
environment; whatever a test changes is undone afterwards, so no test depends on which ran before it.
"""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from compilation_bridge.settings import ALLOWED_ROOTS_ENV, reload_settings
from compilation_bridge.vllm_config import platforms

# The worker fixtures (a dispatcher, a spawned worker, a SnakeBridge session) serve tests of several
# packages: protocol, surface, transport, refs.
pytest_plugins = ["tests.workers"]


@pytest.fixture(autouse=True)
def _restore_platform() -> Iterator[None]:
    saved = platforms._selected
    yield
    platforms._selected = saved


@pytest.fixture(autouse=True)
def _reread_settings() -> Iterator[None]:
    """Operator settings are cached; a test that changed the environment leaves them as they were."""
    yield
    reload_settings()  # runs after monkeypatch has put the environment back


def _test_inductor_cache(base: Path) -> Path:
    """Inductor's cache for tests: kept across sessions in pytest's private per-user folder (warm
    compiles), else a fresh one under this session's folder."""
    parent = base.parent if base.parent.name.startswith("pytest-of-") else base
    folder = parent / "torchinductor"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


@pytest.fixture(autouse=True)
def _private_roots(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared temporary directory is no default root (anyone can plant files there): tests write
    under pytest's session folder, private to the user (0700), which the environment names as a root."""
    base = tmp_path_factory.getbasetemp()
    inductor = _test_inductor_cache(base)
    monkeypatch.setenv(ALLOWED_ROOTS_ENV, os.pathsep.join([str(base), str(inductor)]))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor))
    reload_settings()
