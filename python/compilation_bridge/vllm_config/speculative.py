"""`SpeculativeConfig`: how vLLM 0.14.0 configures speculative decoding (n-gram lookup, suffix decoding,
EAGLE/EAGLE-3 heads, MTP layers, draft models) against a target model and its parallel layout.

A draft model is read as every model here is: a folder's `config.json` under the allowed roots, through
`ModelConfig`, whose Hugging Face config is a dict. vLLM's transformers configs become dict operations:
`hf_config_override` renames MTP model types in the dict, and an EAGLE head's config is the dict vLLM's
`EAGLEConfig` would hold (the base model's keys, model type "eagle", EAGLE architectures).
"""

import ast
from typing import Any, Literal, Self, get_args

from pydantic import Field, SkipValidation, model_validator
from pydantic.dataclasses import dataclass

from compilation_bridge.vllm_config.hashing import safe_hash, vllm_name
from compilation_bridge.vllm_config.logs import logger
from compilation_bridge.vllm_config.model import ModelConfig
from compilation_bridge.vllm_config.parallel import ParallelConfig

# The chain token tree vLLM builds holds n(n+1)/2 entries for n speculative tokens, and a caller's tree
# is parsed as a Python literal: both are bounded here (vLLM bounds neither; real drafts use a handful).
MAX_TREE_SPECULATIVE_TOKENS = 1024
MAX_TOKEN_TREE_CHARS = 1 << 16

# vLLM's `QuantizationMethods` (vllm.model_executor.layers.quantization), in its order.
QuantizationMethods = Literal[
    "awq",
    "deepspeedfp",
    "fp8",
    "ptpc_fp8",
    "fbgemm_fp8",
    "fp_quant",
    "modelopt",
    "modelopt_fp4",
    "bitblas",
    "gguf",
    "gptq_marlin_24",
    "gptq_marlin",
    "gptq_bitblas",
    "awq_marlin",
    "gptq",
    "compressed-tensors",
    "bitsandbytes",
    "hqq",
    "experts_int8",
    "ipex",
    "quark",
    "moe_wna16",
    "torchao",
    "auto-round",
    "rtn",
    "inc",
    "mxfp4",
    "petit_nvfp4",
    "cpu_awq",
]
MTPModelTypes = Literal[
    "deepseek_mtp",
    "mimo_mtp",
    "glm4_moe_mtp",
    "ernie_mtp",
    "exaone_moe_mtp",
    "qwen3_next_mtp",
    "longcat_flash_mtp",
    "mtp",
    "pangu_ultra_moe_mtp",
]
EagleModelTypes = Literal["eagle", "eagle3", MTPModelTypes]
SpeculativeMethod = Literal[
    "ngram",
    "medusa",
    "mlp_speculator",
    "draft_model",
    "suffix",
    EagleModelTypes,
]

# Model type -> (MTP model type, MTP architecture): the renames of `hf_config_override`, in vLLM's order.
_MTP_RENAMES = (
    ("deepseek_mtp", "DeepSeekMTPModel"),
    ("pangu_ultra_moe_mtp", "OpenPanguMTPModel"),
)
_MTP_BY_TYPE = (
    ("ernie4_5_moe", "ernie_mtp", "ErnieMTPModel"),
    ("qwen3_next", "qwen3_next_mtp", "Qwen3NextMTP"),
    ("exaone_moe", "exaone_moe_mtp", "ExaoneMoeMTP"),
)


def _attr(obj: Any, name: str) -> Any:
    """`obj.name` for a Hugging Face config, which is a dict here; the AttributeError vLLM raises
    for anything else."""
    if isinstance(obj, dict):
        if name not in obj:
            raise AttributeError(f"'{type(obj).__name__}' object has no attribute '{name}'")
        return obj[name]
    raise AttributeError(f"'{type(obj).__name__}' object has no attribute '{name}'")


def _model_type(hf_config: Any) -> Any:
    """A Hugging Face config's model type; transformers' class default is the empty string."""
    if isinstance(hf_config, dict):
        return hf_config.get("model_type", "")
    return _attr(hf_config, "model_type")


def _is_part_of(model_type: Any, text: str) -> bool:
    """vLLM's `model_type in ("...")`: a substring test (the parentheses make no tuple). A config without
    a model type never reaches it in vLLM (transformers refuses to load one), so it matches nothing here."""
    return isinstance(model_type, str) and bool(model_type) and model_type in text


