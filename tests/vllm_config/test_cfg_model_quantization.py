"""What the differential tests cannot reach of ModelConfig's quantization: the oracle's CPU build cannot
detect a checkpoint's method (vLLM asks every kernel config, and importing them needs `compressed_tensors`
and CUDA kernels), so detection from `quantization_config` is held to vLLM 0.14.0's `_verify_quantization`
here; and the hf_overrides helpers write to config dicts only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compilation_bridge.settings import MODEL_ROOTS_ENV
from compilation_bridge.vllm_config import ModelConfig, PoolerConfig

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "max_position_embeddings": 256,
}


def quantized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quant: dict[str, Any]) -> str:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "quantization_config": quant}))
    monkeypatch.setenv(MODEL_ROOTS_ENV, str(tmp_path))
    return str(tmp_path)


def test_a_method_no_kernel_claims_is_taken_from_the_checkpoint(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = quantized(tmp_path, monkeypatch, {"quant_method": "FP8", "activation_scheme": "dynamic"})
    config = ModelConfig(model=model)
    assert (config.quantization, config.is_quantized) == ("fp8", True)
    assert config.model_arch_config.quantization_config == {
        "quant_method": "fp8",
        "activation_scheme": "dynamic",
    }
    with pytest.raises(ValueError, match=r"\(fp8\) does not match the quantization method specified in the "):
        ModelConfig(model=model, quantization="bitsandbytes")


def test_compressed_tensors_and_bitsandbytes_8bit(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = quantized(tmp_path, monkeypatch, {"quant_method": "compressed_tensors"})
    assert ModelConfig(model=model).quantization == "compressed-tensors"
    model = quantized(tmp_path, monkeypatch, {"quant_method": "bitsandbytes", "load_in_8bit": True})
    config = ModelConfig(model=model)
    assert (config.quantization, config.enforce_eager) == ("bitsandbytes", True)


@pytest.mark.parametrize(
    "quant",
    [
        {"quant_method": "awq", "bits": 4},
        {"quant_method": "gptq", "bits": 4},
        {"quant_method": "fp8", "checkpoint_format": "marlin_24"},
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}},
    ],
    ids=repr,
)
def test_a_method_a_device_kernel_may_claim_is_refused(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quant: dict[str, Any]
) -> None:
    with pytest.raises(ValueError, match="chosen by vLLM from the kernels the device has"):
        ModelConfig(model=quantized(tmp_path, monkeypatch, quant))


def test_an_unknown_modelopt_algorithm(cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quant = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "INT3"}}
    with pytest.raises(ValueError, match="Unknown ModelOpt quant algo: INT3"):
        ModelConfig(model=quantized(tmp_path, monkeypatch, quant))


def test_the_override_helpers_write_to_dicts_only(cpu: None) -> None:
    config = ModelConfig(model="tiny-llama")
    pooler = PoolerConfig()
    with pytest.raises(TypeError, match="config dict"):
        config._apply_dict_overrides(pooler, {"softmax": {"x": 1}})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="config dict"):
        config._update_nested(pooler, {"softmax": True})  # type: ignore[arg-type]
    assert pooler.softmax is None
