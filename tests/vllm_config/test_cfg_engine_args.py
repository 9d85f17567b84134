"""What `EngineArgs.create_engine_config` does here that the differential tests cannot compare with vLLM:
the places where vLLM reaches beyond configuration (the hub, a speculators checkpoint's classes, the
tensorizer loader, the planning host's address), each refused with an error that says what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compilation_bridge.settings import MODEL_ROOTS_ENV
from compilation_bridge.vllm_config import EngineArgs, UsageContext, VllmConfig


def test_a_model_that_is_no_local_folder_is_refused_when_the_config_is_created(cpu: None) -> None:
    args = EngineArgs(model="Qwen/Qwen3-0.6B")  # vLLM online accepts the name here too
    with pytest.raises(ValueError, match="never the hub"):
        args.create_engine_config()


def test_a_speculators_checkpoint_is_refused_by_name(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = json.loads((Path(__file__).parents[2] / "tests/oracle/tiny-llama/config.json").read_text())
    (tmp_path / "config.json").write_text(
        json.dumps({**config, "speculators_config": {"algorithm": "eagle3"}})
    )
    monkeypatch.setenv(MODEL_ROOTS_ENV, str(tmp_path))
    with pytest.raises(NotImplementedError, match="speculators-format checkpoint"):
        EngineArgs(model=str(tmp_path)).create_engine_config()


def test_the_tensorizer_loader_is_refused(cpu: None) -> None:
    with pytest.raises(NotImplementedError, match="tensorizer"):
        EngineArgs(model="tiny-llama", load_format="tensorizer").create_engine_config()


def test_ray_data_parallelism_needs_the_address_given(cpu: None) -> None:
    with pytest.raises(ValueError, match="give data_parallel_address explicitly"):
        EngineArgs(model="tiny-llama", data_parallel_backend="ray").create_engine_config()


def test_the_created_config_is_a_vllm_config_and_the_arguments_hold_the_defaults(cpu: None) -> None:
    args = EngineArgs(model="tiny-llama")
    config = args.create_engine_config(UsageContext.LLM_CLASS)
    assert isinstance(config, VllmConfig)
    assert (args.max_num_batched_tokens, args.max_num_seqs) == (
        config.scheduler_config.max_num_batched_tokens,
        config.scheduler_config.max_num_seqs,
    )
    assert args.enable_chunked_prefill is True and args.enable_prefix_caching is True


def test_a_usage_context_may_be_named_by_its_string(cpu: None) -> None:
    """Over the wire a UsageContext member (a str enum) arrives as its string: the string names it here,
    where vLLM, given a plain string, fails formatting its debug line (docs/configuration.md)."""
    named = EngineArgs(model="tiny-llama").create_engine_config("OPENAI_API_SERVER")
    member = EngineArgs(model="tiny-llama").create_engine_config(UsageContext.OPENAI_API_SERVER)
    assert named.scheduler_config.max_num_seqs == member.scheduler_config.max_num_seqs == 128
    with pytest.raises(ValueError, match="'nowhere' is not a valid UsageContext"):
        EngineArgs(model="tiny-llama").create_engine_config("nowhere")
