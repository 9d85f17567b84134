"""The compile plan of a bare CompilationConfig: what vLLM's own methods make of it, on scratch copies."""

from __future__ import annotations

import copy

from compilation_bridge.compile.plan import make_plan
from compilation_bridge.vllm_config import CompilationConfig


def test_compile_sizes_and_padding_come_from_the_configs_own_post_init() -> None:
    cc = CompilationConfig(
        mode=3, cudagraph_capture_sizes=[8, 1, 4, 2], compile_sizes=["cudagraph_capture_sizes", 16]
    )
    before = copy.deepcopy(cc)
    plan = make_plan(cc, max_num_tokens=64)
    # What post_init_cudagraph_sizes gives on a config whose capture sizes are set and sorted.
    reference = CompilationConfig(
        mode=3,
        cudagraph_capture_sizes=[1, 2, 4, 8],
        max_cudagraph_capture_size=8,
        compile_sizes=["cudagraph_capture_sizes", 16],
    )
    reference.post_init_cudagraph_sizes()
    assert plan.compile_sizes == reference.compile_sizes
    assert plan.cudagraph_padding == reference.bs_to_padded_graph_size == [0, 1, 2, 4, 4, 8, 8, 8, 8]
    assert cc == before and cc.bs_to_padded_graph_size is None  # the caller's config is not written


def test_no_capture_sizes_pad_nothing() -> None:
    plan = make_plan(CompilationConfig(mode=3, compile_sizes=[4]), max_num_tokens=8)
    assert plan.compile_sizes == [4]
    assert plan.cudagraph_padding == [0]
