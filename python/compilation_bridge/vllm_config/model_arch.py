"""vLLM 0.14.0's `ModelArchitectureConfig` (vllm/config/model_arch.py) and the convertors that derive it from
a model's config (vllm/transformers_utils/model_arch_config_convertor.py).

Here a model's config is the dict read from its `config.json` (`ModelConfig.hf_config`), where vLLM holds a
transformers `PretrainedConfig`: `getattr(config, name, default)` reads as `config.get(name, default)`.
What the convertors derive (sizes, heads, experts, quantization config, the length keys) is vLLM's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass

from compilation_bridge.vllm_config.env import int_flag
from compilation_bridge.vllm_config.hashing import vllm_name

HFConfig = dict[str, Any]


class ConfigFields(Protocol):
    """What vLLM's readers of a model's config use of it: a dict here, or a view of a transformers
    config object's attributes (`hf_config_json.AttributeView`)."""

    def __contains__(self, name: object) -> bool: ...

    def __getitem__(self, name: str) -> Any: ...

    def __setitem__(self, name: str, value: Any) -> None: ...

    def get(self, name: str, default: Any = None) -> Any: ...


_MISSING = object()


def getattr_iter(
    config: ConfigFields,
    names: Iterable[str],
    default: Any = None,
    default_factory: Callable[[], Any] | None = None,
) -> Any:
    """vLLM's `getattr_iter` over a config dict: the value of the first name present (even None)."""
    for name in names:
        if name in config:
            return config[name]
    return default_factory() if default_factory is not None else default


def _require(config: HFConfig, name: str) -> Any:
    """`config.<name>` where vLLM reads the attribute without a default: AttributeError when absent."""
    value = config.get(name, _MISSING)
    if value is _MISSING:
        raise AttributeError(f"'PretrainedConfig' object has no attribute '{name}'")
    return value


@vllm_name("vllm.config.model_arch.ModelArchitectureConfig")
@dataclass(config=ConfigDict(arbitrary_types_allowed=True))
class ModelArchitectureConfig:
    """
    Configuration for model architecture that required by vLLM runtime
    """

    architectures: list[str] | None
    """List of model architecture class names (e.g., ['LlamaForCausalLM']).
       It can be None upon calling `vllm_config.with_hf_config(config.text_config)`"""

    model_type: str
    """Model type identifier (e.g., 'llama', 'gpt_oss')."""

    text_model_type: str | None
    """Text model type identifier (e.g., 'llama4_text')."""

    hidden_size: int
    """Hidden size of the model."""

    total_num_hidden_layers: int
    """Number of hidden layers in the model."""

    total_num_attention_heads: int
    """Number of attention heads in the model."""

    head_size: int
    """Head dimension of the model."""

    vocab_size: int
    """Vocabulary size of the model."""

    total_num_kv_heads: int
    """Number of key value heads in the model."""

    num_experts: int
    """Number of experts in the model."""

    quantization_config: dict[str, Any] | None
    """Quantization configuration dictionary containing quantization parameters."""

    is_deepseek_mla: bool
    """Whether the model is a DeepSeek MLA model."""

    derived_max_model_len_and_key: tuple[float, str | None]
    """Derived maximum model length and key from the hf config."""


