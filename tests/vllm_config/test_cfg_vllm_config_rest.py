"""What the differential tests cannot show of VllmConfig's remaining functions: the refusals that are
departures from vLLM 0.14.0 (docs/configuration.md), and the model-specific updates of
`try_verify_and_update_config` for models no tiny test folder stands for (held to vLLM's source,
vllm/model_executor/models/config.py and adapters.py)."""

import dataclasses
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from compilation_bridge.vllm_config import (
    CacheConfig,
    CompilationConfig,
    StructuredOutputsConfig,
    VllmConfig,
    mamba_state,
    model_updates,
)
from compilation_bridge.vllm_config.attention import AttentionBackendEnum
from compilation_bridge.vllm_config.model import BFLOAT16, ModelConfig

MODELS = Path(__file__).resolve().parents[1] / "differential" / "models"


def tiny_model(**kwargs: object) -> ModelConfig:
    return ModelConfig(model="tiny-llama", skip_tokenizer_init=True, **kwargs)


def test_quantized_model_refused(cpu) -> None:
    """vLLM answers its kernel's config object for a quantized model: refused, saying why."""
    config = VllmConfig(model_config=tiny_model(quantization="fp8"))
    with pytest.raises(ValueError, match=r"quantization method 'fp8'.*model executor"):
        _ = config.quant_config
    with pytest.raises(ValueError, match="quantization method 'fp8'"):
        VllmConfig.get_quantization_config(config.model_config, config.load_config)
    assert config.model_config.quantization == "fp8"  # the copy was checked, the model config is untouched


def test_unquantized_model_and_no_model(cpu) -> None:
    assert VllmConfig().quant_config is None
    config = VllmConfig(model_config=tiny_model())
    assert config.quant_config is None
    assert VllmConfig._get_quantization_config(config.model_config, config.load_config) is None


