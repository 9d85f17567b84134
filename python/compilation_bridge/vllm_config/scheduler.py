"""`SchedulerConfig`: the scheduler limits that size compile ranges and cudagraph captures."""

from collections.abc import Callable
from dataclasses import InitVar
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator
from pydantic.dataclasses import dataclass

from compilation_bridge.vllm_config.hashing import safe_hash, vllm_name
from compilation_bridge.vllm_config.logs import logger

RunnerType = Literal["generate", "pooling", "draft"]
SchedulerPolicy = Literal["fcfs", "priority"]


@vllm_name("vllm.config.scheduler.SchedulerConfig")
@dataclass
class SchedulerConfig:
    max_model_len: InitVar[int]
    is_encoder_decoder: InitVar[bool]

    DEFAULT_MAX_NUM_BATCHED_TOKENS: ClassVar[int] = 2048
    DEFAULT_MAX_NUM_SEQS: ClassVar[int] = 128

    runner_type: RunnerType = "generate"
    max_num_batched_tokens: int = Field(default=DEFAULT_MAX_NUM_BATCHED_TOKENS, ge=1)
    max_num_seqs: int = Field(default=DEFAULT_MAX_NUM_SEQS, ge=1)
    max_num_partial_prefills: int = Field(default=1, ge=1)
    max_long_partial_prefills: int = Field(default=1, ge=1)
    long_prefill_token_threshold: int = 0
    enable_chunked_prefill: bool = True
    is_multimodal_model: bool = False
    max_num_encoder_input_tokens: int = Field(init=False)
    encoder_cache_size: int = Field(init=False)
    policy: SchedulerPolicy = "fcfs"
    disable_chunked_mm_input: bool = False
    # vLLM also accepts a class here; over the wire only a qualified name can arrive, never resolved.
    scheduler_cls: str = Field(default=None)
    disable_hybrid_kv_cache_manager: bool | None = None
    async_scheduling: bool = Field(default=None)
    stream_interval: int = Field(default=1, ge=1)

    @staticmethod
    def default_factory(**kwargs: Any) -> "SchedulerConfig":
        kwargs.setdefault("max_model_len", 8192)
        kwargs.setdefault("is_encoder_decoder", False)
        return SchedulerConfig(**kwargs)

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