_DEEPSEEK_MLA_TYPES = (
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "deepseek_mtp",
    "kimi_k2",
    "kimi_linear",
    "longcat_flash",
    "pangu_ultra_moe",
    "pangu_ultra_moe_mtp",
)
# The keys a model's maximum length may be read from, in vLLM's order.
MAX_LEN_KEYS = (
    "max_position_embeddings",  # OPT
    "n_positions",  # GPT-2
    "max_seq_len",  # MPT
    "seq_length",  # ChatGLM2
    "model_max_length",  # Command-R
    "max_target_positions",  # Whisper
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


class ModelArchConfigConvertorBase:
    def __init__(self, hf_config: HFConfig, hf_text_config: HFConfig) -> None:
        self.hf_config = hf_config
        self.hf_text_config = hf_text_config

    def get_architectures(self) -> list[str]:
        return self.hf_config.get("architectures", [])

    def get_num_hidden_layers(self) -> int:
        return self.hf_text_config.get("num_hidden_layers", 0)

    def get_total_num_attention_heads(self) -> int:
        return self.hf_text_config.get("num_attention_heads", 0)

    def get_vocab_size(self) -> int:
        return self.hf_text_config.get("vocab_size", 0)

    def get_hidden_size(self) -> int:
        return self.hf_text_config.get("hidden_size", 0)

    def get_head_size(self) -> int:
        text = self.hf_text_config
        if self.is_deepseek_mla():
            qk_rope_head_dim = text.get("qk_rope_head_dim", 0)
            if not int_flag("VLLM_MLA_DISABLE"):
                return _require(text, "kv_lora_rank") + qk_rope_head_dim
            qk_nope_head_dim = text.get("qk_nope_head_dim", 0)
            if qk_rope_head_dim and qk_nope_head_dim:
                return qk_rope_head_dim + qk_nope_head_dim
        # NOTE: Some configs may set head_dim=None in the config
        if text.get("head_dim") is not None:
            return text["head_dim"]
        # NOTE: Some models (such as PLaMo2.1) use `hidden_size_per_head`
        if text.get("hidden_size_per_head") is not None:
            return text["hidden_size_per_head"]
        return _require(text, "hidden_size") // _require(text, "num_attention_heads")

    def get_total_num_kv_heads(self) -> int:
        attributes = [
            # For Falcon:
            "n_head_kv",
            "num_kv_heads",
            # For LLaMA-2:
            "num_key_value_heads",
            # For ChatGLM:
            "multi_query_group_num",
        ]
        # For non-grouped-query attention models, the number of KV heads is
        # equal to the number of attention heads.
        return getattr_iter(
            self.hf_text_config,
            attributes,
            default_factory=lambda: _require(self.hf_text_config, "num_attention_heads"),
        )

    def get_num_experts(self) -> int:
        """Returns the number of experts in the model."""
        num_expert_names = [
            "num_experts",  # Jamba
            "moe_num_experts",  # Dbrx
            "n_routed_experts",  # DeepSeek
            "num_local_experts",  # Mixtral
        ]
        num_experts = getattr_iter(self.hf_text_config, num_expert_names, 0)
        if isinstance(num_experts, list):
            # Ernie VL's remote code uses list[int]...
            # The values are always the same so we just take the first one.
            return num_experts[0]
        # Coerce to 0 if explicitly set to None
        return num_experts or 0

    def _normalize_quantization_config(self, config: HFConfig) -> dict[str, Any] | None:
        quant_cfg = config.get("quantization_config")
        if quant_cfg is None:
            # compressed-tensors uses a "compression_config" key
            quant_cfg = config.get("compression_config")
        else:
            # Set quant_method for ModelOpt models.
            producer_name = quant_cfg.get("producer", {}).get("name")
            if producer_name == "modelopt":
                quant_algo = quant_cfg.get("quantization", {}).get("quant_algo")
                if quant_algo is not None:
                    quant_algo_upper = str(quant_algo).upper()
                    if quant_algo_upper in {"FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO"}:
                        quant_cfg["quant_method"] = "modelopt"
                    elif quant_algo_upper == "NVFP4":
                        quant_cfg["quant_method"] = "modelopt_fp4"
                    else:
                        raise ValueError(f"Unknown ModelOpt quant algo: {quant_algo}")
        if quant_cfg is not None:
            # Use the community standard 'quant_method'
            quant_method = quant_cfg.get("quant_method", "").lower()
            # Normalize library names
            quant_method = quant_method.replace("compressed_tensors", "compressed-tensors")
            quant_cfg["quant_method"] = quant_method
        return quant_cfg

    def get_quantization_config(self) -> dict[str, Any] | None:
        quant_cfg = self._normalize_quantization_config(self.hf_config)
        if quant_cfg is None and (text_config := self.hf_config.get("text_config")):
            # Check the text config as well for multi-modal models.
            quant_cfg = self._normalize_quantization_config(text_config)
        return quant_cfg

    def is_deepseek_mla(self) -> bool:
        text = self.hf_text_config
        if "model_type" not in text:
            return False
        if text["model_type"] in _DEEPSEEK_MLA_TYPES:
            return _require(text, "kv_lora_rank") is not None
        if text["model_type"] == "eagle":
            # if the model is an EAGLE module, check for the underlying architecture
            inner = _require(text, "model")
            return (
                inner.get("model_type") in ("deepseek_v2", "deepseek_v3", "deepseek_v32")
                and _require(text, "kv_lora_rank") is not None
            )
        return False

    def derive_max_model_len_and_key(self) -> tuple[float, str | None]:
        derived_max_model_len = float("inf")
        # Choose the smallest "max_length" from the possible keys
        max_len_key = None
        for key in MAX_LEN_KEYS:
            max_len = self.hf_text_config.get(key)
            if max_len is not None:
                if max_len < derived_max_model_len:
                    max_len_key = key
                derived_max_model_len = min(derived_max_model_len, max_len)
        # For Command-R / Cohere, Cohere2 / Aya Vision models
        if tmp_max_len := self.hf_text_config.get("model_max_length"):
            max_len_key = "model_max_length"
            derived_max_model_len = tmp_max_len
        return derived_max_model_len, max_len_key

    def convert(self) -> ModelArchitectureConfig:
        return ModelArchitectureConfig(
            architectures=self.get_architectures(),
            model_type=_require(self.hf_config, "model_type"),
            text_model_type=self.hf_text_config.get("model_type"),
            hidden_size=self.get_hidden_size(),
            total_num_hidden_layers=self.get_num_hidden_layers(),
            total_num_attention_heads=self.get_total_num_attention_heads(),
            head_size=self.get_head_size(),
            vocab_size=self.get_vocab_size(),
            total_num_kv_heads=self.get_total_num_kv_heads(),
            num_experts=self.get_num_experts(),
            quantization_config=self.get_quantization_config(),
            is_deepseek_mla=self.is_deepseek_mla(),
            derived_max_model_len_and_key=self.derive_max_model_len_and_key(),
        )


class _NoAttentionHeadsConvertor(ModelArchConfigConvertorBase):
    """Mamba, Terratorch and Medusa: no attention heads."""

    def get_head_size(self) -> int:
        return 0

    def get_total_num_kv_heads(self) -> int:
        return 0


class Zamba2ModelArchConfigConvertor(ModelArchConfigConvertorBase):
    def get_head_size(self) -> int:
        return self.hf_text_config.get("attention_head_dim", 0)


class FalconModelArchConfigConvertor(ModelArchConfigConvertorBase):
    def get_total_num_kv_heads(self) -> int:
        # NOTE: for falcon, when new_decoder_architecture is True, the
        # multi_query flag is ignored and we use n_head_kv for the number of
        # KV heads.
        new_decoder_arch_falcon = self.hf_text_config.get("new_decoder_architecture", False)
        if not new_decoder_arch_falcon and self.hf_text_config.get("multi_query", False):
            # Multi-query attention, only one KV head.
            return 1
        return super().get_total_num_kv_heads()


class MPTModelArchConfigConvertor(ModelArchConfigConvertorBase):
    def get_total_num_kv_heads(self) -> int:
        attn_config = _require(self.hf_text_config, "attn_config")
        if "kv_n_heads" in attn_config:
            return attn_config["kv_n_heads"]
        return _require(self.hf_text_config, "num_attention_heads")


class DbrxModelArchConfigConvertor(ModelArchConfigConvertorBase):
    def get_total_num_kv_heads(self) -> int:
        attn_config = _require(self.hf_text_config, "attn_config")
        return attn_config.get("kv_n_heads", _require(self.hf_text_config, "num_attention_heads"))


class NemotronNasModelArchConfigConvertor(ModelArchConfigConvertorBase):
    def get_total_num_kv_heads(self) -> int:
        for block in _require(self.hf_text_config, "block_configs"):
            if not block["attention"]["no_op"]:
                heads: int = _require(self.hf_text_config, "num_attention_heads")
                return heads // block["attention"]["n_heads_in_group"]
        raise RuntimeError(
            "Could not determine the number of key-value attention heads "
            "from model configuration. "
            f"Architecture: {self.get_architectures()}. "
            "This usually indicates an unsupported model architecture or "
            "missing configuration. "
            "Please check if your model is supported at: "
            "https://docs.vllm.ai/en/latest/models/supported_models.html"
        )


def _mtp_convertor(default_layers: int) -> type[ModelArchConfigConvertorBase]:
    """The multi-token-prediction convertors: the layers are the next-n prediction layers."""

    class MTPModelArchConfigConvertor(ModelArchConfigConvertorBase):
        def get_num_hidden_layers(self) -> int:
            return self.hf_text_config.get("num_nextn_predict_layers", default_layers)

    return MTPModelArchConfigConvertor


_MTP = _mtp_convertor(0)

# hf_config.model_type -> convertor class
MODEL_ARCH_CONFIG_CONVERTORS: dict[str, type[ModelArchConfigConvertorBase]] = {
    "mamba": _NoAttentionHeadsConvertor,
    "falcon_mamba": _NoAttentionHeadsConvertor,
    "timm_wrapper": _NoAttentionHeadsConvertor,
    "medusa": _NoAttentionHeadsConvertor,
    "zamba2": Zamba2ModelArchConfigConvertor,
    "mpt": MPTModelArchConfigConvertor,
    "dbrx": DbrxModelArchConfigConvertor,
    "falcon": FalconModelArchConfigConvertor,
    "RefinedWeb": FalconModelArchConfigConvertor,
    "RefinedWebModel": FalconModelArchConfigConvertor,
    "nemotron-nas": NemotronNasModelArchConfigConvertor,
    "deepseek_mtp": _MTP,
    "qwen3_next_mtp": _MTP,
    "mimo_mtp": _MTP,
    "glm4_moe_mtp": _MTP,
    "ernie_mtp": _MTP,
    "pangu_ultra_moe_mtp": _MTP,
    "longcat_flash_mtp": _mtp_convertor(1),
}


def model_arch_config(hf_config: HFConfig, hf_text_config: HFConfig) -> ModelArchitectureConfig:
    convertor_cls = MODEL_ARCH_CONFIG_CONVERTORS.get(
        _require(hf_config, "model_type"), ModelArchConfigConvertorBase
    )
    return convertor_cls(hf_config, hf_text_config).convert()