def test_trace_refused_when_set(cpu, monkeypatch, tmp_path) -> None:
    """With VLLM_TRACE_FUNCTION set, vLLM writes a trace file and installs a tracer: refused, nothing
    written."""
    monkeypatch.setenv("VLLM_TRACE_FUNCTION", "1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with pytest.raises(PermissionError, match="VLLM_TRACE_FUNCTION is set"):
        VllmConfig().enable_trace_function_call_for_thread()
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("VLLM_TRACE_FUNCTION", "0")
    assert VllmConfig().enable_trace_function_call_for_thread() is None


@pytest.mark.parametrize("key", ["compute_hash", "_post_init_kv_transfer_config", "needs_dp_coordinator"])
def test_default_only_into_fields(cpu, key: str) -> None:
    """vLLM reads and writes any attribute a key names; here only a config's fields."""
    config = VllmConfig()
    with pytest.raises(ValueError, match="is not a field of VllmConfig"):
        config._set_config_default(config, key, 1)
    with pytest.raises(ValueError, match="is not a field of VllmConfig"):
        config._apply_optimization_level_defaults({key: 1})


def test_defaults_never_reach_a_class(cpu) -> None:
    """`__class__` of a config is a dataclass (the class): a default written there would change the class's
    own default for every caller. Refused; the class is untouched."""
    config = VllmConfig()
    with pytest.raises(ValueError, match="'__class__' is not a field"):
        config._apply_optimization_level_defaults({"__class__": {"lora_config": "x"}})
    with pytest.raises(ValueError, match="'lora_config' is not a field of type"):
        config._set_config_default(VllmConfig, "lora_config", "x")
    assert VllmConfig().lora_config is None


def test_defaults_written_where_none(cpu) -> None:
    config = VllmConfig()
    config._apply_optimization_level_defaults({"lora_config": lambda c: c.instance_id, "missing": 1})
    assert config.lora_config == config.instance_id  # a callable default gets the root, as in vLLM


def test_with_hf_config_takes_a_dict(cpu) -> None:
    config = VllmConfig(model_config=tiny_model())
    with pytest.raises(TypeError, match="hf_config must be a model config dict"):
        config.with_hf_config("LlamaConfig")
    other = config.with_hf_config(config.model_config.hf_config, ["MistralForCausalLM"])
    assert other.model_config.architectures == ["MistralForCausalLM"]
    assert config.model_config.architectures == ["LlamaForCausalLM"]
    assert other.model_config is not config.model_config


def test_hybrid_model_planned(cpu, monkeypatch) -> None:
    """A hybrid attention/mamba model plans: the attention page holds the mamba state, which is padded to
    it (the values themselves are compared with vLLM in tests/differential/test_hybrid_mamba.py)."""
    monkeypatch.setenv("COMPILATION_BRIDGE_MODEL_ROOTS", str(MODELS))
    model = ModelConfig(model=str(MODELS / "tiny-jamba"), skip_tokenizer_init=True)
    config = VllmConfig(model_config=model, cache_config=CacheConfig(enable_prefix_caching=False))
    cache = config.cache_config
    attention_page = cache.block_size * model_updates._attention_page_1_token(config)[1]
    assert cache.block_size % 16 == 0
    assert cache.mamba_page_size_padded == attention_page >= mamba_state.mamba_state_page_size(config)
    assert cache.mamba_block_size == model.max_model_len


def test_hybrid_architecture_without_readers(cpu, monkeypatch) -> None:
    """A hybrid architecture missing from the readers' table is a clear error, not a guess."""
    monkeypatch.setenv("COMPILATION_BRIDGE_MODEL_ROOTS", str(MODELS))
    model = ModelConfig(model=str(MODELS / "tiny-jamba"), skip_tokenizer_init=True)
    monkeypatch.delitem(mamba_state.MAMBA_STATE_READERS, "JambaForCausalLM")
    with pytest.raises(ValidationError, match="JambaForCausalLM: a hybrid attention/mamba architecture"):
        VllmConfig(model_config=model)


def _attention_parts(head_size: int, backend: object = None, use_mla: bool = False) -> SimpleNamespace:
    model = SimpleNamespace(
        dtype=BFLOAT16, use_mla=use_mla, get_num_kv_heads=lambda parallel: 2, get_head_size=lambda: head_size
    )
    return SimpleNamespace(
        attention_config=SimpleNamespace(backend=backend),
        cache_config=CacheConfig(),
        model_config=model,
        parallel_config=None,
    )


@pytest.mark.parametrize(
    ("capability", "head_size", "backend", "alignment"),
    [
        ((10, 0), 256, None, 32),
        ((10, 3), 256, AttentionBackendEnum.FLASHINFER, 32),
        ((10, 0), 256, AttentionBackendEnum.FLASH_ATTN, 16),
        ((10, 0), 128, None, 16),
        ((9, 0), 256, None, 16),
    ],
)
def test_hybrid_attention_alignment_on_blackwell(
    on_platform, capability: tuple[int, int], head_size: int, backend: object, alignment: int
) -> None:
    """FlashInfer on a capability-10.x GPU needs blocks of 32 for head size 256 (the oracle's stand-in GPU
    is sm_90, so only this test reaches the branch)."""
    platform = on_platform("cuda")
    platform.capability = capability
    parts = _attention_parts(head_size, backend)
    assert model_updates._attention_page_1_token(parts) == (alignment, 2 * 2 * head_size * 2)


@pytest.mark.parametrize(("backend", "alignment"), [(None, 64), (AttentionBackendEnum.CUTLASS_MLA, 128)])
def test_hybrid_attention_alignment_with_mla(cpu, backend: object, alignment: int) -> None:
    """MLA backends align blocks to 64 (CUTLASS_MLA 128) and cache one latent vector per token."""
    parts = _attention_parts(576, backend, use_mla=True)
    parts.cache_config.cache_dtype = "fp8"
    assert model_updates._attention_page_1_token(parts) == (alignment, 2 * 576 * 1)


def test_platform_capability_family(on_platform) -> None:
    assert on_platform("cpu").is_device_capability_family(100) is False
    cuda = on_platform("cuda")
    assert cuda.is_device_capability_family(90) is True
    assert cuda.is_device_capability_family(100) is False


def test_pure_mamba_block_size(cpu, monkeypatch) -> None:
    monkeypatch.setenv("COMPILATION_BRIDGE_MODEL_ROOTS", str(MODELS))
    model = ModelConfig(model=str(MODELS / "tiny-mamba"), skip_tokenizer_init=True)
    config = VllmConfig(model_config=model, cache_config=CacheConfig(enable_prefix_caching=False))
    assert config.cache_config.mamba_block_size == model.max_model_len
    assert config.model_config.config_updated is True


def _bare(**model: object) -> SimpleNamespace:
    """A VllmConfig's parts that an update reads, around a stand-in model config."""
    return SimpleNamespace(
        model_config=SimpleNamespace(**model),
        cache_config=CacheConfig(),
        compilation_config=CompilationConfig(),
        structured_outputs_config=StructuredOutputsConfig(),
    )


def test_gpt_oss_update(cpu) -> None:
    config = _bare()
    model_updates.gpt_oss(config)
    assert config.structured_outputs_config.reasoning_parser == "openai_gptoss"
    assert config.compilation_config.max_cudagraph_capture_size == 1024
    config = _bare()
    config.structured_outputs_config.reasoning_parser = "mine"
    config.compilation_config.cudagraph_capture_sizes = [1, 2]
    model_updates.gpt_oss(config)
    assert config.structured_outputs_config.reasoning_parser == "mine"
    assert config.compilation_config.max_cudagraph_capture_size is None


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [("auto", "auto"), ("fp8", "fp8_ds_mla"), ("fp8_e5m2", "fp8_ds_mla"), ("bfloat16", "auto")],
)
def test_deepseek_v32_update(cpu, dtype: str, expected: str) -> None:
    config = _bare(hf_config={"index_topk": 4})
    config.cache_config.cache_dtype = dtype
    model_updates.deepseek_v32(config)
    assert config.cache_config.cache_dtype == expected
    with pytest.raises(AssertionError):
        model_updates.deepseek_v32(_bare(hf_config={}))


