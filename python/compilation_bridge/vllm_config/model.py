"""`ModelConfig`: vLLM 0.14.0's model configuration, from a local model folder.

A folder's `config.json` is read, and where vLLM reads them its `generation_config.json` and
sentence-transformers files (`model_files`: never the hub, never weights or tokenizers, only folders under
the roots the worker allows). What vLLM answers from its model registry (the model class an architecture
maps to and that class's flags) comes from the declared table of `model_registry`; the architecture facts
(sizes, heads, experts, quantization config, length keys) from `model_arch`.

Here the model's config (`hf_config`) is a dict where vLLM holds a transformers `PretrainedConfig`: the
attributes of the object vLLM would load (its class's defaults for keys `config.json` leaves out, its
derived attributes, its attribute aliases: `hf_config_json.hf_config_dict`), or, for a model type that
object cannot be built for here, the dict of `config.json` itself (docs/configuration.md). `compute_hash`
hashes the object's JSON, as vLLM does (`hf_config_json`).
"""

import copy
import warnings
from collections.abc import Callable
from dataclasses import InitVar, field
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.dataclasses import dataclass

from compilation_bridge.settings import MODEL_ROOTS_ENV
from compilation_bridge.vllm_config import model_registry
from compilation_bridge.vllm_config.attention import AttentionBackendEnum
from compilation_bridge.vllm_config.env import int_flag
from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors, vllm_name
from compilation_bridge.vllm_config.hf_config import (
    get_hf_text_config,
    get_pp_indices,
    get_text_config,
    is_rope_parameters_nested,
    layers_block_type,
    patch_rope_parameters,
    uses_mrope,
)
from compilation_bridge.vllm_config.hf_config_json import hf_config_dict, hf_config_jsons, split_overrides
from compilation_bridge.vllm_config.limits import check_config_counts
from compilation_bridge.vllm_config.logs import logger
from compilation_bridge.vllm_config.model_arch import (
    HFConfig,
    ModelArchitectureConfig,
    getattr_iter,
    model_arch_config,
)
from compilation_bridge.vllm_config.model_files import (
    BUNDLED_MODELS,
    get_pooling_config,
    get_sentence_transformer_tokenizer_config,
    load_hf_config,
    read_json,
    resolve_model_dir,
    try_get_dense_modules,
    try_get_generation_config,
    try_get_tokenizer_config,
)
from compilation_bridge.vllm_config.model_registry import (
    ConvertType,
    RunnerType,
    try_match_architecture_defaults,
)
from compilation_bridge.vllm_config.multimodal import MMCacheType, MMEncoderTPMode, MultiModalConfig
from compilation_bridge.vllm_config.platforms import get_platform
from compilation_bridge.vllm_config.pooler import PoolerConfig

__all__ = [
    "BUNDLED_MODELS",
    "MODEL_ROOTS_ENV",
    "STR_TO_DTYPE",
    "DType",
    "ModelConfig",
    "load_hf_config",
    "resolve_model_dir",
]

RunnerOption = Literal["auto", "generate", "pooling", "draft"]
ConvertOption = Literal["auto", "none", "embed", "classify", "reward", "mm_encoder_only"]
TokenizerMode = Literal["auto", "hf", "slow", "mistral", "deepseek_v32"]
LogprobsMode = Literal["raw_logits", "raw_logprobs", "processed_logits", "processed_logprobs"]
LayerBlockType = Literal["attention", "linear_attention", "mamba"]
AttnTypeStr = Literal["decoder", "encoder", "encoder_only", "encoder_decoder", "attention_free", "hybrid"]

