"""Suite-wide isolation: the config model's platform is process-global state.

Tests (and the differential twin) select `cpu` or `cuda` in-process; whatever a test selects is undone
afterwards, so no test depends on which ran before it.
"""

from collections.abc import Iterator

import pytest

from compilation_bridge.vllm_config import platforms


@pytest.fixture(autouse=True)
def _restore_platform() -> Iterator[None]:
    saved = platforms._selected
    yield
    platforms._selected = saved
