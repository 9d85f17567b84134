"""What the differential tests cannot reach of ModelConfig's multimodal part: on the oracle's CPU build
vLLM 0.14.0 fails to inspect the encoder-decoder architecture tried (Whisper, left out of the worker's
registry table for the same reason), so the one step of its
post-init that concerns such a model, the processor cache switched off on the instance, is held to vLLM's
source here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compilation_bridge.settings import MODEL_ROOTS_ENV
from compilation_bridge.vllm_config import ModelConfig, MultiModalConfig

# A config that says it is an encoder-decoder (vLLM reads the flag, not the architecture, for this step),
# of an architecture the worker's registry table knows: Whisper's class is not in it.
ENCODER_DECODER = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "is_encoder_decoder": True,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "max_position_embeddings": 256,
}


@pytest.fixture
def encoder_decoder_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "config.json").write_text(json.dumps(ENCODER_DECODER))
    monkeypatch.setenv(MODEL_ROOTS_ENV, str(tmp_path))
    return str(tmp_path)


def test_an_encoder_decoder_model_switches_the_processor_cache_off(
    cpu: None, encoder_decoder_model: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="compilation_bridge.vllm_config"):
        config = ModelConfig(model=encoder_decoder_model, mm_processor_cache_gb=8)
    assert config.mm_processor_cache_gb == 0
    assert ModelConfig.mm_processor_cache_gb is None, "the init var's class default stays"
    assert "Encoder-decoder model detected, disabling mm processor cache." in caplog.messages
    assert config.multimodal_config is None and not config.is_multimodal_model


def test_a_text_model_keeps_what_it_is_given(cpu: None) -> None:
    given = MultiModalConfig(limit_per_prompt={"image": 2})
    assert ModelConfig(model="tiny-llama", multimodal_config=given).get_multimodal_config() is given
    with pytest.raises(ValueError, match=r"The model is not multimodal\."):
        ModelConfig(model="tiny-llama").get_multimodal_config()