_RUNNER_CONVERTS: dict[str, list[str]] = {
    "generate": [],
    "pooling": ["embed", "classify", "reward"],
    "draft": [],
}
# The quantization methods whose checkpoints vLLM's kernel configs may claim (`override_quantization_method`
# of Marlin, BitBLAS, ModelOpt, ...), depending on the device's kernels.
_KERNEL_DETECTED_METHODS = ("awq", "gptq", "modelopt", "modelopt_fp4")
# The keys of a model config that transformers holds as nested configs (hf_overrides update them in place).
SUB_CONFIG_KEYS = ("text_config", "vision_config", "audio_config", "thinker_config", "talker_config")
_MM_PREFIX_LM_TYPES = ("gemma3", "paligemma")
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
    runner: RunnerOption = "auto"
    """The type of model runner to use. Each vLLM instance only supports one
    model runner, even if the same model can be used for multiple types."""
    convert: ConvertOption = "auto"
    """Convert the model using adapters defined in
    [vllm.model_executor.models.adapters][]. The most common use case is to
    adapt a text generation model to be used for pooling tasks."""
    tokenizer: str = Field(default=None)
    """Name or path of the Hugging Face tokenizer to use. If unspecified, model
    name or path will be used."""
    tokenizer_mode: TokenizerMode | str = "auto"
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
    max_model_len: int = Field(default=None, ge=-1)
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
    logprobs_mode: LogprobsMode = "raw_logprobs"
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

    def __post_init__(
        self,
        limit_mm_per_prompt: dict[str, int | dict[str, int]] | None,
        enable_mm_embeds: bool | None,
        media_io_kwargs: dict[str, dict[str, Any]] | None,
        mm_processor_kwargs: dict[str, Any] | None,
        mm_processor_cache_gb: float | None,
        mm_processor_cache_type: MMCacheType | None,
        mm_shm_cache_max_object_size_mb: int | None,
        mm_encoder_tp_mode: MMEncoderTPMode | None,
        mm_encoder_attn_backend: AttentionBackendEnum | str | None,
        interleave_mm_strings: bool | None,
        skip_mm_profiling: bool | None,
        video_pruning_rate: float | None,
    ) -> None:
        self.served_model_name = get_served_model_name(self.model, self.served_model_name)
        # The tokenizer is consistent with the model by default.
        if self.tokenizer is None:
            self.tokenizer = self.model
        if self.tokenizer_revision is None:
            self.tokenizer_revision = self.revision
        hf_overrides_kw, dict_overrides = split_overrides(self.hf_overrides)
        if self.override_attention_dtype is not None:
            warnings.warn("override-attention-dtype is set but not using ROCm platform", stacklevel=2)
        if self.enable_sleep_mode and not get_platform().is_cuda():
            raise ValueError("Sleep mode is not supported on current platform.")

        source = load_hf_config(self.hf_config_path or self.model)
        check_config_counts(source, "config.json")
        # What vLLM builds its transformers config object from, kept for compute_hash.
        self._hf_config_source = copy.deepcopy(source)
        check_config_counts(hf_overrides_kw, "hf_config")  # config.json's own counts are checked above
        # vLLM's object holds its class's defaults for what config.json leaves out: its attributes here.
        name = self.hf_config_path or self.model
        hf_config = hf_config_dict(source, name, hf_overrides_kw) or {**source, **hf_overrides_kw}
        check_config_counts(dict_overrides, "hf_overrides")
        self.hf_config = hf_config
        patch_rope_parameters(hf_config)
        if dict_overrides:
            self._apply_hf_dict_overrides(dict_overrides)
        self.hf_text_config = get_hf_text_config(hf_config)
        if self.hf_text_config is not hf_config:
            patch_rope_parameters(self.hf_text_config)
        # The dicts as loaded: compute_hash replays on vLLM's object what changes in them from here on.
        self._hf_config_loaded = (hf_config, self.hf_text_config, copy.deepcopy(hf_config))
        self.attention_chunk_size = self.hf_text_config.get("attention_chunk_size")
        self.encoder_config = self._get_encoder_config()
        self.hf_image_processor_config = read_json(self.model, "preprocessor_config.json") or {}
        self.model_arch_config = self.get_model_arch_config()

        architectures = self.architectures
        is_generative_model = model_registry.is_text_generation_model(architectures, self)
        is_pooling_model = model_registry.is_pooling_model(architectures, self)
        self.runner_type = self._get_runner_type(architectures, self.runner)
        self.convert_type = self._get_convert_type(architectures, self.runner_type, self.convert)
        generate_converts = _RUNNER_CONVERTS["generate"]
        if (
            self.runner_type == "generate"
            and not is_generative_model
            and self.convert_type not in generate_converts
        ):
            # Currently we don't have any converters for generative models
            raise ValueError("This model does not support `--runner generate`.")
        if self.runner_type == "pooling" and not is_pooling_model:
            pooling_converts = _RUNNER_CONVERTS["pooling"]
            if self.convert_type not in pooling_converts:
                convert_option = "<" + "|".join(pooling_converts) + ">"
                raise ValueError(
                    "This model does not support `--runner pooling`. "
                    f"You can pass `--convert {convert_option} to adapt "
                    "it into a pooling model."
                )
        model_info, arch = model_registry.inspect_model_cls(architectures, self)
        self._model_info = model_info
        self._architecture = arch
        logger.info("Resolved architecture: %s", arch)
        if self.runner_type == "pooling":
            self._init_pooler_config()

        self.dtype = self._resolve_dtype(self.dtype)
        self.original_max_model_len = self.max_model_len
        self.max_model_len = self.get_and_verify_max_len(self.max_model_len)
        if self.is_encoder_decoder:
            # Set on the instance over the init var's class default, as vLLM does (mypy sees no attribute).
            self.mm_processor_cache_gb = 0  # type: ignore[attr-defined]
            logger.info("Encoder-decoder model detected, disabling mm processor cache.")
        if self._model_info.supports_multimodal:
            if mm_encoder_tp_mode == "data" and not self._model_info.supports_multimodal_encoder_tp_data:
                logger.warning(
                    "This model does not support `--mm-encoder-tp-mode data`. "
                    "Falling back to `--mm-encoder-tp-mode weights`."
                )
                mm_encoder_tp_mode = "weights"
            mm_config_kwargs = dict(
                limit_per_prompt=limit_mm_per_prompt,
                enable_mm_embeds=enable_mm_embeds,
                media_io_kwargs=media_io_kwargs,
                mm_processor_kwargs=mm_processor_kwargs,
                mm_processor_cache_gb=mm_processor_cache_gb,
                mm_processor_cache_type=mm_processor_cache_type,
                mm_shm_cache_max_object_size_mb=mm_shm_cache_max_object_size_mb,
                mm_encoder_tp_mode=mm_encoder_tp_mode,
                mm_encoder_attn_backend=mm_encoder_attn_backend,
                interleave_mm_strings=interleave_mm_strings,
                skip_mm_profiling=skip_mm_profiling,
                video_pruning_rate=video_pruning_rate,
            )
            self.multimodal_config = MultiModalConfig(
                **{k: v for k, v in mm_config_kwargs.items() if v is not None}
            )
        if self.disable_sliding_window:
            # Set after get_and_verify_max_len to ensure that max_model_len
            # can be correctly capped to sliding window size
            self.hf_text_config["sliding_window"] = None
        # Avoid running try_verify_and_update_config multiple times
        self.config_updated = False
        self._try_verify_and_update_model_config()
        self._verify_quantization()
        self._verify_cuda_graph()
        self._verify_bnb_config()

    def get_model_arch_config(self) -> ModelArchitectureConfig:
        return model_arch_config(self.hf_config, self.hf_text_config)

    @field_validator("tokenizer", "max_model_len", mode="wrap")
    @classmethod
    def _skip_none_validation(cls, value: Any, handler: Callable[[Any], Any]) -> Any:
        """Skip validation if the value is `None` when initialisation is delayed."""
        if value is None:
            return value
        return handler(value)

    @field_validator("tokenizer_mode", mode="after")
    def _lowercase_tokenizer_mode(cls, tokenizer_mode: str) -> str:
        return tokenizer_mode.lower()

    @field_validator("quantization", mode="before")
    @classmethod
    def validate_quantization_before(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.lower()
        return value

    @model_validator(mode="after")
    def validate_model_config_after(self: "ModelConfig") -> "ModelConfig":
        """Called after __post_init__"""
        if not isinstance(self.tokenizer, str):
            raise ValueError(
                f"tokenizer must be a string, got "
                f"{type(self.tokenizer).__name__}: {self.tokenizer!r}. "
                "Please provide a valid tokenizer path or HuggingFace model ID."
            )
        if not isinstance(self.max_model_len, int):
            raise ValueError(
                f"max_model_len must be a positive integer, "
                f"got {type(self.max_model_len).__name__}: {self.max_model_len!r}. "
                "Example: max_model_len=2048"
            )
        return self

    # --- vLLM's hf_overrides helpers, over config dicts (the only configs this worker holds) -----------

    def _update_nested(self, target: dict[str, Any], updates: dict[str, Any]) -> None:
        """Recursively updates a config or dict with nested updates."""
        _require_dict(target, "target")
        for key, value in updates.items():
            if isinstance(value, dict):
                nested_target = target.get(key)
                if isinstance(nested_target, dict):
                    self._update_nested(nested_target, value)
                    continue
            target[key] = value

    def _apply_dict_overrides(self, config: dict[str, Any], overrides: dict[str, Any]) -> None:
        """Apply dict overrides, handling both nested configs and dict values. vLLM sets them as attributes
        of a transformers config: on a plain dict, as a caller passes one, that fails as in vLLM."""
        _require_dict(config, "config")
        for key, value in overrides.items():
            setattr(config, key, value)  # a dict has no attributes: AttributeError, vLLM's answer

    def _apply_hf_dict_overrides(self, overrides: dict[str, Any]) -> None:
        """vLLM's `_apply_dict_overrides` on this model's config: a nested config (a transformers
        sub-config, here one of `SUB_CONFIG_KEYS`) is updated recursively, any other value set as given."""
        for key, value in overrides.items():
            attr = self.hf_config.get(key)
            if attr is not None and key in SUB_CONFIG_KEYS and isinstance(attr, dict):
                self._update_nested(attr, value)
            else:
                self.hf_config[key] = value

    def _get_transformers_backend_cls(self) -> str:
        """Determine which Transformers modeling backend class will be used if
        `model_impl` is set to `transformers` or `auto`."""
        cls = "Transformers"
        # If 'hf_config != hf_text_config' it's a nested config, i.e. multimodal
        cls += "MultiModal" if self.hf_config != self.hf_text_config else ""
        cls += "MoE" if self.is_moe else ""
        # Check if the architecture we're wrapping has defaults
        runner = None
        task = None
        if defaults := try_match_architecture_defaults(self.architectures[0]):
            _, (runner, task) = defaults
        # User specified value take precedence
        if self.runner != "auto":
            runner = self.runner
        if runner == "pooling" and task in {"embed", "classify"}:
            cls += "EmbeddingModel" if task == "embed" else "ForSequenceClassification"
        else:
            cls += "ForCausalLM"
        return cls

    def using_transformers_backend(self) -> bool:
        """Check if the model is using the Transformers modeling backend class."""
        return bool(self._model_info.architecture == self._get_transformers_backend_cls())

    @property
    def architectures(self) -> list[str]:
        return self.model_arch_config.architectures  # type: ignore[return-value]

    @property
    def architecture(self) -> str:
        """The architecture vllm actually used."""
        return self._architecture

    def _get_encoder_config(self) -> dict[str, Any] | None:
        return get_sentence_transformer_tokenizer_config(self.model)

    def _get_default_runner_type(self, architectures: list[str]) -> RunnerType:
        # Some Sentence Transformers models use *ForCausalLM archs
        if get_pooling_config(self.model):
            return "pooling"
        for arch in architectures:
            if arch in model_registry.supported_archs():
                if model_registry.is_pooling_model(architectures, self):
                    return "pooling"
                if model_registry.is_text_generation_model(architectures, self):
                    return "generate"
            match = try_match_architecture_defaults(arch)
            if match:
                _, (runner_type, _) = match
                return runner_type
        return "generate"

    def _get_runner_type(self, architectures: list[str], runner: str) -> RunnerType:
        if runner != "auto":
            return runner  # type: ignore[return-value]
        runner_type = self._get_default_runner_type(architectures)
        # Don't log the most common case
        if runner_type != "generate":
            logger.info(
                "Resolved `--runner auto` to `--runner %s`. "
                "Pass the value explicitly to silence this message.",
                runner_type,
            )
        return runner_type

    def _get_default_convert_type(self, architectures: list[str], runner_type: str) -> ConvertType:
        for arch in architectures:
            if arch in model_registry.supported_archs():
                if runner_type == "generate" and model_registry.is_text_generation_model(architectures, self):
                    return "none"
                if runner_type == "pooling" and model_registry.is_pooling_model(architectures, self):
                    return "none"
            match = try_match_architecture_defaults(arch, runner_type=runner_type)
            if match:
                _, (_, convert_type) = match
                return convert_type
        # This is to handle Sentence Transformers models that use *ForCausalLM
        # and also multi-modal pooling models which are not defined as
        # Sentence Transformers models
        if runner_type == "pooling":
            return "embed"
        return "none"

    def _get_convert_type(self, architectures: list[str], runner_type: str, convert: str) -> ConvertType:
        if convert == "reward":
            logger.warning(
                "`--convert reward` is deprecated and will be removed in v0.15. "
                "Please use `--convert embed` instead."
            )
            return "embed"
        if convert != "auto":
            return convert  # type: ignore[return-value]
        convert_type = self._get_default_convert_type(architectures, runner_type)
        # Don't log the most common case
        if convert_type != "none":
            logger.info(
                "Resolved `--convert auto` to `--convert %s`. "
                "Pass the value explicitly to silence this message.",
                convert_type,
            )
        return convert_type

    def _verify_quantization(self) -> None:
        """vLLM's detection and check of the quantization method. vLLM asks each quantization kernel's
        config class whether it takes over a checkpoint's method (`override_quantization_method`); the
        kernels that do (Marlin, BitBLAS, ModelOpt, ...) claim only AWQ, GPTQ and ModelOpt checkpoints and
        the BitBLAS and Marlin-24 formats, and their answer depends on the device's kernels, so such a
        checkpoint is refused here; any other method in `quantization_config` is taken as vLLM takes it."""
        supported_quantization = model_registry.quantization_methods()
        quant_cfg = self.model_arch_config.quantization_config
        if quant_cfg is not None:
            quant_method = quant_cfg["quant_method"]
            if (
                quant_method in _KERNEL_DETECTED_METHODS
                or quant_cfg.get("checkpoint_format")
                in (
                    "bitblas",
                    "marlin_24",
                )
                or quant_cfg.get("is_bitblas_format", False)
            ):
                raise ValueError(
                    f"model {self.model!r}: a {quant_method!r} checkpoint's quantization method is chosen "
                    "by vLLM from the kernels the device has (Marlin, BitBLAS, ModelOpt, ...); this worker "
                    "plans without them and does not guess"
                )
            if self.quantization == "moe_wna16":
                raise ValueError(
                    f"model {self.model!r}: whether quantization='moe_wna16' takes over this checkpoint "
                    "depends on the device's kernels; this worker plans without them and does not guess"
                )
            quant_method = quant_method if quant_method != "" else None
            # Verify quantization configurations.
            if self.quantization is None:
                self.quantization = quant_method
            elif self.quantization != quant_method:
                raise ValueError(
                    "Quantization method specified in the model config "
                    f"({quant_method}) does not match the quantization "
                    f"method specified in the `quantization` argument "
                    f"({self.quantization})."
                )
        if self.quantization is not None and self.quantization not in supported_quantization:
            raise ValueError(
                f"Unknown quantization method: {self.quantization}. Must be one of {supported_quantization}."
            )
        # vLLM's CPU and CUDA platforms list no supported methods, so the platform accepts every one.
        if self.quantization in model_registry.deprecated_quantization_methods():
            if self.allow_deprecated_quantization:
                logger.warning(
                    "The quantization method %s is deprecated "
                    "and will be removed in future versions of vLLM.",
                    self.quantization,
                )
            else:
                raise ValueError(
                    "The quantization method %s is deprecated "
                    "and will be removed in future versions of vLLM. To bypass, "
                    "set `--allow-deprecated-quantization`.",
                    self.quantization,
                )

    def _verify_cuda_graph(self) -> None:
        """vLLM falls back to eager mode for encoder-decoder models on ROCm only: never on the CPU and
        CUDA platforms modelled here."""

    def _verify_bnb_config(self) -> None:
        """
        The current version of bitsandbytes (0.46.1) with 8-bit models does not
        yet support CUDA graph.
        """
        quant_cfg = self.model_arch_config.quantization_config
        is_8bit = quant_cfg.get("load_in_8bit", False) if quant_cfg is not None else False
        if (
            self.quantization == "bitsandbytes"
            and quant_cfg is not None
            and is_8bit
            and not self.enforce_eager
        ):
            logger.warning(
                "CUDA graph is not supported on BitsAndBytes 8bit yet, fallback to the eager mode."
            )
            self.enforce_eager = True

    def _verify_with_expert_parallelism(self) -> None:
        if not self.is_moe:
            raise ValueError(
                "Number of experts in the model must be greater than 0 when expert parallelism is enabled."
            )

    def _try_verify_and_update_model_config(self) -> None:
        """The model-specific updates of vLLM's `MODELS_CONFIG_MAP` (vllm/model_executor/models/config.py)
        that change what a ModelConfig answers; the others only rewrite config attributes the model classes
        read (activation names, rotary arguments) and change nothing served here."""
        if getattr(self, "config_updated", False):
            return
        architecture = self.architecture
        if architecture is None:
            return
        update = _MODEL_CONFIG_UPDATES.get(architecture)
        if update is not None:
            update(self)

    def verify_dual_chunk_attention_config(self, load_config: Any) -> None:
        if "dual_chunk_attention_config" in self.hf_config:
            sparse_attn_config = read_json(self.model, "sparse_attention_config.json") or {}
            if sparse_attn_config:
                dual_chunk = self.hf_config["dual_chunk_attention_config"]
                dual_chunk["sparse_attention_config"] = sparse_attn_config
                if "sparse_attention_enabled" not in dual_chunk:
                    dual_chunk["sparse_attention_enabled"] = True

    def verify_with_parallel_config(self, parallel_config: Any) -> None:
        total_num_attention_heads = self.model_arch_config.total_num_attention_heads
        tensor_parallel_size = parallel_config.tensor_parallel_size
        if total_num_attention_heads % tensor_parallel_size != 0:
            raise ValueError(
                f"Total number of attention heads ({total_num_attention_heads})"
                " must be divisible by tensor parallel size "
                f"({tensor_parallel_size})."
            )
        if parallel_config.enable_expert_parallel:
            self._verify_with_expert_parallelism()
        pipeline_parallel_size = parallel_config.pipeline_parallel_size
        if pipeline_parallel_size > 1 and not model_registry.is_pp_supported_model(self.architectures, self):
            raise NotImplementedError(
                "Pipeline parallelism is not supported for this model. "
                "Supported models implement the `SupportsPP` interface."
            )
        dcp = parallel_config.decode_context_parallel_size
        if dcp > 1 and not self.use_mla:
            kv_heads = self.get_total_num_kv_heads()
            assert tensor_parallel_size > kv_heads, (
                f"tensor parallel size {tensor_parallel_size} must be greater "
                f"than total num kv heads {kv_heads} when enable "
                f"decode context parallel for GQA/MQA"
            )
            max_dcp_size = tensor_parallel_size // kv_heads
            assert dcp <= max_dcp_size, (
                f"decode context parallel size must less than or equal to "
                f"(tensor parallel size {tensor_parallel_size} // total "
                f"num kv heads {kv_heads}) = {max_dcp_size}, "
                f"but got {dcp}"
            )
            num_q_per_kv = total_num_attention_heads // kv_heads
            assert num_q_per_kv % dcp == 0, (
                f"Total number of q per kv attn heads ({num_q_per_kv})"
                " must be divisible by dcp world size when enable "
                "decode context parallel for GQA "
                f"({parallel_config.decode_context_parallel_size})."
            )

    def get_sliding_window(self) -> int | None:
        """Get the sliding window size from the HF text config if present."""
        return self.hf_text_config.get("sliding_window")

    def get_vocab_size(self) -> int:
        return self.model_arch_config.vocab_size

    def get_hidden_size(self) -> int:
        return self.model_arch_config.hidden_size

    def get_inputs_embeds_size(self) -> int:
        # The size of inputs_embeds is usually identical to the size
        # of the hidden states, however there are exceptions, such as
        # embedding models like CLIP and SigLIP
        names = ("projection_dim", "projection_size")
        return getattr_iter(self.hf_text_config, names, default_factory=self.get_hidden_size)

    @property
    def is_deepseek_mla(self) -> bool:
        return self.model_arch_config.is_deepseek_mla

    @property
    def is_mm_prefix_lm(self) -> bool:
        """Whether to use bidirectional attention for mm positions."""
        return self.hf_config.get("model_type") in _MM_PREFIX_LM_TYPES

    def get_head_size(self) -> int:
        return self.model_arch_config.head_size

    def get_total_num_kv_heads(self) -> int:
        """Returns the total number of KV heads."""
        return self.model_arch_config.total_num_kv_heads

    def get_num_kv_heads(self, parallel_config: Any) -> int:
        """Returns the number of KV heads per GPU."""
        if self.use_mla:
            # When using MLA during decode it becomes MQA
            return 1
        return max(1, self.get_total_num_kv_heads() // parallel_config.tensor_parallel_size)

    def get_num_attention_heads(self, parallel_config: Any) -> int:
        return self.model_arch_config.total_num_attention_heads // parallel_config.tensor_parallel_size

    def get_num_experts(self) -> int:
        return self.model_arch_config.num_experts

    def get_total_num_hidden_layers(self) -> int:
        return self.model_arch_config.total_num_hidden_layers

    def get_total_num_attention_heads(self) -> int:
        return self.model_arch_config.total_num_attention_heads

    def get_layers_start_end_indices(self, parallel_config: Any) -> tuple[int, int]:
        total_num_hidden_layers = self.get_total_num_hidden_layers()
        # the layout order is: DP x PP x TP
        pp_rank = (
            parallel_config.rank // parallel_config.tensor_parallel_size
        ) % parallel_config.pipeline_parallel_size
        pp_size = parallel_config.pipeline_parallel_size
        return get_pp_indices(total_num_hidden_layers, pp_rank, pp_size)

    def get_num_layers(self, parallel_config: Any) -> int:
        start, end = self.get_layers_start_end_indices(parallel_config)
        return end - start

    def get_num_layers_by_block_type(
        self, parallel_config: Any, block_type: LayerBlockType = "attention"
    ) -> int:
        # This function relies on 'layers_block_type' in hf_config,
        # for w/o this attribute, we will need to have workarounds like so
        attn_block_type = block_type == "attention"
        is_transformer = not self.is_hybrid and not self.has_noops and not self.is_attention_free
        start, end = self.get_layers_start_end_indices(parallel_config)
        if is_transformer:
            # Handle the basic case first
            return end - start if attn_block_type else 0
        if self.is_attention_free:
            # Attention free
            # Note that this code assumes there
            # is only one type of attention-free block type.
            return 0 if attn_block_type else end - start
        if self.has_noops:
            block_configs = self.hf_config["block_configs"]
            return sum(not bc["attention"]["no_op"] for bc in block_configs[start:end])
        # Hybrid model Jamba
        layers_block_type_value = layers_block_type(self.hf_text_config)
        if layers_block_type_value is not None:
            if self.model_arch_config.text_model_type == "zamba2":
                if attn_block_type:
                    return sum(t == "hybrid" for t in layers_block_type_value[start:end])
                return self.get_num_layers(parallel_config)
            return sum(t == block_type for t in layers_block_type_value[start:end])
        # Hybrid model Minimax
        attn_type_list = self.hf_config.get("attn_type_list")
        if attn_type_list:
            return sum(t == 1 for t in attn_type_list[start:end])
        # Hybrid model Qwen3Next
        layer_types_value = self.hf_config.get("layer_types")
        if layer_types_value is not None:
            if block_type == "attention":
                return sum(t == "full_attention" for t in layer_types_value[start:end])
            if block_type == "linear_attention":
                return sum(t == "linear_attention" for t in layer_types_value[start:end])
            return sum(t == block_type for t in layer_types_value[start:end])
        raise ValueError(
            "The model is an hybrid without a layers_block_type or an "
            "attn_type_list, or a layer_types in the hf_config, "
            f"cannot determine the num of {block_type} layers"
        )

    def get_mamba_chunk_size(self) -> int | None:
        """
        Returns the mamba chunk size if it exists
        """
        # used by e.g. Bamba, FalconH1, Granite, PLaMo2
        chunk_size = self.hf_text_config.get("mamba_chunk_size")
        if chunk_size is None:
            # used by e.g. Mamba2, NemotronH, Zamba
            chunk_size = self.hf_text_config.get("chunk_size")
        # Since Mamba1 does not have a chunk notion
        # we use a default chunk size of 1024.
        if chunk_size is None:
            chunk_size = 2048
        return chunk_size

    def get_multimodal_config(self) -> MultiModalConfig:
        """
        Get the multimodal configuration of the model.

        Raises:
            ValueError: If the model is not multimodal.
        """
        if self.multimodal_config is None:
            raise ValueError("The model is not multimodal.")
        return self.multimodal_config

    def try_get_generation_config(self) -> dict[str, Any]:
        """
        This method attempts to retrieve the non-default values of the
        generation config for this model.

        The generation config can contain information about special tokens, as
        well as sampling parameters. Which is why this method exists separately
        to `get_diff_sampling_param`.

        Returns:
            A dictionary containing the non-default generation config.
        """
        if self.generation_config in {"auto", "vllm"}:
            config = try_get_generation_config(self.hf_config_path or self.model)
        else:
            config = try_get_generation_config(self.generation_config)
        return {} if config is None else config

    def get_diff_sampling_param(self) -> dict[str, Any]:
        """
        This method returns a dictionary containing the non-default sampling
        parameters with `override_generation_config` applied.

        The default sampling parameters are:

        - vLLM's neutral defaults if `self.generation_config="vllm"`
        - the model's defaults if `self.generation_config="auto"`
        - as defined in `generation_config.json` if
            `self.generation_config="path/to/generation_config/dir"`

        Returns:
            A dictionary containing the non-default sampling parameters.
        """
        config = {} if self.generation_config == "vllm" else self.try_get_generation_config()
        # Overriding with given generation config
        config.update(self.override_generation_config)
        available_params = ["repetition_penalty", "temperature", "top_k", "top_p", "min_p", "max_new_tokens"]
        if any(p in config for p in available_params):
            diff_sampling_param = {p: config.get(p) for p in available_params if config.get(p) is not None}
            # Huggingface definition of max_new_tokens is equivalent
            # to vLLM's max_tokens
            if "max_new_tokens" in diff_sampling_param:
                diff_sampling_param["max_tokens"] = diff_sampling_param.pop("max_new_tokens")
        else:
            diff_sampling_param = {}
        if diff_sampling_param:
            logger.warning(
                "Default sampling parameters have been overridden by the "
                "model's Hugging Face generation config recommended from the "
                "model creator. If this is not intended, please relaunch "
                "vLLM instance with `--generation-config vllm`."
            )
        return diff_sampling_param

    @property
    def is_encoder_decoder(self) -> bool:
        """Extract the HF encoder/decoder model flag."""
        return bool(
            self.hf_config.get("is_encoder_decoder", False)
            or get_text_config(self.hf_config).get("is_encoder_decoder", False)
        )

    @property
    def uses_alibi(self) -> bool:
        cfg = self.hf_text_config
        attn_config = cfg.get("attn_config")
        return bool(
            cfg.get("alibi", False)  # Falcon
            or "BloomForCausalLM" in self.architectures  # Bloom
            or cfg.get("position_encoding_type", "") == "alibi"  # codellm_1b_alibi
            or (
                "attn_config" in cfg and isinstance(attn_config, dict) and attn_config.get("alibi", False)
            )  # MPT
        )

    @property
    def uses_mrope(self) -> bool:
        return uses_mrope(self.hf_config)

    @property
    def uses_xdrope_dim(self) -> int:
        xdrope_section = self.hf_config.get("xdrope_section")
        if xdrope_section is not None and isinstance(xdrope_section, list):
            return len(xdrope_section)
        rope_scaling = self.hf_config.get("rope_scaling")
        if rope_scaling is None:
            return 0
        if isinstance(rope_scaling, dict) and "xdrope_section" in rope_scaling:
            xdrope_section = rope_scaling["xdrope_section"]
            if xdrope_section is not None and isinstance(xdrope_section, list):
                return len(xdrope_section)
        return 0

    @property
    def is_multimodal_model(self) -> bool:
        return self.multimodal_config is not None

    @property
    def is_multimodal_raw_input_only_model(self) -> bool:
        return self._model_info.supports_multimodal_raw_input_only

    @property
    def requires_raw_input_tokens(self) -> bool:
        return self._model_info.requires_raw_input_tokens

    @property
    def is_cross_encoder(self) -> bool:
        return self._model_info.supports_cross_encoding or self.convert_type == "classify"

    @property
    def is_pp_supported(self) -> bool:
        return self._model_info.supports_pp

    @property
    def is_attention_free(self) -> bool:
        return self._model_info.is_attention_free

    @property
    def is_hybrid(self) -> bool:
        if not self._model_info.is_hybrid:
            return False
        # Handle granite-4.0-micro case which uses hybrid config but does not
        # actually contain any non-attention layers.
        layer_types = self.hf_config.get("layer_types")
        return layer_types is None or not all(layer == "attention" for layer in layer_types)

    @property
    def has_noops(self) -> bool:
        return self._model_info.has_noops

    @property
    def has_inner_state(self) -> bool:
        return self._model_info.has_inner_state

    @property
    def supports_mamba_prefix_caching(self) -> bool:
        return self._model_info.supports_mamba_prefix_caching

    @property
    def use_mla(self) -> bool:
        return self.is_deepseek_mla and not int_flag("VLLM_MLA_DISABLE")

    @property
    def is_matryoshka(self) -> bool:
        return bool(self.hf_config.get("matryoshka_dimensions")) or self.hf_config.get("is_matryoshka", False)

    @property
    def matryoshka_dimensions(self) -> Any:
        return self.hf_config.get("matryoshka_dimensions")

    @property
    def use_sep_token(self) -> bool:
        # cross_encoder models defaults to using separating token.
        # `llm as reranker` defaults to not using separating token.
        use_pad_token = self.hf_config.get("use_pad_token")
        if use_pad_token is not None:
            logger.warning("use_pad_token has been deprecated; please use use_sep_token instead.")
            return use_pad_token
        return self.hf_config.get("use_sep_token", True)

    @property
    def head_dtype(self) -> DType:
        """
        "head" refers to the last Linear layer(s) of an LLM,
        such as the lm_head in a generation model,
        or the score or classifier in a classification model.

        `head_dtype` currently only supports pooling models.\n
        - The pooling model defaults to using fp32 head,
        you can use --hf-overrides '{"head_dtype": "model"}' to disable it.
        """
        dtype = self.dtype
        assert isinstance(dtype, DType)
        head_dtype = _get_head_dtype(self.hf_config, dtype, self.runner_type)
        if self.runner_type != "pooling" and head_dtype != dtype:
            logger.warning(
                "`head_dtype` currently only supports pooling models, fallback to model dtype [%s].", dtype
            )
            return dtype
        if head_dtype not in SUPPORTED_DTYPES:
            return dtype
        return head_dtype

    @property
    def embedding_size(self) -> int:
        dense_modules = try_get_dense_modules(self.model)
        if dense_modules is not None:
            return dense_modules[-1]["out_features"]
        return self.get_hidden_size()

    def get_and_verify_max_len(self, max_model_len: int | None) -> int:
        # Consider max_model_len in tokenizer_config only when
        # pooling models use absolute position_embedding.
        tokenizer_config = None
        if self.runner_type == "pooling" and self.hf_config.get("position_embedding_type", "") == "absolute":
            tokenizer_config = try_get_tokenizer_config(self.tokenizer)
        max_model_len = _get_and_verify_max_len(
            hf_config=self.hf_text_config,
            model_arch_config=self.model_arch_config,
            tokenizer_config=tokenizer_config,
            max_model_len=max_model_len,
            disable_sliding_window=self.disable_sliding_window,
            sliding_window=self.get_sliding_window(),
            spec_target_max_model_len=self.spec_target_max_model_len,
            encoder_config=self.encoder_config,
        )
        logger.info("Using max model len %s", max_model_len)
        return max_model_len

    @property
    def attn_type(self) -> AttnTypeStr:
        if self.pooler_config is not None:
            seq_pooling_type = self._model_info.default_seq_pooling_type
            if seq_pooling_type == "CLS":
                return "encoder_only"
            is_causal = self.hf_config.get("is_causal", True)
            return "encoder_only" if not is_causal else self._model_info.attn_type  # type: ignore[return-value]
        if self.is_hybrid:
            return "hybrid"
        if self.is_attention_free:
            return "attention_free"
        if self.is_encoder_decoder:
            return "encoder_decoder"
        return "decoder"

    @property
    def is_chunked_prefill_supported(self) -> bool:
        attn_type = self.attn_type
        if pooler_config := self.pooler_config:
            # for pooling models
            if attn_type == "encoder_only":
                return False
            if attn_type == "decoder":
                return not (
                    pooler_config.seq_pooling_type in ("MEAN", "CLS")
                    or pooler_config.tok_pooling_type == "STEP"
                )
            # vllm currently does not have pooling models using hybrid,
            # attention_free or encoder_decoder attn types.
            return attn_type != "encoder_decoder"
        # for generative models
        return attn_type != "encoder_decoder"

    @property
    def is_prefix_caching_supported(self) -> bool:
        attn_type = self.attn_type
        if pooler_config := self.pooler_config:
            # for pooling models
            if attn_type == "encoder_only":
                return False
            if attn_type == "decoder":
                return not (
                    pooler_config.seq_pooling_type in ("MEAN", "CLS")
                    or pooler_config.tok_pooling_type == "STEP"
                )
            return False
        # for generative models: hybrid, attention-free and encoder-decoder models do not support it
        return attn_type == "decoder"

    @property
    def is_moe(self) -> bool:
        return self.get_num_experts() > 0

    @property
    def is_quantized(self) -> bool:
        return self.hf_config.get("quantization_config") is not None

    def _init_pooler_config(self) -> None:
        """vLLM's pooler set-up for the pooling runner: the caller's settings, then the model folder's
        sentence-transformers pooling config (`modules.json`), then the model class's default types."""
        if self.pooler_config is None:
            self.pooler_config = PoolerConfig()
        base_config = get_pooling_config(self.model)
        if base_config is not None:
            # Only set values that are not overridden by the user
            for k, v in base_config.items():
                if getattr(self.pooler_config, k) is None:
                    setattr(self.pooler_config, k, v)
        if self.pooler_config.seq_pooling_type is None:
            self.pooler_config.seq_pooling_type = self._model_info.default_seq_pooling_type
        if self.pooler_config.tok_pooling_type is None:
            self.pooler_config.tok_pooling_type = self._model_info.default_tok_pooling_type

    def _config_dtype(self) -> DType | None:
        """The dtype vLLM reads of its transformers config; None for one that no platform supports.

        That is a dtype set by hf_overrides: transformers turns config.json's dtype name into a
        `torch.dtype`, but `config.update` keeps the value given, and a string is none of a platform's
        dtypes, so vLLM falls back to the preferred one."""
        overridden = [v for k, v in self.hf_overrides.items() if k in ("torch_dtype", "dtype")]
        if overridden and overridden[-1] is not None:
            return None
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
            # Downcast for float32 models; fall back where the platform lacks the config's dtype.
            config_dtype = preferred if config_dtype == FLOAT32 else config_dtype
            resolved = config_dtype if config_dtype in supported else preferred
        elif dtype.lower() in STR_TO_DTYPE:
            resolved = STR_TO_DTYPE[dtype.lower()]
        else:
            raise ValueError(f"Unknown dtype: {dtype.lower()!r}")
        if model_type in _FLOAT16_NOT_SUPPORTED_MODELS and resolved == FLOAT16:
            reason = _FLOAT16_NOT_SUPPORTED_MODELS[model_type]
            raise ValueError(f"The model type {model_type!r} does not support float16. Reason: {reason}")
        return resolved

    def compute_hash(self) -> str:
        """
        WARNING: Whenever a new field is added to this config,
        ensure that it is included in the factors list if
        it affects the computation graph.

        Provide a hash that uniquely identifies all the configs
        that affect the structure of the computation
        graph from input ids/embeddings to the final hidden states,
        excluding anything before input ids/embeddings and after
        the final hidden states.
        """
        factors = get_hash_factors(self, _HASH_IGNORED_FACTORS)
        # vLLM's configs are transformers objects, hashed as their JSON; ours are dicts (hf_config_json).
        if (jsons := self._hf_config_jsons()) is not None:
            factors["hf_config"], factors["hf_text_config"] = jsons
        return hash_factors(factors)

    def _hf_config_jsons(self) -> tuple[str, str] | None:
        """vLLM's `to_json_string()` of `hf_config` and `hf_text_config`; None where they cannot be
        reproduced: a config this instance did not load itself (one assigned to it afterwards), or one
        hf_config_json does not build."""
        source = getattr(self, "_hf_config_source", None)
        config, text_config, loaded = getattr(self, "_hf_config_loaded", (None, None, None))
        if source is None or self.hf_config is not config or self.hf_text_config is not text_config:
            return None
        if not isinstance(self.hf_overrides, dict):
            return None
        return hf_config_jsons(
            source, self.hf_config_path or self.model, self.hf_overrides, loaded, self.hf_config
        )


# vLLM's ModelConfig.compute_hash leaves these out.
_HASH_IGNORED_FACTORS = frozenset(
    {
        "runner",
        "convert",
        "tokenizer",
        "tokenizer_mode",
        "seed",
        "hf_config_path",
        "allowed_local_media_path",
        "allowed_media_domains",
        "tokenizer_revision",
        "spec_target_max_model_len",
        "enforce_eager",
        "logprobs_mode",
        "disable_cascade_attn",
        "skip_tokenizer_init",
        "served_model_name",
        "config_format",
        "hf_token",
        "hf_overrides",
        "logits_processor_pattern",
        "override_attention_dtype",
        "logits_processors",
        "io_processor_plugin",
        "pooler_config",
        "multimodal_config",
        "limit_mm_per_prompt",
        "media_io_kwargs",
        "mm_processor_kwargs",
        "mm_processor_cache_gb",
        "mm_processor_cache_type",
        "mm_shm_cache_max_object_size_mb",
        "mm_encoder_tp_mode",
        "interleave_mm_strings",
        "skip_mm_profiling",
    }
)


def get_served_model_name(model: str, served_model_name: str | list[str] | None) -> str:
    """
    If the input is a non-empty list, the first model_name in
    `served_model_name` is taken.
    If the input is a non-empty string, it is used directly.
    For cases where the input is either an empty string or an
    empty list, the fallback is to use `self.model`.
    """
    if not served_model_name:
        return model
    if isinstance(served_model_name, list):
        return served_model_name[0]
    return served_model_name


def _require_dict(value: object, name: str) -> None:
    """The hf_overrides helpers work on config dicts only: a caller's other object is not written to."""
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a config dict, got {type(value).__name__}")


def _get_head_dtype(config: HFConfig, dtype: DType, runner_type: str) -> DType:
    head_dtype = config.get("head_dtype")
    if head_dtype == "model":
        return dtype
    if isinstance(head_dtype, str):
        head_dtype = head_dtype.lower()
        if head_dtype not in STR_TO_DTYPE:
            raise ValueError(f"Unknown dtype: {head_dtype!r}")
        return STR_TO_DTYPE[head_dtype]
    if head_dtype is None:
        if FLOAT32 not in SUPPORTED_DTYPES:
            return dtype
        if runner_type == "pooling":
            return FLOAT32
        return dtype
    raise ValueError(f"Unknown dtype: {head_dtype}")


def _get_and_verify_max_len(
    hf_config: HFConfig,
    model_arch_config: ModelArchitectureConfig,
    tokenizer_config: dict[str, Any] | None,
    max_model_len: int | None,
    disable_sliding_window: bool,
    sliding_window: int | None,
    spec_target_max_model_len: int | None = None,
    encoder_config: Any | None = None,
) -> int:
    """Get and verify the model's maximum length."""
    derived_max_model_len, max_len_key = model_arch_config.derived_max_model_len_and_key
    # If sliding window is manually disabled, max_length should be less
    # than the sliding window length in the model config.
    if disable_sliding_window and sliding_window is not None and sliding_window < derived_max_model_len:
        max_len_key = "sliding_window"
        derived_max_model_len = sliding_window
    # Consider model_max_length in tokenizer_config
    if tokenizer_config:
        tokenizer_model_max_length = tokenizer_config.get("model_max_length", derived_max_model_len)
        derived_max_model_len = min(derived_max_model_len, tokenizer_model_max_length)
    # If none of the keys were found in the config, use a default and
    # log a warning.
    if derived_max_model_len == float("inf"):
        if max_model_len is not None:
            # If max_model_len is specified, we use it.
            return max_model_len
        if spec_target_max_model_len is not None:
            # If this is a speculative draft model, we use the max model len
            # from the target model.
            return spec_target_max_model_len
        default_max_len = 2048
        logger.warning(
            "The model's config.json does not contain any of the keys "
            "to determine the original maximum length of the model. "
            "Assuming the model's maximum length is %d.",
            default_max_len,
        )
        derived_max_model_len = default_max_len
    rope_parameters = hf_config.get("rope_parameters")
    if rope_parameters and not is_rope_parameters_nested(rope_parameters):
        rope_parameters = {"": rope_parameters}
    # NOTE(woosuk): Gemma3's max_model_len (128K) is already scaled by RoPE
    # scaling, so we skip applying the scaling factor again.
    if rope_parameters is not None and "gemma3" not in hf_config["model_type"]:
        scaling_factor = 1.0
        for rp in rope_parameters.values():
            rope_type = rp["rope_type"]
            if rope_type not in ("su", "longrope", "llama3"):
                # NOTE: This assumes all layer types have the same scaling factor.
                scaling_factor = rp.get("factor", scaling_factor)
                if rope_type == "yarn":
                    derived_max_model_len = rp["original_max_position_embeddings"]
        # Do this outside loop since all layer types should have the same scaling
        derived_max_model_len *= scaling_factor
    if encoder_config and "max_seq_length" in encoder_config:
        derived_max_model_len = encoder_config["max_seq_length"]
    # If the user didn't specify `max_model_len` or specified -1 (auto-fit),
    # then use that derived from the model config as a default value.
    if max_model_len is None or max_model_len == -1:
        # For LongRoPE, default to original_max_position_embeddings to avoid
        # performance degradation for shorter sequences
        if rope_parameters is not None and any(
            rp["rope_type"] == "longrope" for rp in rope_parameters.values()
        ):
            max_model_len = int(hf_config.get("original_max_position_embeddings", derived_max_model_len))
        else:
            max_model_len = int(derived_max_model_len)
    # If the user specified a max length, make sure it is smaller than the
    # derived length from the HF model config.
    elif max_model_len > derived_max_model_len:
        # Some models might have a separate key for specifying model_max_length
        # that will be bigger than derived_max_model_len. We compare user input
        # with model_max_length and allow this override when it's smaller.
        model_max_length = hf_config.get("model_max_length")
        if model_max_length is None or max_model_len > model_max_length:
            msg = (
                f"User-specified max_model_len ({max_model_len}) is greater "
                f"than the derived max_model_len ({max_len_key}="
                f"{derived_max_model_len} or model_max_length="
                f"{model_max_length} in model's config.json)."
            )
            if int_flag("VLLM_ALLOW_LONG_MAX_MODEL_LEN"):
                logger.warning("%s %s", msg, _LONG_MAX_MODEL_LEN_WARNING)
            else:
                raise ValueError(
                    f"{msg} To allow overriding this maximum, set "
                    f"the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. {_LONG_MAX_MODEL_LEN_WARNING}"
                )
    return int(max_model_len)


# vLLM's `MODELS_CONFIG_MAP` model-config updates that change what a ModelConfig answers.
def _set_non_causal(model_config: ModelConfig) -> None:  # Gemma3TextModel
    model_config.hf_config["is_causal"] = not model_config.hf_config["use_bidirectional_attention"]


def _llama_bidirectional(model_config: ModelConfig) -> None:
    hf_config = model_config.hf_config
    hf_config["is_causal"] = False
    pooling_type_map = {"avg": "MEAN", "cls": "CLS", "last": "LAST"}
    pooling_type = pooling_type_map.get(hf_config.get("pooling"))
    if pooling_type is None:
        raise ValueError(f"pool_type {hf_config.get('pooling')!r} not supported")
    assert model_config.pooler_config is not None
    model_config.pooler_config.seq_pooling_type = pooling_type


def _pooler_default(name: str, value: Any) -> Callable[[ModelConfig], None]:
    def update(model_config: ModelConfig) -> None:
        assert model_config.pooler_config is not None
        if getattr(model_config.pooler_config, name) is None:
            setattr(model_config.pooler_config, name, value)

    return update


_MODEL_CONFIG_UPDATES: dict[str, Callable[[ModelConfig], None]] = {
    "Gemma3TextModel": _set_non_causal,
    "LlamaBidirectionalForSequenceClassification": _llama_bidirectional,
    "LlamaBidirectionalModel": _llama_bidirectional,
    "Qwen2ForProcessRewardModel": _pooler_default("step_tag_id", 151651),
    "Qwen2ForRewardModel": _pooler_default("softmax", False),
    "JambaForSequenceClassification": _pooler_default("use_activation", False),
    "JinaVLForRanking": _pooler_default("logit_bias", 2.65),
}
