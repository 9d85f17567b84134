"""CUDA graphs for real: runs only where CUDA exists (never in this project's CPU CI).

On CPU these tests are skipped, and the CPU tests check that nothing is captured or pretended.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from compilation_bridge.compile import compile_model
from compilation_bridge.vllm_config import CompilationConfig
from compilation_bridge.vllm_config.platforms import current_platform, set_platform

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.fixture
def cuda_platform() -> Iterator[None]:
    previous = current_platform.name
    set_platform("cuda")
    yield
    set_platform(previous)


@pytest.mark.slow
@pytest.mark.parametrize(("cudagraph_mode", "splitting_ops"), [("PIECEWISE", None), ("FULL", [])])
def test_cudagraphs_capture_and_replay(
    cudagraph_mode: str, splitting_ops: list[str] | None, cache_dir: str, cuda_platform: None
) -> None:
    config = CompilationConfig(
        mode=3,
        backend="inductor",
        cache_dir=cache_dir,
        cudagraph_mode=cudagraph_mode,
        cudagraph_capture_sizes=[1, 2, 4, 8],
        splitting_ops=splitting_ops,
    )
    model = compile_model(config, model="toy-llama", max_num_tokens=64)
    for n in (3, 3, 8, 20):
        result = model.run(n)
        assert result["max_abs_diff_vs_eager"] < 1e-3
    report = model.report()
    assert report["device"] == "cuda" and report["cudagraphs_active"] is True
    per_size = 3 if cudagraph_mode == "PIECEWISE" else 1  # 3 compiled pieces, or the whole model
    assert report["counters"]["num_cudagraph_captured"] == 2 * per_size  # sizes 4 (for 3) and 8
    assert model.run(20)["cudagraph_runtime_mode"] == "NONE"  # above the largest capture size
