"""Budgets on compile and run: Inductor options within their ranges, model weights and run size bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from compilation_bridge.compile import budgets, compile_model, inductor_options, reference_models
from compilation_bridge.compile.inductor_options import (
    OPTION_RANGES,
    TUNING_OPTIONS,
    checked_inductor_options,
)
from compilation_bridge.settings import (
    DEFAULT_MAX_RUN_ELEMENTS,
    MAX_MODEL_BYTES_ENV,
    MAX_RUN_BYTES_ENV,
    MAX_RUN_ELEMENTS_ENV,
)
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
        reference_models.ToyLlamaOptions(hidden_size=4096, num_layers=64, intermediate_size=16384)
    message = str(info.value)
    assert "16108752896 parameters (61450.0 MiB in float32)" in message
    assert "budget of 1024.0 MiB (COMPILATION_BRIDGE_MAX_MODEL_BYTES)" in message


def test_parameter_count_is_what_the_model_allocates() -> None:
    from compilation_bridge.compile.ops import custom_op_context

    options = reference_models.ToyLlamaOptions(
        vocab_size=1000, hidden_size=64, num_layers=3, num_heads=8, num_kv_heads=2, intermediate_size=100
    )
    with custom_op_context(["none"], CompilationConfig()):
        model = reference_models.ToyLlama(options)
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


def test_the_default_run_budgets_allow_the_default_toy_llama_at_its_default_max_num_tokens() -> None:
    from compilation_bridge.compile.plan import DEFAULT_MAX_NUM_TOKENS
    from compilation_bridge.compile.runner import RUN_TOKENS_CAP

    footprint = reference_models.ToyLlamaOptions().run_footprint
    budgets.check_run_elements(RUN_TOKENS_CAP, reference_models.ToyLlamaOptions().hidden_size)
    budgets.check_run_bytes(footprint, DEFAULT_MAX_NUM_TOKENS)  # the trace's default size, too
    with pytest.raises(ValueError, match="run budget of 16777216 elements"):
        budgets.check_run_elements(RUN_TOKENS_CAP, 4096)
    # the element budget allows the token cap, but its attention scores alone would be 64 GiB per copy
    with pytest.raises(ValueError, match=r"mostly attention 4 heads x 65536² tokens"):
        budgets.check_run_bytes(footprint, RUN_TOKENS_CAP)


# -- a run's peak bytes, attention included -------------------------------------------------------

# One run as the runner does it (compiled forward, then the eager reference, each timed), in a fresh
# process: ru_maxrss is the process's peak, so its rise over the resident size before the run is what
# the run allocated at its peak. A warm-up run first, so that first-use costs are not counted.
PEAK_SCRIPT = """
import json, resource, sys
import torch
from compilation_bridge.compile import compile_model, reference_models
from compilation_bridge.vllm_config import CompilationConfig

def resident():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))

