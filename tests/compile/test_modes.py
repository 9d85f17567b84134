"""Each mode's trace and guard behaviour (vLLM's `TorchCompileWithNoGuardsWrapper`;
docs/design.md#real-compilation) and compiled == eager for every mode."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from compilation_bridge.compile import compilation_counter, compile_model
from compilation_bridge.compile.wrapper import CompiledForward
from compilation_bridge.vllm_config import CompilationConfig, CompilationMode

TINY = {"num_layers": 1, "hidden_size": 32, "intermediate_size": 64, "vocab_size": 64}


class BranchOnSize(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 if x.size(0) >= 4 else x * 100


def _wrapped(mode: int) -> CompiledForward:
    config = CompilationConfig(mode=mode, backend="eager")
    backend = config.init_backend(None) if mode else None  # init_backend refuses mode NONE, as vLLM
    return CompiledForward(BranchOnSize(), CompilationMode(mode), backend)


def test_dynamo_trace_once_drops_guards() -> None:
    forward = _wrapped(2)
    assert forward(torch.tensor([1.0, 2, 3, 4])).tolist() == [2, 4, 6, 8]
    # traced once at size 4 (dynamic): the size-3 call reuses that trace, guards and all dropped
    assert forward(torch.tensor([1.0, 2, 3])).tolist() == [2, 4, 6]


def test_stock_torch_compile_keeps_guards() -> None:
    with compilation_counter.expect(stock_torch_compile_count=1):
        forward = _wrapped(1)
    assert forward(torch.tensor([1.0, 2, 3, 4])).tolist() == [2, 4, 6, 8]
    assert forward(torch.tensor([1.0, 2, 3])).tolist() == [100, 200, 300]  # re-traced


def test_mode_none_is_eager_and_counts_nothing() -> None:
    with compilation_counter.expect(num_graphs_seen=0, stock_torch_compile_count=0):
        forward = _wrapped(0)
        assert forward(torch.tensor([1.0, 2, 3])).tolist() == [100, 200, 300]


def test_mode_none_in_the_config_is_refused() -> None:
    with pytest.raises(RuntimeError, match="Compilation mode cannot be NO_COMPILATION"):
        compile_model(CompilationConfig(), model="toy-llama")


def test_two_models_of_one_class_never_share_a_trace(cache_dir: str) -> None:
    first = _wrapped(2)
    first(torch.ones(4))
    second = CompiledForward(BranchOnSize(), CompilationMode.DYNAMO_TRACE_ONCE, "eager")
    assert second(torch.ones(3)).tolist() == [100, 100, 100]  # its own trace, at size 3


@pytest.mark.parametrize(("mode", "backend"), [(0, "inductor"), (1, "eager"), (2, "eager"), (3, "eager")])
def test_compiled_equals_eager(mode: int, backend: str, cache_dir: str) -> None:
    config = CompilationConfig(mode=mode, backend=backend, cache_dir=cache_dir)
    model = compile_model(config, model="toy-llama", max_num_tokens=32, **TINY)
    for n in (1, 7, 32):
        assert model.run(n)["max_abs_diff_vs_eager"] < 1e-3
    assert model.report()["mode"] == CompilationMode(mode).name


@pytest.mark.slow
@pytest.mark.parametrize("mode", [1, 2, 3])
def test_compiled_equals_eager_with_inductor(mode: int, cache_dir: str) -> None:
    config = CompilationConfig(mode=mode, backend="inductor", cache_dir=cache_dir)
    model = compile_model(config, model="toy-llama", max_num_tokens=32, **TINY)
    for n in (5, 32):
        assert model.run(n)["max_abs_diff_vs_eager"] < 1e-3


def test_default_toy_llama_compiled_equals_eager(cache_dir: str) -> None:
    model = compile_model(CompilationConfig(mode=3, backend="eager", cache_dir=cache_dir), max_num_tokens=64)
    assert model.run(64)["max_abs_diff_vs_eager"] < 1e-3


def test_evaluate_guards_turns_a_failed_shape_guard_into_an_error() -> None:
    config = CompilationConfig(mode=2, backend="eager", dynamic_shapes_config={"evaluate_guards": True})
    forward = CompiledForward(
        BranchOnSize(),
        CompilationMode.DYNAMO_TRACE_ONCE,
        "eager",
        dynamic_shapes_config=config.dynamic_shapes_config,
    )
    assert forward(torch.ones(4)).tolist() == [2, 2, 2, 2]
    assert forward(torch.ones(6)).tolist() == [2] * 6  # within the kept guard (size >= 4)
    with pytest.raises(Exception, match=r"fail_on_recompile|Detected recompile"):
        forward(torch.ones(3))


@pytest.mark.parametrize("kind", ["unbacked", "backed_size_oblivious"])
def test_other_dynamic_shape_types_compile_toy_llama(kind: str, cache_dir: str) -> None:
    config = CompilationConfig(
        mode=3, backend="eager", cache_dir=cache_dir, dynamic_shapes_config={"type": kind}
    )
    model = compile_model(config, model="toy-llama", max_num_tokens=32, **TINY)
    for n in (1, 9, 32):
        assert model.run(n)["max_abs_diff_vs_eager"] < 1e-3
