"""`ModelConfig`: the few model facts vLLM's compilation planning reads, from a local `config.json`.

Only a folder's `config.json` is read (never the hub, never weights or tokenizers). The folder must be
one bundled with the package (`tiny-llama`) or lie under the operator's allowed roots or
`COMPILATION_BRIDGE_MODEL_ROOTS`, so a caller cannot probe the file system through it.
"""

import json
import os
from dataclasses import field
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from compilation_bridge.settings import get_settings
from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors, vllm_name

MODEL_ROOTS_ENV = "COMPILATION_BRIDGE_MODEL_ROOTS"
BUNDLED_MODELS = Path(__file__).parent / "models"
MAX_CONFIG_BYTES = 1 << 20

_NUM_EXPERT_KEYS = ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")
_DEEPSEEK_MLA_TYPES = (
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "deepseek_mtp",
    "kimi_k2",
    "longcat_flash",
)
_MM_PREFIX_LM_TYPES = ("gemma3", "paligemma")
_DTYPE_ITEMSIZE = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}


def _readable_roots() -> list[Path]:
    configured = os.environ.get(MODEL_ROOTS_ENV, "").split(os.pathsep)
    extra = [Path(p).expanduser().resolve() for p in configured if p]
    return [BUNDLED_MODELS.resolve(), *get_settings().allowed_roots, *extra]


def resolve_model_dir(model: str) -> Path:
    bundled = BUNDLED_MODELS / model
    folder = bundled if "/" not in model and bundled.is_dir() else Path(model).expanduser()
    folder = folder.resolve()
    if not any(folder.is_relative_to(root) for root in _readable_roots()):
        raise ValueError(
            f"model {model!r} is not a bundled model and not under an allowed root "
            f"(set {MODEL_ROOTS_ENV}); only local folders with a config.json are read, never the hub"
        )
    if not (folder / "config.json").is_file():
        raise ValueError(f"model {model!r}: no config.json in that folder (the hub is never consulted)")
    return folder


def load_hf_config(model: str) -> dict[str, Any]:
    path = resolve_model_dir(model) / "config.json"
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ValueError(f"model {model!r}: config.json is larger than {MAX_CONFIG_BYTES} bytes")
    config = json.loads(path.read_text())
    if not isinstance(config, dict):
        raise ValueError(f"model {model!r}: config.json must hold a JSON object")
    return config