def _eagle_hf_config(base: dict[str, Any], method: str) -> dict[str, Any]:
    """What vLLM's `EAGLEConfig(base, method=method, model_type="eagle")` holds: the base model's keys,
    the base config under "model", and the base architectures renamed to the EAGLE heads'."""
    if method == "eagle":
        archs = [a if a.startswith("Eagle") else f"Eagle{a}" for a in base.get("architectures") or []]
    else:
        archs = [
            a if a.startswith("Eagle3") or a.endswith("Eagle3") else f"Eagle3{a}"
            for a in base.get("architectures") or []
        ]
    return {
        **base,
        "model_type": "eagle",
        "architectures": archs,
        "model": base,
        "truncated_vocab_size": base.get("vocab_size"),
    }


@vllm_name("vllm.config.speculative.SpeculativeConfig")
@dataclass
class SpeculativeConfig:
    """Configuration for speculative decoding."""

    enforce_eager: bool | None = None
    """Override the default enforce_eager from model_config"""
    # General speculative decoding control
    num_speculative_tokens: int = Field(default=None, gt=0)
    """The number of speculative tokens, if provided. It will default to the
    number in the draft model config if present, otherwise, it is required."""
    model: str | None = None
    """The name of the draft model, eagle head, or additional weights, if
    provided."""
    method: SpeculativeMethod | None = None
    """The name of the speculative method to use. If users provide and set the
    `model` param, the speculative method type will be detected automatically
    if possible, if `model` param is not provided, the method name must be
    provided.

    If using `ngram` method, the related configuration `prompt_lookup_max` and
    `prompt_lookup_min` should be considered."""
    draft_tensor_parallel_size: int | None = Field(default=None, ge=1)
    """The degree of the tensor parallelism for the draft model. Can only be 1
    or the same as the target model's tensor parallel size."""

    # Draft model configuration
    quantization: QuantizationMethods | None = None
    """Quantization method that was used to quantize the draft model weights.
    If `None`, we assume the model weights are not quantized. Note that it only
    takes effect when using the draft model-based speculative method."""
    max_model_len: int | None = Field(default=None, ge=1)
    """The maximum model length of the draft model. Used when testing the
    ability to skip speculation for some sequences."""
    revision: str | None = None
    """The specific model version to use for the draft model. It can be a
    branch name, a tag name, or a commit id. If unspecified, will use the
    default version."""
    code_revision: str | None = None
    """The specific revision to use for the draft model code on Hugging Face
    Hub. It can be a branch name, a tag name, or a commit id. If unspecified,
    will use the default version."""

    # Advanced control
    disable_by_batch_size: int | None = Field(default=None, ge=2)
    """Disable speculative decoding for new incoming requests when the number
    of enqueued requests is larger than this value, if provided."""
    disable_padded_drafter_batch: bool = False
    """Disable input padding for speculative decoding. If set to True,
    speculative input batches can contain sequences of different lengths,
    which may only be supported by certain attention backends. This currently
    only affects the EAGLE method of speculation."""

    # Ngram proposer configuration
    prompt_lookup_max: int | None = Field(default=None, ge=1)
    """Maximum size of ngram token window when using Ngram proposer, required
    when method is set to ngram."""
    prompt_lookup_min: int | None = Field(default=None, ge=1)
    """Minimum size of ngram token window when using Ngram proposer, if
    provided. Defaults to 1."""

    speculative_token_tree: str | None = None
    """Specifies the tree structure for speculative token generation.
    """
    # required configuration params passed from engine
    target_model_config: SkipValidation[ModelConfig] = None
    """The configuration of the target model."""
    target_parallel_config: SkipValidation[ParallelConfig] = None
    """The parallel configuration for the target model."""

    # params generated in the post-init stage
    draft_model_config: SkipValidation[ModelConfig] = None
    """The configuration of the draft model initialized internal."""
    draft_parallel_config: SkipValidation[ParallelConfig] = None
    """The parallel configuration for the draft model initialized internal."""

    # Suffix decoding configuration
    suffix_decoding_max_tree_depth: int = 24
    """The maximum depth of the suffix decoding global and prompt trees. The
    tree depth limits the sum of the prefix match and speculation lengths."""

    suffix_decoding_max_cached_requests: int = 10000
    """The maximum number of requests to cache in the global suffix tree. If
    exceeded, will trigger eviction in FIFO order. If set to 0, the global
    suffix tree is disabled and past responses are not cached (prompt trees
    are still used)."""

    suffix_decoding_max_spec_factor: float = 1.0
    """The maximum spec factor for suffix decoding. The spec factor controls
    speculation lengths based on the prefix match length: max_spec_tokens =
    max_spec_factor * prefix_match_length."""

    suffix_decoding_min_token_prob: float = 0.1
    """The minimum token probability for suffix decoding. Will only speculate
    tokens with estimated probability (based on frequency counts) greater than
    or equal to this value."""

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
        # Eagle3 affects the computation graph because it returns intermediate
        # hidden states in addition to the final hidden state.
        factors: list[Any] = [self.method == "eagle3"]
        return str(safe_hash(str(factors).encode()).hexdigest())

    @staticmethod
    def hf_config_override(hf_config: Any) -> Any:
        """vLLM's renames of MTP checkpoints' configs (applied to the draft's config when it loads)."""
        initial_architecture = _attr(hf_config, "architectures")[0]
        if _model_type(hf_config) in ("deepseek_v3", "deepseek_v32"):
            hf_config["model_type"] = "deepseek_mtp"
        if _is_part_of(_model_type(hf_config), "pangu_ultra_moe"):
            hf_config["model_type"] = "pangu_ultra_moe_mtp"
        for model_type, architecture in _MTP_RENAMES:
            if _model_type(hf_config) == model_type:
                n_predict = hf_config.get("num_nextn_predict_layers")
                hf_config.update({"n_predict": n_predict, "architectures": [architecture]})
        _override_by_architecture(hf_config)
        for source, model_type, architecture in _MTP_BY_TYPE:
            if _model_type(hf_config) == source:
                hf_config["model_type"] = model_type
            if _model_type(hf_config) == model_type:
                n_predict = hf_config.get("num_nextn_predict_layers")
                hf_config.update({"n_predict": n_predict, "architectures": [architecture]})
        if _model_type(hf_config) == "longcat_flash":
            hf_config["model_type"] = "longcat_flash_mtp"
            n_predict = hf_config.get("num_nextn_predict_layers", 1)
            hf_config.update({"n_predict": n_predict, "architectures": ["LongCatFlashMTPModel"]})
        if initial_architecture == "MistralLarge3ForCausalLM":
            hf_config.update({"architectures": ["EagleMistralLarge3ForCausalLM"]})
        return hf_config

    def __post_init__(self) -> None:
        # Note: "method" is a new parameter that helps to extend the
        # configuration of non-model-based proposers, and the "model" parameter
        # will be used to set the draft model, eagle head, or additional weight
        # when needed. If users do not specify "method", the speculative method
        # will be detected automatically if possible. If the speculative method
        # can not be detected, it will be considered as the "draft_model" by
        # default.
        if self.method in get_args(MTPModelTypes) and self.method != "mtp":
            logger.warning("method `%s` is deprecated and replaced with mtp.", self.method)
            self.method = "mtp"
        if self.model is None and self.num_speculative_tokens is not None:
            self._default_model()
        # Automatically configure the method for ngram when "model" is used instead of "method".
        if self.method is None and (self.model is not None and self.model in ("ngram", "[ngram]")):
            self.method = "ngram"
        if self.method in ("ngram", "[ngram]"):
            self._configure_ngram()
        elif self.method == "suffix":
            self._validate_suffix_decoding()
        else:
            self.prompt_lookup_max = 0
            self.prompt_lookup_min = 0
            if self.model is not None:
                self._configure_draft()

    def _default_model(self) -> None:
        """The draft a method implies when only a token count is given."""
        if self.method == "mtp":
            if self.target_model_config is None:
                raise ValueError("target_model_config must be present for mtp")
            if _model_type(self.target_model_config.hf_text_config) == "deepseek_v32":
                # vLLM: cudagraphs with V3.2 MTP are not supported yet.
                self.enforce_eager = True
            # use the draft model from the same model:
            self.model = self.target_model_config.model
            # Align the quantization of draft model for cases such as
            # --quantization fp8 with a bf16 checkpoint.
            if not self.quantization:
                self.quantization = self.target_model_config.quantization
        elif self.method in ("ngram", "[ngram]"):
            self.model = "ngram"
        elif self.method == "suffix":
            self.model = "suffix"
        else:
            raise ValueError("num_speculative_tokens was provided but without speculative model.")

    def _configure_ngram(self) -> None:
        # Unified to "ngram" internally
        self.method = "ngram"
        # vLLM's defaults (arbitrarily chosen there) when neither window size is given.
        if self.prompt_lookup_min is None and self.prompt_lookup_max is None:
            self.prompt_lookup_min = 5
            self.prompt_lookup_max = 5
        elif self.prompt_lookup_min is None:
            self.prompt_lookup_min = self.prompt_lookup_max
        elif self.prompt_lookup_max is None:
            self.prompt_lookup_max = self.prompt_lookup_min
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError(
                f"prompt_lookup_min={self.prompt_lookup_min} must "
                f"be <= prompt_lookup_max={self.prompt_lookup_max}"
            )
        # vLLM still reads the vocabulary size from the target model through the draft config.
        self.draft_model_config = self.target_model_config
        self.draft_parallel_config = self.target_parallel_config

    def _configure_draft(self) -> None:
        """A model-based proposer: the draft model's config, its method, token tree, TP and length."""
        self.draft_model_config = self._draft_model_config()
        self._detect_method()
        draft = self.draft_model_config
        if self.method in ("eagle", "eagle3") and _model_type(draft.hf_config) != "eagle":
            # vLLM wraps the head's config in its EAGLEConfig; hf_text_config keeps the base one.
            draft.hf_config = _eagle_hf_config(draft.hf_config, self.method)
            draft.model_arch_config = draft.get_model_arch_config()  # as vLLM: the facts of the new config
        if self.num_speculative_tokens is not None and "num_lookahead_tokens" in draft.hf_config:
            draft.hf_config["num_lookahead_tokens"] = self.num_speculative_tokens
        self._settle_token_count(draft.hf_config.get("n_predict"))
        self.speculative_token_tree = self._token_tree()
        self.draft_tensor_parallel_size = SpeculativeConfig._verify_and_get_draft_tp(
            self.target_parallel_config, self.draft_tensor_parallel_size, draft.hf_config
        )
        draft.max_model_len = SpeculativeConfig._maybe_override_draft_max_model_len(
            self.max_model_len, draft.max_model_len, self.target_model_config.max_model_len
        )
        self.draft_parallel_config = SpeculativeConfig.create_draft_parallel_config(
            self.target_parallel_config, self.draft_tensor_parallel_size
        )

    def _draft_model_config(self) -> ModelConfig:
        target = self.target_model_config
        draft = ModelConfig(
            model=self.model,
            runner="draft",
            tokenizer=target.tokenizer,
            tokenizer_mode=target.tokenizer_mode,
            trust_remote_code=target.trust_remote_code,
            allowed_local_media_path=target.allowed_local_media_path,
            allowed_media_domains=target.allowed_media_domains,
            dtype=target.dtype,
            seed=target.seed,
            revision=self.revision,
            code_revision=self.code_revision,
            tokenizer_revision=target.tokenizer_revision,
            spec_target_max_model_len=target.max_model_len,
            quantization=self.quantization,
            enforce_eager=target.enforce_eager,
            max_logprobs=target.max_logprobs,
            config_format=target.config_format,
        )
        # vLLM hands the override to ModelConfig, which applies it as the config loads; it is kept on
        # the draft config as vLLM keeps it.
        draft.hf_overrides = SpeculativeConfig.hf_config_override
        SpeculativeConfig.hf_config_override(draft.hf_config)
        # vLLM resolves the architecture from the overridden config (an MTP layer's, not its model's).
        draft.model_arch_config = draft.get_model_arch_config()
        draft._architecture = draft.architecture if not draft.architectures else draft.architectures[0]
        return draft

    def _detect_method(self) -> None:
        draft = self.draft_model_config
        model_type = _model_type(draft.hf_config)
        if self.method in ("eagle", "eagle3"):
            pass
        # examples: yuhuili/EAGLE-LLaMA3-Instruct-8B, yuhuili/EAGLE3-LLaMA3.1-Instruct-8B,
        # AngelSlim/Qwen3-8B_eagle3
        elif "eagle-" in draft.model.lower():
            self.method = "eagle"
        elif "eagle3" in draft.model.lower():
            self.method = "eagle3"
        elif model_type == "medusa":
            self.method = "medusa"
        elif model_type == "mlp_speculator":
            self.method = "mlp_speculator"
        elif model_type in get_args(MTPModelTypes):
            self.method = "mtp"
            if self.num_speculative_tokens > 1:
                logger.warning(
                    "Enabling num_speculative_tokens > 1 will run"
                    "multiple times of forward on same MTP layer"
                    ",which may result in lower acceptance rate"
                )
        elif _is_part_of(model_type, "longcat_flash_mtp"):
            self.method = "longcat_flash_mtp"
            if self.num_speculative_tokens > 1:
                logger.warning(
                    "LongCat MTP models only have one layer. Might need some code changes "
                    "to support multiple layers."
                )
        else:
            self.method = "draft_model"
            raise NotImplementedError(
                "Speculative decoding with draft model is not "
                "supported yet. Please consider using other "
                "speculative decoding methods such as ngram, medusa, "
                "eagle, or mtp."
            )

    def _settle_token_count(self, n_predict: Any) -> None:
        if n_predict is None:
            return
        if self.num_speculative_tokens is None:
            # Default to max value defined in draft model config.
            self.num_speculative_tokens = n_predict
        elif self.num_speculative_tokens > n_predict and self.num_speculative_tokens % n_predict != 0:
            # Ensure divisibility for MTP module reuse.
            raise ValueError(
                f"num_speculative_tokens:{self.num_speculative_tokens} must be divisible by {n_predict=}"
            )

    def _token_tree(self) -> str:
        if self.speculative_token_tree is None:
            count = self.num_speculative_tokens
            if isinstance(count, int) and count > MAX_TREE_SPECULATIVE_TOKENS:
                raise ValueError(
                    f"num_speculative_tokens must be at most {MAX_TREE_SPECULATIVE_TOKENS} for a "
                    f"model-based proposer, got {count}"
                )
            # Generate chain of tokens.
            return str([(i + 1) * (0,) for i in range(count)])
        if len(self.speculative_token_tree) > MAX_TOKEN_TREE_CHARS:
            raise ValueError(f"speculative_token_tree must be at most {MAX_TOKEN_TREE_CHARS} characters")
        # Sort the token tree breadth-first.
        tree_choices = ast.literal_eval(self.speculative_token_tree)
        return str(sorted(tree_choices, key=lambda t: (len(t), t)))

    def _validate_suffix_decoding(self) -> None:
        # vLLM checks for the arctic-inference package first; this worker never has it (it serves
        # configuration only), so suffix decoding fails as vLLM 0.14.0 does without the package.
        raise ImportError(
            "Arctic Inference is required for suffix decoding. "
            "Install via `pip install arctic-inference==0.1.1`."
        )

    @staticmethod
    def _maybe_override_draft_max_model_len(
        speculative_max_model_len: int | None,
        draft_max_model_len: int,
        target_max_model_len: int,
    ) -> int:
        """Determine the max sequence len for the draft model. This is usually
        the draft_max_model_len, but may be the target_max_model_len if it is
        less than the draft_max_model_len, or may be speculative_max_model_len
        if it is specified.

        This is necessary so that sequences do not exceed the capacity of the
        draft model or the target model.

        speculative_max_model_len is mainly used for testing that sequences can
        skip speculation.
        """
        if speculative_max_model_len is not None:
            if speculative_max_model_len > draft_max_model_len:
                raise ValueError(f"{speculative_max_model_len=} cannot be larger than {draft_max_model_len=}")
            if speculative_max_model_len > target_max_model_len:
                raise ValueError(
                    f"{speculative_max_model_len=} cannot be larger than {target_max_model_len=}"
                )
            return speculative_max_model_len
        return min(draft_max_model_len, target_max_model_len)

    @staticmethod
    def _verify_and_get_draft_tp(
        target_parallel_config: ParallelConfig,
        speculative_draft_tensor_parallel_size: int | None,
        draft_hf_config: Any,
    ) -> int:
        """
        Verifies and adjusts the tensor parallel size for a draft model
        specified using speculative_draft_tensor_parallel_size.
        """
        # If speculative_draft_tensor_parallel_size is unset then set it
        # appropriately else verify that it is set correctly.
        if speculative_draft_tensor_parallel_size is None:
            if _model_type(draft_hf_config) == "mlp_speculator":
                speculative_draft_tensor_parallel_size = 1
                if target_parallel_config.tensor_parallel_size > 1:
                    logger.warning(
                        "%s cannot currently be run with tp>1; "
                        "setting speculative_draft_tensor_parallel_size=1",
                        draft_hf_config["model_type"],
                    )
            else:
                speculative_draft_tensor_parallel_size = target_parallel_config.tensor_parallel_size
        elif speculative_draft_tensor_parallel_size not in (1, target_parallel_config.tensor_parallel_size):
            raise ValueError(
                f"{speculative_draft_tensor_parallel_size=} cannot be "
                f"other value than 1 or target model tensor_parallel_size"
            )
        return speculative_draft_tensor_parallel_size

    @staticmethod
    def create_draft_parallel_config(
        target_parallel_config: ParallelConfig,
        speculative_draft_tensor_parallel_size: int,
    ) -> ParallelConfig:
        """Create a parallel config for use by the draft worker.

        This is mostly a copy of the target parallel config, except the tp_size.
        """
        return ParallelConfig(
            pipeline_parallel_size=target_parallel_config.pipeline_parallel_size,
            tensor_parallel_size=speculative_draft_tensor_parallel_size,
            distributed_executor_backend=target_parallel_config.distributed_executor_backend,
            max_parallel_loading_workers=target_parallel_config.max_parallel_loading_workers,
            disable_custom_all_reduce=target_parallel_config.disable_custom_all_reduce,
            ray_workers_use_nsight=target_parallel_config.ray_workers_use_nsight,
            placement_group=target_parallel_config.placement_group,
        )

    @model_validator(mode="after")
    def _verify_args(self) -> Self:
        if self.num_speculative_tokens is None:
            raise ValueError(
                "num_speculative_tokens must be provided with "
                "speculative model unless the draft model config contains an "
                "n_predict parameter."
            )
        if self.num_speculative_tokens <= 0:
            raise ValueError(
                f"Expected num_speculative_tokens to be greater than zero ({self.num_speculative_tokens})."
            )
        if self.draft_model_config:
            self.draft_model_config.verify_with_parallel_config(self.draft_parallel_config)
        if self.disable_by_batch_size is not None and self.disable_by_batch_size < 2:
            raise ValueError(
                "Expect the batch size threshold of disabling "
                "speculative decoding is > 1, but got "
                f"{self.disable_by_batch_size=}"
            )
        self._check_eagle3_target()
        return self

    def _check_eagle3_target(self) -> None:
        eagle3_target_supported = ["llama", "qwen", "minicpm", "gpt_oss"]
        if self.method != "eagle3" or not self.target_model_config:
            return
        model_type = _model_type(self.target_model_config.hf_text_config)
        if not any(supported in model_type for supported in eagle3_target_supported):
            raise ValueError(
                f"Eagle3 is only supported for {eagle3_target_supported} models. "
                f"Got self.target_model_config.hf_text_config.model_type={model_type!r}"
            )

    def use_eagle(self) -> bool:
        return self.method in ("eagle", "eagle3", "mtp")

    def __repr__(self) -> str:
        method = self.method
        model = None if method in ("ngram", "suffix") else self.draft_model_config.model
        num_spec_tokens = self.num_speculative_tokens
        return f"SpeculativeConfig({method=}, {model=}, {num_spec_tokens=})"


def _override_by_architecture(hf_config: dict[str, Any]) -> None:
    """The renames `hf_config_override` keys on the (current) first architecture."""
    architecture = hf_config["architectures"][0]
    if architecture == "MiMoForCausalLM":
        hf_config["model_type"] = "mimo_mtp"
        n_predict = hf_config.get("num_nextn_predict_layers")
        hf_config.update({"num_hidden_layers": 0, "n_predict": n_predict, "architectures": ["MiMoMTPModel"]})
    if hf_config["architectures"][0] == "Glm4MoeForCausalLM":
        hf_config["model_type"] = "glm4_moe_mtp"
        n_predict = hf_config.get("num_nextn_predict_layers")
        hf_config.update({"n_predict": n_predict, "architectures": ["Glm4MoeMTPModel"]})
