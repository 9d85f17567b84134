"""What the differential tests cannot compare for CacheConfig and ObservabilityConfig: the worker's own
refusal where vLLM would build a config it does not serve, and an OTLP endpoint where OpenTelemetry is
installed (the oracle environment has none)."""

from __future__ import annotations

import importlib.util

import pytest

from compilation_bridge.vllm_config import CacheConfig, ObservabilityConfig, VllmConfig


def test_kv_offloading_is_refused_inside_vllm_config() -> None:
    """vLLM would create a KVTransferConfig (and hash it); the worker does not serve one, so it says so."""
    CacheConfig(kv_offloading_size=2.0)  # on its own the field is plain data, as in vLLM
    with pytest.raises(NotImplementedError, match="kv_offloading_size needs a KVTransferConfig"):
        VllmConfig(cache_config=CacheConfig(kv_offloading_size=2.0))


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
