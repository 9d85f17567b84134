"""`ModelConfig`: the few model facts vLLM's compilation planning reads, from a local `config.json`.

Only a folder's `config.json` is read (never the hub, never weights or tokenizers). The folder must be
one bundled with the package (`tiny-llama`) or lie under the operator's allowed roots or
`COMPILATION_BRIDGE_MODEL_ROOTS`, so a caller cannot probe the file system through it; `config.json` is
opened without following a symlink out of those roots (`compilation_bridge.safe_files`).
"""

import json
import os
from dataclasses import field
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from compilation_bridge.safe_files import PathNotAllowedError, read_bytes
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
_MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
_FLOAT16_NOT_SUPPORTED_MODELS = {
    name: "Numerical instability. Please use bfloat16 or float32 instead."
    for name in ("gemma2", "gemma3", "gemma3_text", "plamo2", "glm4")
}
_LONG_MAX_MODEL_LEN_WARNING = (
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme "
    "caution. If the model uses relative position encoding (RoPE), "
    "positions exceeding derived_max_model_len lead to nan. If the "
    "model uses absolute position encoding, positions exceeding "
    "derived_max_model_len will cause a CUDA array out-of-bounds "
    "error."
)


@vllm_name("torch.dtype")  # hashed as vLLM hashes a torch.dtype: by its text
class DType:
    """A torch dtype by name, printed as torch prints it, so config work never imports torch."""

    __slots__ = ("itemsize", "name")

    def __init__(self, name: str, itemsize: int) -> None:
        self.name = name
        self.itemsize = itemsize

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    __str__ = __repr__


FLOAT32, FLOAT16, BFLOAT16 = DType("float32", 4), DType("float16", 2), DType("bfloat16", 2)
# vLLM's _STR_DTYPE_TO_TORCH_DTYPE.
STR_TO_DTYPE = {
    "half": FLOAT16,
    "float16": FLOAT16,
    "float": FLOAT32,
    "float32": FLOAT32,
    "bfloat16": BFLOAT16,
}
# What vLLM's CPU (x86/aarch64) and CUDA (sm_80 and later) platforms support, preferred first.
SUPPORTED_DTYPES = (BFLOAT16, FLOAT16, FLOAT32)


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
    try:
        # Resolved and re-checked against the roots as it is opened: a config.json that is a symlink
        # out of them (planted after resolve_model_dir looked) is refused, not read.
        raw = read_bytes(path, max_bytes=MAX_CONFIG_BYTES, roots=_readable_roots(), follow=True)
    except PathNotAllowedError as e:
        raise ValueError(f"model {model!r}: config.json is not readable here: {e}") from e
    except ValueError as e:
        raise ValueError(f"model {model!r}: config.json is larger than {MAX_CONFIG_BYTES} bytes") from e
    config = json.loads(raw)
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
    dtype: str | DType = "auto"
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
        self.runner_type = "generate" if self.runner == "auto" else self.runner
        if self.runner_type == "pooling" and self.pooler_config is None:
            self.pooler_config = {}
        self.dtype = self._resolve_dtype(self.dtype)
        self.max_model_len = self._verify_max_len(self.max_model_len)

    def _config_dtype(self) -> DType:
        name = self.hf_config.get("torch_dtype") or self.hf_config.get("dtype") or "float32"
        return STR_TO_DTYPE.get(str(name).removeprefix("torch."), FLOAT32)

    def _resolve_dtype(self, dtype: str | DType) -> DType:
        """vLLM's `_get_and_verify_dtype` for the platforms modelled here."""
        model_type = self.hf_config.get("model_type")
        if isinstance(dtype, DType):
            resolved = dtype
        elif dtype.lower() == "auto":
            config_dtype = self._config_dtype()
            supported = [
                d
                for d in SUPPORTED_DTYPES
                if not (model_type in _FLOAT16_NOT_SUPPORTED_MODELS and d == FLOAT16)
            ]
            preferred = FLOAT16 if self.runner_type == "pooling" and FLOAT16 in supported else supported[0]
            resolved = preferred if config_dtype == FLOAT32 else config_dtype
        elif dtype.lower() in STR_TO_DTYPE:
            resolved = STR_TO_DTYPE[dtype.lower()]
        else:
            raise ValueError(f"Unknown dtype: {dtype.lower()!r}")
        if model_type in _FLOAT16_NOT_SUPPORTED_MODELS and resolved == FLOAT16:
            reason = _FLOAT16_NOT_SUPPORTED_MODELS[model_type]
            raise ValueError(f"The model type {model_type!r} does not support float16. Reason: {reason}")
        return resolved

    def _derived_max_len(self) -> tuple[float, str | None]:
        derived: float = float("inf")
        key = None
        for name in _MAX_LEN_KEYS:
            value = self.hf_config.get(name)
            if value is not None:
                if value < derived:
                    key = name
                derived = min(derived, value)
        if model_max_length := self.hf_config.get("model_max_length"):
            key, derived = "model_max_length", model_max_length
        rope = self.hf_config.get("rope_scaling") or self.hf_config.get("rope_parameters")
        if rope is None and "rope_theta" in self.hf_config:
            rope = {"rope_type": "default"}  # transformers derives rope_parameters from rope_theta
        gemma3 = "gemma3" in str(self.hf_config.get("model_type"))
        if isinstance(rope, dict) and derived != float("inf") and not gemma3:
            rope_type = rope.get("rope_type") or rope.get("type") or "default"
            if rope_type not in ("su", "longrope", "llama3"):
                if rope_type == "yarn":
                    derived = rope["original_max_position_embeddings"]
                derived *= rope.get("factor", 1.0)
        return derived, key

    def _verify_max_len(self, max_model_len: int | None) -> int:
        """vLLM's `_get_and_verify_max_len`: the user's length may not exceed the model's."""
        derived, key = self._derived_max_len()
        if derived == float("inf"):
            return max_model_len if max_model_len is not None else 2048
        if max_model_len is None or max_model_len == -1:
            return int(derived)
        if max_model_len > derived:
            model_max_length = self.hf_config.get("model_max_length")
            if model_max_length is None or max_model_len > model_max_length:
                msg = (
                    f"User-specified max_model_len ({max_model_len}) is greater "
                    f"than the derived max_model_len ({key}="
                    f"{derived} or model_max_length="
                    f"{model_max_length} in model's config.json)."
                )
                if not int(os.getenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0")):
                    raise ValueError(
                        f"{msg} To allow overriding this maximum, set "
                        f"the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. {_LONG_MAX_MODEL_LEN_WARNING}"
                    )
        return int(max_model_len)

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

    def get_hidden_size(self) -> int:
        return int(self.hf_config.get("hidden_size", 0))

    def get_head_size(self) -> int:
        for key in ("head_dim", "hidden_size_per_head"):
            if self.hf_config.get(key) is not None:
                return int(self.hf_config[key])
        return self.get_hidden_size() // self.get_total_num_attention_heads()

    def get_vocab_size(self) -> int:
        return int(self.hf_config.get("vocab_size", 0))

    def get_total_num_hidden_layers(self) -> int:
        return int(self.hf_config.get("num_hidden_layers", 0))

    def get_num_attention_heads(self, parallel_config: Any) -> int:
        return self.get_total_num_attention_heads() // parallel_config.tensor_parallel_size

    def get_num_kv_heads(self, parallel_config: Any) -> int:
        return max(1, self.get_total_num_kv_heads() // parallel_config.tensor_parallel_size)

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
