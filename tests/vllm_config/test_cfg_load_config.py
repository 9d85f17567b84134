"""vLLM 0.14.0's tests/test_config.py, ported: the LoadConfig test (`test_load_config_pt_load_map_location`),
which needs no model, GPU or engine. Same test name and cases."""

from __future__ import annotations

from typing import Any

import pytest

from compilation_bridge.vllm_config import LoadConfig, VllmConfig


@pytest.mark.parametrize("pt_load_map_location", ["cuda", {"": "cuda"}])
def test_load_config_pt_load_map_location(pt_load_map_location: Any) -> None:
    load_config = LoadConfig(pt_load_map_location=pt_load_map_location)
    config = VllmConfig(load_config=load_config)

    assert config.load_config.pt_load_map_location == pt_load_map_location