def test_nemotron_h_update(cpu) -> None:
    config = _bare(hf_config={})
    model_updates.nemotron_h(config)
    assert config.cache_config.mamba_ssm_cache_dtype == "float16"
    config = _bare(hf_config={"mamba_ssm_cache_dtype": "float32"})
    model_updates.nemotron_h(config)
    assert config.cache_config.mamba_ssm_cache_dtype == "float32"


def test_sequence_classification_update(cpu) -> None:
    hf = {"method": "from_2_way_softmax", "classifier_from_token": ["no", "yes"]}
    config = _bare(hf_config=hf, hf_text_config=hf)
    model_updates.sequence_classification(config)
    assert (hf["num_labels"], hf["use_sep_token"]) == (1, False)
    hf = {"method": "no_post_processing", "classifier_from_token": ["a", "b", "c"], "use_sep_token": True}
    config = _bare(hf_config=hf, hf_text_config=hf)
    model_updates.sequence_classification(config)
    assert (hf["num_labels"], hf["use_sep_token"]) == (3, True)
    with pytest.raises(AssertionError, match="method bogus not supported"):
        bogus = {"method": "bogus", "classifier_from_token": ["a"]}
        model_updates.sequence_classification(_bare(hf_config=bogus, hf_text_config=bogus))
    untouched: dict[str, object] = {}
    model_updates.sequence_classification(_bare(hf_config=untouched, hf_text_config=untouched))
    assert untouched == {}


def test_updates_run_once(cpu) -> None:
    """The post-init runs them and marks the model config; a later call does nothing, as in vLLM."""
    config = VllmConfig(model_config=tiny_model())
    assert config.model_config.config_updated is True
    before = dataclasses.asdict(config.cache_config)
    assert config.try_verify_and_update_config() is None
    assert dataclasses.asdict(config.cache_config) == before
    assert os.environ.get("VLLM_TRACE_FUNCTION") in (None, "0")


@pytest.mark.parametrize(
    ("key", "value"), [("max_cudagraph_capture_size", 2**40), ("compile_sizes", [1, 2**30])]
)
def test_defaults_get_the_size_cap(cpu, key: str, value: object) -> None:
    """A default bypasses the validators as set_attr does: a size that would make the worker allocate in
    proportion to it (a padding table of 2**40 entries) gets construction's cap."""
    compiled = CompilationConfig()
    with pytest.raises(ValueError, match=f"{key} must be at most 16777216"):
        VllmConfig()._set_config_default(compiled, key, value)
    assert getattr(compiled, key) is None


def test_nested_defaults_get_the_size_cap(cpu) -> None:
    config = VllmConfig()
    assert config.compilation_config.compile_sizes is None
    with pytest.raises(ValueError, match="compile_sizes must be at most 16777216"):
        config._apply_optimization_level_defaults({"compilation_config": {"compile_sizes": [2**25]}})
    assert config.compilation_config.compile_sizes is None
