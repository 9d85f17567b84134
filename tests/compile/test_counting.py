"""vLLM's counting tests (tests/compile/fullgraph: test_simple, test_toy_llama) on CPU with this project's
own custom ops, eager adaptor."""

from __future__ import annotations

import pytest
import torch

from compilation_bridge.compile import compilation_counter, compile_model, ops
from compilation_bridge.vllm_config import CompilationConfig


def test_simple_piecewise_compile(cache_dir: str) -> None:
    # fullgraph/test_simple.py: two attention calls -> 5 pieces, 3 compiled, one range -> 3 compilations
    config = CompilationConfig(
        mode=3,
        backend="eager",
        cache_dir=cache_dir,
        splitting_ops=["silly::attention"],
        use_inductor_graph_partition=False,
        cudagraph_copy_inputs=True,
        cudagraph_capture_sizes=[1, 2],
        cudagraph_mode="PIECEWISE",
    )
    with compilation_counter.expect(
        num_graphs_seen=1,
        num_piecewise_graphs_seen=5,
        num_piecewise_capturable_graphs_seen=3,
        num_backend_compilations=3,
        num_cudagraph_captured=0,  # CPU: resolved and reported, never faked
    ):
        model = compile_model(config, model="simple-piecewise", max_num_tokens=2)
        calls = ops.silly_attention_calls
        out = model.forward(torch.zeros(2, 1))
        assert ops.silly_attention_calls - calls == 2
    assert out.flatten().tolist() == [19.0, 19.0]
    report = model.report()
    assert (report["num_pieces"], report["num_compiled_pieces"]) == (5, 3)
    assert report["cudagraph_mode"] == "PIECEWISE" and report["cudagraphs_active"] is False
    assert "CUDA" in report["cudagraphs_reason"]


def test_compile_ranges_and_sizes(cache_dir: str) -> None:
    # test_compile_ranges.py: default splitting ops do not match silly::attention -> 1 piece;
    # ranges (1,8), (9,32), (33,8192) plus sizes 16 and 64 -> 5 compilations (128 never arrives)
    config = CompilationConfig(
        mode=3,
        backend="eager",
        cache_dir=cache_dir,
        compile_ranges_split_points=[8, 32],
        compile_sizes=[16, 64, 128],
    )
    with compilation_counter.expect(
        num_graphs_seen=1, num_piecewise_graphs_seen=1, num_backend_compilations=0
    ):
        model = compile_model(config, model="single-attention", max_num_tokens=8192)
    with compilation_counter.expect(num_backend_compilations=5, num_eager_compiles=5):
        for n in [1, 4, 16, 24, 48, 64, 8192]:
            result = model.run(n)
            assert result["max_abs_diff_vs_eager"] == 0.0
    report = model.report()
    assert report["compile_ranges"] == [[1, 8], [9, 32], [33, 8192]]
    assert {tuple(r) for r in report["compiled_ranges"]} == {(1, 8), (16, 16), (9, 32), (64, 64), (33, 8192)}
    assert model.forward(torch.ones(64, 4)).eq(18).all()


def test_toy_llama_pieces_follow_the_layers(cache_dir: str) -> None:
    config = CompilationConfig(mode=3, backend="eager", cache_dir=cache_dir)
    model = compile_model(config, model="toy-llama", max_num_tokens=16, num_layers=3, hidden_size=32)
    report = model.report()
    assert (report["num_pieces"], report["num_compiled_pieces"]) == (7, 4)
    assert report["num_backend_compilations"] == 0  # lazy: compile_model compiles nothing
    model.run(3)
    assert model.report()["num_backend_compilations"] == 4


def test_no_splitting_ops_gives_one_piece(cache_dir: str) -> None:
    config = CompilationConfig(mode=3, backend="eager", cache_dir=cache_dir, splitting_ops=[])
    model = compile_model(config, model="toy-llama", max_num_tokens=16, num_layers=2, hidden_size=32)
    assert (model.report()["num_pieces"], model.report()["num_compiled_pieces"]) == (1, 1)


def test_token_count_outside_every_range_fails_with_vllms_assertion(cache_dir: str) -> None:
    config = CompilationConfig(mode=3, backend="eager", cache_dir=cache_dir, compile_ranges_split_points=[8])
    model = compile_model(config, model="single-attention", max_num_tokens=32)
    expected = r"^Shape: 33 out of considered ranges: \[\(1, 8\), \(9, 32\)\]$"
    with pytest.raises(AssertionError, match=expected):
        model.run(33)
    assert model.run(32)["max_abs_diff_vs_eager"] == 0.0  # and the model keeps working


def test_inductor_graph_partition_leaves_one_piece(cache_dir: str) -> None:
    # test_simple_inductor_graph_partition: no FX split; Inductor would partition at the splitting ops
    config = CompilationConfig(
        mode=3,
        backend="eager",
        cache_dir=cache_dir,
        splitting_ops=["silly::attention"],
        use_inductor_graph_partition=True,
    )
    with compilation_counter.expect(
        num_graphs_seen=1,
        num_piecewise_graphs_seen=1,
        num_piecewise_capturable_graphs_seen=1,
        num_backend_compilations=1,
    ):
        model = compile_model(config, model="simple-piecewise", max_num_tokens=2)
        assert model.forward(torch.zeros(2, 1)).flatten().tolist() == [19.0, 19.0]