@vllm_name("vllm.config.model.ModelConfig")
@dataclass(config=ConfigDict(arbitrary_types_allowed=True))
class ModelConfig:
    """vLLM's ModelConfig field list (same names, order and defaults); only `config.json` is read.

    `dtype` stays a name ("bfloat16") where vLLM holds a torch.dtype, so config work never imports torch.
    """

    model: str = "Qwen/Qwen3-0.6B"
    model_weights: str = ""
    runner: Literal["auto", "generate", "pooling", "draft"] = "auto"
    convert: str = "auto"
    tokenizer: str = Field(default=None)
    tokenizer_mode: str = "auto"
    trust_remote_code: bool = False
    dtype: str = "auto"
    seed: int = 0
    hf_config: dict[str, Any] = field(init=False)
    hf_text_config: dict[str, Any] = field(init=False)
    hf_config_path: str | None = None
    allowed_local_media_path: str = ""
    allowed_media_domains: list[str] | None = None
    revision: str | None = None
    code_revision: str | None = None
    tokenizer_revision: str | None = None
    max_model_len: int = Field(default=None)
    spec_target_max_model_len: int | None = None
    quantization: str | None = None
    allow_deprecated_quantization: bool = False
    enforce_eager: bool = False
    enable_return_routed_experts: bool = False
    max_logprobs: int = 20
    logprobs_mode: str = "raw_logprobs"
    disable_sliding_window: bool = False
    disable_cascade_attn: bool = False
    skip_tokenizer_init: bool = False
    enable_prompt_embeds: bool = False
    served_model_name: str | list[str] | None = None
    config_format: str = "auto"
    hf_token: bool | str | None = None
    hf_overrides: dict[str, Any] = field(default_factory=dict)
    logits_processor_pattern: str | None = None
    generation_config: str = "auto"
    override_generation_config: dict[str, Any] = field(default_factory=dict)
    enable_sleep_mode: bool = False
    model_impl: str = "auto"
    override_attention_dtype: str | None = None
    logits_processors: list[str] | None = None
    io_processor_plugin: str | None = None
    pooler_config: dict[str, Any] | None = None
    multimodal_config: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.hf_config = load_hf_config(self.model)
        self.hf_text_config = self.hf_config
        if self.tokenizer is None:
            self.tokenizer = self.model
        if self.served_model_name is None:
            self.served_model_name = self.model
        if self.max_model_len is None:
            self.max_model_len = int(self.hf_config.get("max_position_embeddings", 2048))
        if self.dtype == "auto":
            self.dtype = str(self.hf_config.get("torch_dtype") or self.hf_config.get("dtype") or "float32")
        if self.runner == "pooling" and self.pooler_config is None:
            self.pooler_config = {}

    @property
    def architectures(self) -> list[str]:
        return list(self.hf_config.get("architectures") or [])

    @property
    def architecture(self) -> str | None:
        return self.architectures[0] if self.architectures else None

    @property
    def is_encoder_decoder(self) -> bool:
        return bool(self.hf_config.get("is_encoder_decoder", False))

    @property
    def is_moe(self) -> bool:
        experts = next((self.hf_config[k] for k in _NUM_EXPERT_KEYS if k in self.hf_config), 0)
        if isinstance(experts, list):
            experts = experts[0] if experts else 0
        return (experts or 0) > 0

    @property
    def use_mla(self) -> bool:
        model_type = self.hf_config.get("model_type")
        return model_type in _DEEPSEEK_MLA_TYPES and self.hf_config.get("kv_lora_rank") is not None

    @property
    def is_mm_prefix_lm(self) -> bool:
        return self.hf_config.get("model_type") in _MM_PREFIX_LM_TYPES

    @property
    def attention_chunk_size(self) -> int | None:
        return self.hf_config.get("attention_chunk_size")

    @property
    def dtype_itemsize(self) -> int:
        return _DTYPE_ITEMSIZE.get(self.dtype, 2)

    def get_hidden_size(self) -> int:
        return int(self.hf_config.get("hidden_size", 0))

    def get_total_num_attention_heads(self) -> int:
        return int(self.hf_config.get("num_attention_heads", 0))

    def get_total_num_kv_heads(self) -> int:
        return int(self.hf_config.get("num_key_value_heads", self.get_total_num_attention_heads()))

    def verify_with_parallel_config(self, parallel_config: Any) -> None:
        total_heads = self.get_total_num_attention_heads()
        tp = parallel_config.tensor_parallel_size
        if total_heads % tp != 0:
            raise ValueError(
                f"Total number of attention heads ({total_heads}) "
                f"must be divisible by tensor parallel size ({tp})."
            )
        dcp = parallel_config.decode_context_parallel_size
        if dcp > 1 and not self.use_mla:
            kv_heads = self.get_total_num_kv_heads()
            assert tp > kv_heads, (
                f"tensor parallel size {tp} must be greater than total num kv heads {kv_heads} "
                "when enable decode context parallel for GQA/MQA"
            )
            max_dcp_size = tp // kv_heads
            assert dcp <= max_dcp_size, (
                f"decode context parallel size must less than or equal to (tensor parallel size {tp} "
                f"// total num kv heads {kv_heads}) = {max_dcp_size}, but got {dcp}"
            )
            num_q_per_kv = total_heads // kv_heads
            assert num_q_per_kv % dcp == 0, (
                f"Total number of q per kv attn heads ({num_q_per_kv}) must be divisible by dcp world "
                f"size when enable decode context parallel for GQA ({dcp})."
            )

    def compute_hash(self) -> str:
        # vLLM hashes its full ModelConfig including the transformers config object; this hash covers
        # the same model facts but is not byte-identical to vLLM's (see the README).
        ignored = {"tokenizer", "seed", "enforce_eager", "skip_tokenizer_init"}
        return hash_factors(get_hash_factors(self, ignored))
