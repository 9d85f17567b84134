"""Each config test picks its platform; the previous selection is restored afterwards."""

from collections.abc import Iterator

import pytest

from compilation_bridge.vllm_config import platforms


@pytest.fixture
def on_platform() -> Iterator[object]:
    saved = platforms._selected

    def select(name: str) -> platforms.Platform:
        return platforms.set_platform(name)

    yield select
    platforms._selected = saved


@pytest.fixture
def cpu(on_platform) -> None:
    on_platform("cpu")


@pytest.fixture
def cuda(on_platform) -> None:
    on_platform("cuda")
