"""`SchedulerConfig`: the scheduler limits that size compile ranges and cudagraph captures.

`get_scheduler_cls` answers the qualified name of the scheduler class vLLM would use, never the class: the
classes live in vLLM's engine, which this worker does not hold, and a class that came back over the wire
would be a ref no caller can use. The name is what `scheduler_cls` itself takes, so a caller can pass it on.
"""

from collections.abc import Callable
from dataclasses import InitVar
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator
from pydantic.dataclasses import dataclass

from compilation_bridge.vllm_config.hashing import qualified_name, safe_hash, vllm_name
from compilation_bridge.vllm_config.logs import logger, warning_once

RunnerType = Literal["generate", "pooling", "draft"]
SchedulerPolicy = Literal["fcfs", "priority"]
# The classes vLLM 0.14.0's get_scheduler_cls imports when no scheduler_cls is given.
SCHEDULER = "vllm.v1.core.sched.scheduler.Scheduler"
ASYNC_SCHEDULER = "vllm.v1.core.sched.async_scheduler.AsyncScheduler"


@vllm_name("vllm.config.scheduler.SchedulerConfig")
@dataclass
class SchedulerConfig:
    """Scheduler configuration."""

    max_model_len: InitVar[int]
    """Maximum length of a sequence (including prompt and generated text).

    Note: This is stored in the ModelConfig, and is used only here to
    provide fallbacks and validate other attributes."""
    is_encoder_decoder: InitVar[bool]
    """True if the model is an encoder-decoder model.

    Note: This is stored in the ModelConfig, and is used only here to
    disable chunked prefill and prefix caching for encoder-decoder models.
    """

    DEFAULT_MAX_NUM_BATCHED_TOKENS: ClassVar[int] = 2048
    DEFAULT_MAX_NUM_SEQS: ClassVar[int] = 128

    runner_type: RunnerType = "generate"
    """The runner type to launch for the model."""
    max_num_batched_tokens: int = Field(default=DEFAULT_MAX_NUM_BATCHED_TOKENS, ge=1)
    """Maximum number of tokens to be processed in a single iteration.

    The default value here is mainly for convenience when testing.
    In real usage, this should be set in `EngineArgs.create_engine_config`.
    """
    max_num_seqs: int = Field(default=DEFAULT_MAX_NUM_SEQS, ge=1)
    """Maximum number of sequences to be processed in a single iteration.

    The default value here is mainly for convenience when testing.
    In real usage, this should be set in `EngineArgs.create_engine_config`.
    """
    max_num_partial_prefills: int = Field(default=1, ge=1)
    """For chunked prefill, the maximum number of sequences that can be
    partially prefilled concurrently."""
    max_long_partial_prefills: int = Field(default=1, ge=1)
    """For chunked prefill, the maximum number of prompts longer than
    long_prefill_token_threshold that will be prefilled concurrently. Setting
    this less than max_num_partial_prefills will allow shorter prompts to jump
    the queue in front of longer prompts in some cases, improving latency."""
    long_prefill_token_threshold: int = 0
    """For chunked prefill, a request is considered long if the prompt is
    longer than this number of tokens."""
    enable_chunked_prefill: bool = True
    """If True, prefill requests can be chunked based
    on the remaining `max_num_batched_tokens`.

    The default value here is mainly for convenience when testing.
    In real usage, this should be set in `EngineArgs.create_engine_config`.
    """
    is_multimodal_model: bool = False
    """True if the model is multimodal."""
    max_num_encoder_input_tokens: int = Field(init=False)
    """Multimodal encoder compute budget, only used in V1.

    NOTE: This is not currently configurable. It will be overridden by
    max_num_batched_tokens in case max multimodal embedding size is larger."""
    encoder_cache_size: int = Field(init=False)
    """Multimodal encoder cache size, only used in V1.

    NOTE: This is not currently configurable. It will be overridden by
    max_num_batched_tokens in case max multimodal embedding size is larger."""
    policy: SchedulerPolicy = "fcfs"
    """The scheduling policy to use:\n
    - "fcfs" means first come first served, i.e. requests are handled in order
    of arrival.\n
    - "priority" means requests are handled based on given priority (lower
    value means earlier handling) and time of arrival deciding any ties)."""
    disable_chunked_mm_input: bool = False
    """If set to true and chunked prefill is enabled, we do not want to
    partially schedule a multimodal item. Only used in V1
    This ensures that if a request has a mixed prompt
    (like text tokens TTTT followed by image tokens IIIIIIIIII) where only
    some image tokens can be scheduled (like TTTTIIIII, leaving IIIII),
    it will be scheduled as TTTT in one step and IIIIIIIIII in the next."""
    # A class is accepted as in vLLM (only the config classes this worker hands out can arrive); a name is
    # never imported.
    scheduler_cls: str | type[object] = Field(default=None)
    """The scheduler class to use. "vllm.v1.core.sched.scheduler.Scheduler" is
    the default scheduler. Can be a class directly or the path to a class of
    form "mod.custom_class"."""
    disable_hybrid_kv_cache_manager: bool | None = None
    """If set to True, KV cache manager will allocate the same size of KV cache
    for all attention layers even if there are multiple type of attention layers
    like full attention and sliding window attention.
    If set to None, the default value will be determined based on the environment
    and starting configuration.
    """
    async_scheduling: bool = Field(default=None)
    """If set to False, disable async scheduling. Async scheduling helps to
    avoid gaps in GPU utilization, leading to better latency and throughput.
    It is currently not supported with some features such as
    speculative decoding and pipeline parallelism, and will be automatically
    disabled in those cases.
    """
    stream_interval: int = Field(default=1, ge=1)
    """The interval (or buffer size) for streaming in terms of token length.
    A smaller value (1) makes streaming smoother by sending each token immediately,
    while a larger value (e.g., 10) reduces host overhead and may increase throughput
    by batching multiple tokens before sending."""

    @staticmethod
    def default_factory(**kwargs: Any) -> "SchedulerConfig":
        kwargs.setdefault("max_model_len", 8192)
        kwargs.setdefault("is_encoder_decoder", False)
        return SchedulerConfig(**kwargs)

    def get_scheduler_cls(self) -> str:
        """The qualified name of the scheduler class vLLM would use (see the module docstring). A custom
        name is answered as given once it has the form vLLM's import needs, without importing it: a name
        vLLM could not import fails only where vLLM's engine starts."""
        if self.scheduler_cls is None:
            return ASYNC_SCHEDULER if self.async_scheduling else SCHEDULER
        warning_once(
            "Using custom scheduler class %s. This scheduler interface is "
            "not public and compatibility may not be maintained.",
            self.scheduler_cls,
        )
        if not isinstance(self.scheduler_cls, str):
            return qualified_name(self.scheduler_cls)
        return _checked_qualname(self.scheduler_cls)

    def compute_hash(self) -> str:
        factors: list[Any] = [self.max_num_batched_tokens]
        return safe_hash(str(factors).encode()).hexdigest()

    @field_validator("scheduler_cls", "async_scheduling", mode="wrap")
    @classmethod
    def _skip_none_validation(cls, value: Any, handler: Callable[[Any], Any]) -> Any:
        return None if value is None else handler(value)

    def __post_init__(self, max_model_len: int, is_encoder_decoder: bool) -> None:
        if is_encoder_decoder:
            self.disable_chunked_mm_input = True
            self.enable_chunked_prefill = False
            self.long_prefill_token_threshold = 0
        self.max_num_encoder_input_tokens = self.max_num_batched_tokens
        self.encoder_cache_size = self.max_num_batched_tokens
        if self.max_num_partial_prefills > 1 and self.long_prefill_token_threshold == 0:
            self.long_prefill_token_threshold = int(max_model_len * 0.04)
        self.verify_max_model_len(max_model_len)

    def verify_max_model_len(self, max_model_len: int) -> "SchedulerConfig":
        if self.max_num_batched_tokens < max_model_len and not self.enable_chunked_prefill:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) is "
                f"smaller than max_model_len ({max_model_len}). "
                "This effectively limits the maximum sequence length to "
                "max_num_batched_tokens and makes vLLM reject longer "
                "sequences. Please increase max_num_batched_tokens or "
                "decrease max_model_len."
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must "
                "be greater than or equal to max_num_seqs "
                f"({self.max_num_seqs})."
            )
        if self.max_num_batched_tokens > self.max_num_seqs * max_model_len:
            logger.warning(
                "max_num_batched_tokens (%d) exceeds max_num_seqs * max_model_len (%d). "
                "This may lead to unexpected behavior.",
                self.max_num_batched_tokens,
                self.max_num_seqs * max_model_len,
            )
        if self.max_num_partial_prefills > 1:
            if not self.enable_chunked_prefill:
                raise ValueError("Chunked prefill must be enabled to set max_num_partial_prefills > 1.")
            if self.long_prefill_token_threshold > max_model_len:
                raise ValueError(
                    f"long_prefill_token_threshold ({self.long_prefill_token_threshold}) "
                    f"cannot be greater than the max_model_len ({max_model_len})."
                )
        if self.max_long_partial_prefills > self.max_num_partial_prefills:
            raise ValueError(
                f"{self.max_long_partial_prefills=} must be less than or equal to "
                f"{self.max_num_partial_prefills=}."
            )
        return self


def _checked_qualname(qualname: str) -> str:
    """The errors vLLM's `resolve_obj_by_qualname` raises before it imports anything, for a malformed name."""
    module_name, _obj_name = qualname.rsplit(".", 1)
    if module_name.startswith("."):
        raise TypeError(
            f"the 'package' argument is required to perform a relative import for {module_name!r}"
        )
    if not module_name:
        raise ValueError("Empty module name")
    return qualname
