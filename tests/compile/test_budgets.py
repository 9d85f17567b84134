"""Budgets on compile and run: Inductor options within their ranges, model weights and run size bounded."""

from __future__ import annotations

import pytest

from compilation_bridge.compile import budgets, compile_model, inductor_options, models
from compilation_bridge.compile.inductor_options import (
    OPTION_RANGES,
    TUNING_OPTIONS,
    checked_inductor_options,
)
from compilation_bridge.settings import MAX_MODEL_BYTES_ENV, MAX_RUN_ELEMENTS_ENV
from compilation_bridge.vllm_config import CompilationConfig


def test_every_allowlisted_option_has_a_range() -> None:
    assert set(OPTION_RANGES) == TUNING_OPTIONS and len(TUNING_OPTIONS) == 40


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("max_autotune", 1, r"\['max_autotune'\] must be a boolean, got 1"),
        ("dce", None, r"\['dce'\] must be a boolean, got None"),
        ("cpp.threads", 0, r"\['cpp.threads'\] must be an integer between 1 and \d+, or -1, got 0"),
        ("cpp.threads", 100_000, r"\['cpp.threads'\] must be an integer between 1 and \d+, or -1"),
        ("cpp.threads", 2.0, r"\['cpp.threads'\] must be an integer between"),
        ("cpp.min_chunk_size", 0, r"\['cpp.min_chunk_size'\] must be an integer between 1 and 16777216"),
        ("cpp.simdlen", 3, r"\['cpp.simdlen'\] must be one of 1, null, 128, 256, 512, got 3"),
        ("max_fusion_size", 1 << 20, r"\['max_fusion_size'\] must be an integer between 1 and 4096"),
        ("unroll_reductions_threshold", -1, r"must be an integer between 0 and 1024"),
        ("triton.max_tiles", 7, r"\['triton.max_tiles'\] must be an integer between 1 and 3, or null"),
        ("score_fusion_memory_threshold", True, r"must be an integer between 0 and 16777216"),
    ],
)
def test_out_of_range_options_are_refused(option: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        checked_inductor_options({option: value})


@pytest.mark.parametrize(
    "options",
    [
        {"cpp.threads": -1},
        {"cpp.threads": 1},
        {"cpp.simdlen": None},
        {"cpp.simdlen": 512},
        {"triton.max_tiles": None},
        {"enable_auto_functionalized_v2": False, "combo_kernels": True, "max_fusion_size": 64},
        {"dce": True, "size_asserts": False, "nan_asserts": False, "epilogue_fusion": True},
    ],
)
def test_values_in_range_pass(options: dict[str, object]) -> None:
    assert checked_inductor_options(options) == options


def test_cpp_threads_is_bounded_by_this_machines_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inductor_options.os, "cpu_count", lambda: 4)
    assert checked_inductor_options({"cpp.threads": 4})
    with pytest.raises(ValueError, match="between 1 and 4, or -1, got 5"):
        checked_inductor_options({"cpp.threads": 5})


def test_compile_refuses_an_out_of_range_option_before_work(cache_dir: str) -> None:
    config = CompilationConfig(
        mode=3, backend="inductor", cache_dir=cache_dir, inductor_compile_config={"cpp.threads": 0}
    )
    with pytest.raises(ValueError, match=r"\['cpp.threads'\] must be an integer between 1 and"):
        compile_model(config, model="single-attention", max_num_tokens=8)


def test_toy_llama_is_bounded_by_its_parameter_bytes() -> None:
    with pytest.raises(ValueError) as info:
        models.ToyLlamaOptions(hidden_size=4096, num_layers=64, intermediate_size=16384)
    message = str(info.value)
    assert "16108752896 parameters (61450.0 MiB in float32)" in message
    assert "budget of 1024.0 MiB (COMPILATION_BRIDGE_MAX_MODEL_BYTES)" in message


def test_parameter_count_is_what_the_model_allocates() -> None:
    from compilation_bridge.compile.ops import custom_op_context

    options = models.ToyLlamaOptions(
        vocab_size=1000, hidden_size=64, num_layers=3, num_heads=8, num_kv_heads=2, intermediate_size=100
    )
    with custom_op_context(["none"], CompilationConfig()):
        model = models.ToyLlama(options)
    assert options.parameter_count() == sum(p.numel() for p in model.parameters())


def test_the_model_budget_follows_the_operators_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_MODEL_BYTES_ENV, "1000000")
    with pytest.raises(ValueError, match=r"has 361088 parameters \(1.4 MiB in float32\), above .* 1.0 MiB"):
        compile_model(CompilationConfig(mode=0), model="toy-llama")
    compile_model(CompilationConfig(mode=0), model="toy-llama", num_layers=1, vocab_size=256)


def test_runs_are_bounded_by_tokens_times_hidden_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_RUN_ELEMENTS_ENV, "64")
    model = compile_model(CompilationConfig(mode=0), model="single-attention", max_num_tokens=32)
    assert model.run(16)["num_tokens"] == 16  # 16 tokens x hidden size 4 = 64
    with pytest.raises(
        ValueError, match=r"num_tokens=17 x hidden_size=4 = 68 is above the worker's run budget of 64"
    ):
        model.run(17)


def test_the_default_run_budget_allows_the_default_toy_llama_at_the_token_cap() -> None:
    from compilation_bridge.compile.runner import RUN_TOKENS_CAP

    budgets.check_run_elements(RUN_TOKENS_CAP, models.ToyLlamaOptions().hidden_size)
    with pytest.raises(ValueError, match="run budget of 16777216 elements"):
        budgets.check_run_elements(RUN_TOKENS_CAP, 4096)
