"""What the differential tests cannot compare for ProfilerConfig: its environment readers, which a caller
can reach, are held to the profiler's own variables and fields (vLLM hands back any of its variables'
values and sets any attribute)."""

from __future__ import annotations

import pytest

from compilation_bridge.vllm_config import ProfilerConfig


def test_the_readers_read_only_the_profilers_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    config = ProfilerConfig()
    monkeypatch.setenv("VLLM_PROFILER_MAX_ITERS", "12")
    monkeypatch.setenv("VLLM_API_KEY", "secret")
    assert config._get_from_env_if_set("max_iterations", "VLLM_PROFILER_MAX_ITERS") == "12"
    for name in ("VLLM_API_KEY", "HOME"):
        with pytest.raises(
            ValueError, match=f"'{name}' is not one of the environment variables ProfilerConfig"
        ):
            config._get_from_env_if_set("profiler", name)
        with pytest.raises(
            ValueError, match=f"'{name}' is not one of the environment variables ProfilerConfig"
        ):
            config._set_from_env_if_set("torch_profiler_dir", name, False)
    assert config.torch_profiler_dir == ""


def test_the_setter_sets_only_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    config = ProfilerConfig()
    monkeypatch.setenv("VLLM_PROFILER_MAX_ITERS", "12")
    config._set_from_env_if_set("max_iterations", "VLLM_PROFILER_MAX_ITERS", False, True)
    assert config.max_iterations == 12
    with pytest.raises(ValueError, match="'__class__' is not a field of ProfilerConfig"):
        config._set_from_env_if_set("__class__", "VLLM_PROFILER_MAX_ITERS", False)
    assert type(config) is ProfilerConfig
