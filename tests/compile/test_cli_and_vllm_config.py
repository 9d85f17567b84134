"""The `compile` command, `init_backend` for each mode, and a VllmConfig compiled as vLLM would."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from compilation_bridge.cli import main
from compilation_bridge.compile import VllmBackend, compile_model
from compilation_bridge.vllm_config import CompilationConfig, SchedulerConfig, VllmConfig
from compilation_bridge.vllm_config.platforms import current_platform, set_platform


@pytest.fixture
def cuda_platform() -> Iterator[None]:
    previous = current_platform.name
    set_platform("cuda")
    yield
    set_platform(previous)


def test_compile_command_prints_progress_and_a_report(
    cache_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = json.dumps({"mode": 3, "backend": "eager", "cache_dir": cache_dir, "compile_sizes": [4]})
    argv = ["compile", "--config", config, "--model", "toy-llama", "--tokens", "1,4,8"]
    assert (
        main([*argv, "--max-num-tokens", "16", "--option", "num_layers=1", "--option", "hidden_size=16"]) == 0
    )
    out, err = capsys.readouterr()
    assert "tracing with 16 tokens" in err and "piece 2/2 compiled (eager)" in err
    assert "pieces           3 (2 compiled)" in out
    assert "compiled so far  (1, 16), (4, 4)" in out
    assert out.count("0.00e+00") == 3


def test_compile_command_json_and_errors(cache_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    config = json.dumps({"mode": 2, "backend": "eager"})
    assert (
        main(["compile", "--config", config, "--model", "single-attention", "--tokens", "2", "--json"]) == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["report"]["mode"] == "DYNAMO_TRACE_ONCE" and result["runs"][0]["num_tokens"] == 2
    with pytest.raises(SystemExit) as exited:  # a mistyped --model is a usage error, as argparse reports
        main(["compile", "--config", config, "--model", "nope"])
    assert exited.value.code == 2
    assert "compile: error: argument --model: unknown model 'nope'" in capsys.readouterr().err


def test_init_backend_per_mode() -> None:
    vllm_config = VllmConfig(compilation_config=CompilationConfig(mode=3, backend="eager"))
    vllm_config.compilation_config.mode = 3  # the CPU platform turns VLLM_COMPILE into mode 2; undo it
    first = vllm_config.compilation_config.init_backend(vllm_config)
    assert isinstance(first, VllmBackend)
    assert first is not vllm_config.compilation_config.init_backend(vllm_config)  # a new one each call
    assert CompilationConfig(mode=2, backend="eager").init_backend(vllm_config) == "eager"
    assert CompilationConfig(mode=1).init_backend(vllm_config) == "inductor"


def test_a_vllm_config_on_cpu_compiles_as_dynamo_trace_once() -> None:
    vllm_config = VllmConfig(compilation_config=CompilationConfig(backend="eager"))
    model = compile_model(vllm_config, model="single-attention")
    assert model.run(3)["max_abs_diff_vs_eager"] == 0.0
    report = model.report()
    assert report["mode"] == "DYNAMO_TRACE_ONCE" and report["max_num_tokens"] == 2048
    with pytest.raises(ValueError, match="differs from the VllmConfig's"):
        compile_model(vllm_config, model="single-attention", max_num_tokens=16)


def test_a_vllm_config_planned_for_cuda_reports_cudagraphs_without_capturing(
    cuda_platform: None, cache_dir: str
) -> None:
    config = CompilationConfig(
        mode=3, backend="eager", cache_dir=cache_dir, cudagraph_capture_sizes=[1, 2, 4]
    )
    scheduler = SchedulerConfig(
        max_num_batched_tokens=64, max_model_len=64, max_num_seqs=8, is_encoder_decoder=False
    )
    vllm_config = VllmConfig(compilation_config=config, scheduler_config=scheduler)
    model = compile_model(vllm_config, model="toy-llama", num_layers=1, hidden_size=16)
    assert model.run(3)["cudagraph_runtime_mode"] == "NONE"
    report = model.report()
    assert report["cudagraph_mode"] == "FULL_AND_PIECEWISE"
    assert report["cudagraph_capture_sizes"] == sorted(config.cudagraph_capture_sizes or [])
    assert "CUDA graphs need CUDA" in report["cudagraphs_reason"]
    assert report["cudagraphs_active"] is False and report["counters"]["num_cudagraph_captured"] == 0
    assert report["compile_ranges"] == [[1, 64]]