mode, backend, name, tokens, options, cache_dir = sys.argv[1:7]
num_tokens = int(tokens)
config = CompilationConfig(mode=int(mode), backend=backend, cache_dir=cache_dir)
model = compile_model(config, model=name, max_num_tokens=num_tokens, **json.loads(options))
model.run(2, repeats=3)
before = resident()
model.run(num_tokens, repeats=3)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
estimate = reference_models.footprint_of(model.model)(num_tokens).peak_bytes
print(json.dumps({"grown": grown, "estimate": estimate}))
"""


def _measured_run(
    cache_dir: str, mode: int, backend: str, name: str, n: int, options: dict[str, Any]
) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, str(mode), backend, name, str(n), json.dumps(options), cache_dir],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "2"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(
    ("mode", "backend", "name", "num_tokens", "options"),
    [
        # attention dominates: 16 heads x 1024² scores are 64 MiB per copy
        (0, "inductor", "toy-llama", 1024, {"num_heads": 16, "num_kv_heads": 2, "num_layers": 1}),
        # the MLP dominates: 1024 tokens x 2 x 4096 for gate and up are 32 MiB
        (0, "inductor", "toy-llama", 1024, {"intermediate_size": 4096, "num_layers": 1}),
        # hidden states only, through the split graph's pieces: 16 MiB each
        (3, "eager", "simple-piecewise", 2048, {"hidden_size": 2048}),
    ],
)
def test_the_estimate_covers_what_a_run_really_allocates(
    cache_dir: str, mode: int, backend: str, name: str, num_tokens: int, options: dict[str, Any]
) -> None:
    measured = _measured_run(cache_dir, mode, backend, name, num_tokens, options)
    assert measured["grown"] > 0
    assert measured["estimate"] >= measured["grown"], measured


def test_attention_outgrows_the_element_budget_reproduction(cache_dir: str) -> None:
    """The element budget allowed this run 128 times over, yet its scores grew the process by more than
    a hundred hidden-state tensors: heads x tokens², which the byte estimate counts and covers."""
    options = {"hidden_size": 128, "num_heads": 32, "num_kv_heads": 2, "num_layers": 1}
    tokens = 1024
    assert tokens * 128 * 128 <= DEFAULT_MAX_RUN_ELEMENTS
    measured = _measured_run(cache_dir, 0, "inductor", "toy-llama", tokens, options)
    hidden_state = tokens * 128 * 4
    assert measured["grown"] > 100 * hidden_state  # about 300 MiB against 0.5 MiB of hidden states
    assert measured["estimate"] >= measured["grown"], measured


def test_a_run_above_the_byte_budget_is_refused_before_anything_is_allocated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = compile_model(CompilationConfig(mode=0), model="toy-llama", max_num_tokens=2048)
    monkeypatch.setenv(MAX_RUN_BYTES_ENV, str(100 << 20))

    def no_inputs(n: int) -> None:
        raise AssertionError(f"inputs of {n} tokens were built before the budget refused them")

    monkeypatch.setattr(model, "_inputs", no_inputs)
    with pytest.raises(ValueError) as info:
        model.run(1024)
    assert str(info.value) == (
        "a run of 1024 tokens would allocate about 135.0 MiB at its peak (mostly attention 4 heads x "
        "1024² tokens), above the worker's run budget of 100.0 MiB (COMPILATION_BRIDGE_MAX_RUN_BYTES); "
        "run fewer tokens or build the model with smaller options"
    )
    assert model.runs == 0


def test_a_run_just_inside_the_byte_budget_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    model = compile_model(CompilationConfig(mode=0), model="toy-llama", max_num_tokens=64, num_layers=1)
    monkeypatch.setenv(MAX_RUN_BYTES_ENV, str(reference_models.footprint_of(model.model)(48).peak_bytes))
    assert model.run(48, repeats=1)["num_tokens"] == 48
    with pytest.raises(ValueError, match="a run of 49 tokens would allocate"):
        model.run(49)


def test_the_trace_takes_the_most_tokens_within_the_byte_budget(
    monkeypatch: pytest.MonkeyPatch, cache_dir: str
) -> None:
    from compilation_bridge.compile.runner import CompiledModel

    footprint = reference_models.ToyLlamaOptions(num_layers=1).run_footprint
    monkeypatch.setenv(MAX_RUN_BYTES_ENV, str(footprint(300).peak_bytes + 1))
    built: list[int] = []
    inputs = CompiledModel._inputs
    monkeypatch.setattr(CompiledModel, "_inputs", lambda self, n: built.append(n) or inputs(self, n))
    config = CompilationConfig(mode=3, backend="eager", cache_dir=cache_dir)
    compile_model(config, model="toy-llama", max_num_tokens=2048, num_layers=1)
    assert built == [300]  # not max_num_tokens: 2048 tokens would be 15 times over the budget


def test_a_trace_that_cannot_fit_is_refused_before_it_runs(
    monkeypatch: pytest.MonkeyPatch, cache_dir: str
) -> None:
    monkeypatch.setenv(MAX_RUN_BYTES_ENV, "1000")
    config = CompilationConfig(mode=3, backend="eager", cache_dir=cache_dir)
    with pytest.raises(
        ValueError, match=r"a run of 2 tokens would allocate about 0.5 MiB .* budget of 0.0 MiB"
    ):
        compile_model(config, model="single-attention", max_num_tokens=8, hidden_size=4096)


def test_footprints_grow_with_tokens_and_name_what_dominates() -> None:
    options = reference_models.ToyLlamaOptions(
        hidden_size=64, num_heads=4, num_kv_heads=4, intermediate_size=8192
    )
    sizes = [options.run_footprint(n).peak_bytes for n in (1, 2, 64, 512, 4096)]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    assert options.run_footprint(64).dominant == "the MLP 64 tokens x intermediate size 8192"
    assert options.run_footprint(4096).dominant == "attention 4 heads x 4096² tokens"
    single = reference_models.build_model("single-attention", hidden_size=8)
    simple = reference_models.footprint_of(single)(10)
    assert simple.dominant == "hidden states 10 tokens x hidden size 8"
    assert simple.peak_bytes == (2 * 6 + 4) * 10 * 8 * 4  # RUN_FACTOR x 6 widths, 4 held
