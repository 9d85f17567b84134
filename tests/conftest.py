"""Suite-wide isolation: the config model's platform and the operator settings are process-global.

Tests (and the differential twin) select `cpu` or `cuda` in-process or change the operator's
environment; whatever a test changes is undone afterwards, so no test depends on which ran before it.
"""

from collections.abc import Iterator

import pytest

from compilation_bridge.settings import reload_settings
from compilation_bridge.vllm_config import platforms


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
