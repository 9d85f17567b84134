"""vLLM 0.14.0's tests/config/test_multimodal_config.py, ported: MultiModalConfig's encoder attention
backend, named by string or member, and its place in the hash. Same test names and cases."""

from __future__ import annotations

import pytest

from compilation_bridge.vllm_config import AttentionBackendEnum, MultiModalConfig


def test_mm_encoder_attn_backend_str_conversion() -> None:
    config = MultiModalConfig(mm_encoder_attn_backend="FLASH_ATTN")
    assert config.mm_encoder_attn_backend == AttentionBackendEnum.FLASH_ATTN


def test_mm_encoder_attn_backend_invalid() -> None:
    with pytest.raises(ValueError):
        MultiModalConfig(mm_encoder_attn_backend="not_a_backend")


def test_mm_encoder_attn_backend_hash_updates() -> None:
    base_hash = MultiModalConfig().compute_hash()
    overridden_hash = MultiModalConfig(mm_encoder_attn_backend=AttentionBackendEnum.FLASH_ATTN).compute_hash()
    assert base_hash != overridden_hash
