"""`ModelConfig`: the few model facts vLLM's compilation planning reads, from a local `config.json`.

Only a folder's `config.json` is read (never the hub, never weights or tokenizers). The folder must be
one bundled with the package (`tiny-llama`) or lie under the operator's allowed roots or
`COMPILATION_BRIDGE_MODEL_ROOTS`, so a caller cannot probe the file system through it; `config.json` is
opened without following a symlink out of those roots (`compilation_bridge.safe_files`).
"""

import json
import os
from collections.abc import Callable
from dataclasses import InitVar, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator
from pydantic.dataclasses import dataclass

from compilation_bridge.safe_files import PathNotAllowedError, read_bytes
from compilation_bridge.settings import MODEL_ROOTS_ENV, get_settings, model_roots_setting
from compilation_bridge.vllm_config.attention import AttentionBackendEnum
from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors, vllm_name
from compilation_bridge.vllm_config.logs import logger
from compilation_bridge.vllm_config.multimodal import MMCacheType, MMEncoderTPMode, MultiModalConfig
from compilation_bridge.vllm_config.pooler import PoolerConfig, SequencePoolingType, TokenPoolingType

BUNDLED_MODELS = Path(__file__).parent / "models"
# vLLM's default pooling types of a model class that declares none (`interfaces_base.default_pooling_type`).
DEFAULT_SEQ_POOLING_TYPE: SequencePoolingType = "LAST"
DEFAULT_TOK_POOLING_TYPE: TokenPoolingType = "ALL"
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
    return [BUNDLED_MODELS.resolve(), *get_settings().allowed_roots, *model_roots_setting()]


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
    """Configuration for the model."""

    # vLLM's ModelConfig field list (same names, order and defaults); only `config.json` is read.
    # `dtype` stays a name ("bfloat16") where vLLM holds a torch.dtype, so config work never imports torch.

    model: str = "Qwen/Qwen3-0.6B"
    """Name or path of the Hugging Face model to use. It is also used as the
    content for `model_name` tag in metrics output when `served_model_name` is
    not specified."""
    model_weights: str = ""
    """Original model weights path. Used when the model is pulled from object
    storage (e.g., RunAI) to preserve the original URI while `model` points to
    the local directory."""
    runner: Literal["auto", "generate", "pooling", "draft"] = "auto"
    """The type of model runner to use. Each vLLM instance only supports one
    model runner, even if the same model can be used for multiple types."""
    convert: str = "auto"
    """Convert the model using adapters defined in
    [vllm.model_executor.models.adapters][]. The most common use case is to
    adapt a text generation model to be used for pooling tasks."""
    tokenizer: str = Field(default=None)
    """Name or path of the Hugging Face tokenizer to use. If unspecified, model
    name or path will be used."""
    tokenizer_mode: str = "auto"
    """Tokenizer mode:\n
    - "auto" will use the tokenizer from `mistral_common` for Mistral models
    if available, otherwise it will use the "hf" tokenizer.\n
    - "hf" will use the fast tokenizer if available.\n
    - "slow" will always use the slow tokenizer.\n
    - "mistral" will always use the tokenizer from `mistral_common`.\n
    - "deepseek_v32" will always use the tokenizer from `deepseek_v32`.\n
    - Other custom values can be supported via plugins."""
    trust_remote_code: bool = False
    """Trust remote code (e.g., from HuggingFace) when downloading the model
    and tokenizer."""
    dtype: str | DType = "auto"
    """Data type for model weights and activations:\n
    - "auto" will use FP16 precision for FP32 and FP16 models, and BF16
    precision for BF16 models.\n
    - "half" for FP16. Recommended for AWQ quantization.\n
    - "float16" is the same as "half".\n
    - "bfloat16" for a balance between precision and range.\n
    - "float" is shorthand for FP32 precision.\n
    - "float32" for FP32 precision."""
    seed: int = 0
    """Random seed for reproducibility.

    We must set the global seed because otherwise,
    different tensor parallel workers would sample different tokens,
    leading to inconsistent results."""
    hf_config: dict[str, Any] = field(init=False)
    """The Hugging Face config of the model."""
    hf_text_config: dict[str, Any] = field(init=False)
    """The Hugging Face config of the text model (same as hf_config for text models)."""
    hf_config_path: str | None = None
    """Name or path of the Hugging Face config to use. If unspecified, model
    name or path will be used."""
    allowed_local_media_path: str = ""
    """Allowing API requests to read local images or videos from directories
    specified by the server file system. This is a security risk. Should only
    be enabled in trusted environments."""
    allowed_media_domains: list[str] | None = None
    """If set, only media URLs that belong to this domain can be used for
    multi-modal inputs. """
    revision: str | None = None
    """The specific model version to use. It can be a branch name, a tag name,
    or a commit id. If unspecified, will use the default version."""
    code_revision: str | None = None
    """The specific revision to use for the model code on the Hugging Face Hub.
    It can be a branch name, a tag name, or a commit id. If unspecified, will
    use the default version."""
    tokenizer_revision: str | None = None
    """The specific revision to use for the tokenizer on the Hugging Face Hub.
    It can be a branch name, a tag name, or a commit id. If unspecified, will
    use the default version."""
    max_model_len: int = Field(default=None)
    """Model context length (prompt and output). If unspecified, will be
    automatically derived from the model config.

    When passing via `--max-model-len`, supports k/m/g/K/M/G in human-readable
    format. Examples:\n
    - 1k -> 1000\n
    - 1K -> 1024\n
    - 25.6k -> 25,600\n
    - -1 or 'auto' -> Automatically choose the maximum model length that fits in
    GPU memory. This will use the model's maximum context length if it fits,
    otherwise it will find the largest length that can be accommodated."""
    spec_target_max_model_len: int | None = None
    """Specify the maximum length for spec decoding draft models."""
    quantization: str | None = None
    """Method used to quantize the weights. If `None`, we first check the
    `quantization_config` attribute in the model config file. If that is
    `None`, we assume the model weights are not quantized and use `dtype` to
    determine the data type of the weights."""
    allow_deprecated_quantization: bool = False
    """Whether to allow deprecated quantization methods."""
    enforce_eager: bool = False
    """Whether to always use eager-mode PyTorch. If True, we will disable CUDA
    graph and always execute the model in eager mode. If False, we will use
    CUDA graph and eager execution in hybrid for maximal performance and
    flexibility."""
    enable_return_routed_experts: bool = False
    """Whether to return routed experts."""
    max_logprobs: int = 20
    """Maximum number of log probabilities to return when `logprobs` is
    specified in `SamplingParams`. The default value comes the default for the
    OpenAI Chat Completions API. -1 means no cap, i.e. all (output_length *
    vocab_size) logprobs are allowed to be returned and it may cause OOM."""
    logprobs_mode: str = "raw_logprobs"
    """Indicates the content returned in the logprobs and prompt_logprobs.
    Supported mode:
    1) raw_logprobs, 2) processed_logprobs, 3) raw_logits, 4) processed_logits.
    Raw means the values before applying any logit processors, like bad words.
    Processed means the values after applying all processors, including
    temperature and top_k/top_p.
    """
    disable_sliding_window: bool = False
    """Whether to disable sliding window. If True, we will disable the sliding
    window functionality of the model, capping to sliding window size. If the
    model does not support sliding window, this argument is ignored."""
    disable_cascade_attn: bool = False
    """Disable cascade attention for V1. While cascade attention does not
    change the mathematical correctness, disabling it could be useful for
    preventing potential numerical issues. Note that even if this is set to
    False, cascade attention will be only used when the heuristic tells that
    it's beneficial."""
    skip_tokenizer_init: bool = False
    """Skip initialization of tokenizer and detokenizer. Expects valid
    `prompt_token_ids` and `None` for prompt from the input. The generated
    output will contain token ids."""
    enable_prompt_embeds: bool = False
    """If `True`, enables passing text embeddings as inputs via the
    `prompt_embeds` key.

    WARNING: The vLLM engine may crash if incorrect shape of embeddings is passed.
    Only enable this flag for trusted users!"""
    served_model_name: str | list[str] | None = None
    """The model name(s) used in the API. If multiple names are provided, the
    server will respond to any of the provided names. The model name in the
    model field of a response will be the first name in this list. If not
    specified, the model name will be the same as the `--model` argument. Noted
    that this name(s) will also be used in `model_name` tag content of
    prometheus metrics, if multiple names provided, metrics tag will take the
    first one."""
    config_format: str = "auto"
    """The format of the model config to load:\n
    - "auto" will try to load the config in hf format if available after trying
    to load in mistral format.\n
    - "hf" will load the config in hf format.\n
    - "mistral" will load the config in mistral format."""
    hf_token: bool | str | None = None
    """The token to use as HTTP bearer authorization for remote files . If
    `True`, will use the token generated when running `huggingface-cli login`
    (stored in `~/.huggingface`)."""
    hf_overrides: dict[str, Any] = field(default_factory=dict)
    """If a dictionary, contains arguments to be forwarded to the Hugging Face
    config. If a callable, it is called to update the HuggingFace config."""
    logits_processor_pattern: str | None = None
    """Optional regex pattern specifying valid logits processor qualified names
    that can be passed with the `logits_processors` extra completion argument.
    Defaults to `None`, which allows no processors."""
    generation_config: str = "auto"
    """The folder path to the generation config. Defaults to `"auto"`, the
    generation config will be loaded from model path. If set to `"vllm"`, no
    generation config is loaded, vLLM defaults will be used. If set to a folder
    path, the generation config will be loaded from the specified folder path.
    If `max_new_tokens` is specified in generation config, then it sets a
    server-wide limit on the number of output tokens for all requests."""
    override_generation_config: dict[str, Any] = field(default_factory=dict)
    """Overrides or sets generation config. e.g. `{"temperature": 0.5}`. If
    used with `--generation-config auto`, the override parameters will be
    merged with the default config from the model. If used with
    `--generation-config vllm`, only the override parameters are used."""
    enable_sleep_mode: bool = False
    """Enable sleep mode for the engine (only cuda and
    hip platforms are supported)."""
    model_impl: str = "auto"
    """Which implementation of the model to use:\n
    - "auto" will try to use the vLLM implementation, if it exists, and fall
    back to the Transformers implementation if no vLLM implementation is
    available.\n
    - "vllm" will use the vLLM model implementation.\n
    - "transformers" will use the Transformers model implementation.\n
    - "terratorch" will use the TerraTorch model implementation.
    """
    override_attention_dtype: str | None = None
    """Override dtype for attention"""
    logits_processors: list[str] | None = None
    """One or more logits processors' fully-qualified class names or class
    definitions"""
    io_processor_plugin: str | None = None
    """IOProcessor plugin name to load at model startup"""
    pooler_config: PoolerConfig | None = None
    """Pooler config which controls the behaviour of output pooling in pooling
    models."""
    multimodal_config: MultiModalConfig | None = None
    """Configuration for multimodal model. If `None`, this will be inferred
    from the architecture of `self.model`."""
    # vLLM builds its MultiModalConfig from these when its model registry calls the architecture
    # multimodal; this worker infers none (docs/configuration.md), so they are validated and then unused,
    # and read back as the class's None, as in vLLM for a text model.
    limit_mm_per_prompt: InitVar[dict[str, int | dict[str, int]] | None] = None
    enable_mm_embeds: InitVar[bool | None] = None
    media_io_kwargs: InitVar[dict[str, dict[str, Any]] | None] = None
    mm_processor_kwargs: InitVar[dict[str, Any] | None] = None
    mm_processor_cache_gb: InitVar[float | None] = None
    mm_processor_cache_type: InitVar[MMCacheType | None] = None
    mm_shm_cache_max_object_size_mb: InitVar[int | None] = None
    mm_encoder_tp_mode: InitVar[MMEncoderTPMode | None] = None
    mm_encoder_attn_backend: InitVar[AttentionBackendEnum | str | None] = None
    interleave_mm_strings: InitVar[bool | None] = None
    skip_mm_profiling: InitVar[bool | None] = None
    video_pruning_rate: InitVar[float | None] = None

    @field_validator("tokenizer", "max_model_len", mode="wrap")
    @classmethod
    def _skip_none_validation(cls, value: Any, handler: Callable[[Any], Any]) -> Any:
        """Skip validation if the value is `None` when initialisation is delayed."""
        if value is None:
            return value
        return handler(value)

    def __post_init__(self, *multimodal_init_vars: object) -> None:
        self.hf_config = load_hf_config(self.model)
        self.hf_text_config = self.hf_config
        if self.tokenizer is None:
            self.tokenizer = self.model
        if self.served_model_name is None:
            self.served_model_name = self.model
        self.runner_type = "generate" if self.runner == "auto" else self.runner
        # Resolved once, as vLLM resolves it: a config replaced later (an EAGLE head's) keeps it.
        self._architecture = self.architectures[0] if self.architectures else None
        if self.runner_type == "pooling":
            self._init_pooler_config()
        self.dtype = self._resolve_dtype(self.dtype)
        self.max_model_len = self._verify_max_len(self.max_model_len)
        if self.is_encoder_decoder:
            # Set on the instance over the init var's class default, as vLLM does (mypy sees no attribute).
            self.mm_processor_cache_gb = 0  # type: ignore[attr-defined]
            logger.info("Encoder-decoder model detected, disabling mm processor cache.")

    def _init_pooler_config(self) -> None:
        """vLLM's pooler set-up for the pooling runner: the caller's settings, the rest from the model.

        vLLM first fills unset fields from a sentence-transformers pooling config in the model folder; only
        `config.json` is read here. The default pooling types are those of the model class: LAST and ALL
        for the generative architectures this worker plans, converted to pooling as vLLM converts them."""
        if self.pooler_config is None:
            self.pooler_config = PoolerConfig()
        if self.pooler_config.seq_pooling_type is None:
            self.pooler_config.seq_pooling_type = DEFAULT_SEQ_POOLING_TYPE
        if self.pooler_config.tok_pooling_type is None:
            self.pooler_config.tok_pooling_type = DEFAULT_TOK_POOLING_TYPE

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
            if max_model_len is not None:
                return max_model_len
            # A speculative draft without a length of its own takes its target's.
            return self.spec_target_max_model_len if self.spec_target_max_model_len is not None else 2048
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
        return self._architecture

    @property
    def is_matryoshka(self) -> bool:
        return bool(self.hf_config.get("matryoshka_dimensions")) or self.hf_config.get("is_matryoshka", False)

    @property
    def matryoshka_dimensions(self) -> Any:
        return self.hf_config.get("matryoshka_dimensions")

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
    def is_multimodal_model(self) -> bool:
        return self.multimodal_config is not None

    def get_multimodal_config(self) -> MultiModalConfig:
        """
        Get the multimodal configuration of the model.

        Raises:
            ValueError: If the model is not multimodal.
        """
        if self.multimodal_config is None:
            raise ValueError("The model is not multimodal.")
        return self.multimodal_config

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
        # the same model facts but is not byte-identical to vLLM's (see docs/configuration.md).
        ignored = {"tokenizer", "seed", "enforce_eager", "skip_tokenizer_init", "multimodal_config"}
        return hash_factors(get_hash_factors(self, ignored))
