"""What the differential tests cannot compare for ObservabilityConfig and AttentionConfig: an OTLP endpoint
where OpenTelemetry is installed (the oracle environment has none), and the env reader a caller can reach,
held to AttentionConfig's own pairs. (CacheConfig's offloading inside VllmConfig is compared with vLLM in
tests/differential/test_kv_transfer_config.py.)"""

from __future__ import annotations

import importlib.util

import pytest

from compilation_bridge.vllm_config import AttentionConfig, ObservabilityConfig


@pytest.mark.skipif(importlib.util.find_spec("opentelemetry") is None, reason="OpenTelemetry not installed")
def test_an_otlp_endpoint_is_accepted_where_opentelemetry_is_installed() -> None:
    config = ObservabilityConfig(
        otlp_traces_endpoint="http://collector:4317", collect_detailed_traces=["all"]
    )
    assert config.collect_model_forward_time and config.collect_model_execute_time


def test_collect_detailed_traces_needs_an_endpoint() -> None:
    with pytest.raises(
        ValueError, match="collect_detailed_traces requires `--otlp-traces-endpoint` to be set"
    ):
        ObservabilityConfig(collect_detailed_traces=["model"])


def test_set_from_env_is_held_to_attention_configs_own_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's `_set_from_env_if_set` reads any vLLM variable into any attribute; a caller reaches it here,
    so only the variables and fields AttentionConfig pairs itself are accepted."""
    config = AttentionConfig()
    monkeypatch.setenv("VLLM_USE_CUDNN_PREFILL", "1")
    config._set_from_env_if_set("use_cudnn_prefill", "VLLM_USE_CUDNN_PREFILL")
    assert config.use_cudnn_prefill is True
    with pytest.raises(
        ValueError, match="'HOME' is not one of the environment variables AttentionConfig reads"
    ):
        config._set_from_env_if_set("backend", "HOME")
    with pytest.raises(ValueError, match="'__class__' is not a field of AttentionConfig"):
        config._set_from_env_if_set("__class__", "VLLM_USE_CUDNN_PREFILL")
    assert type(config) is AttentionConfig
