"""`LoRAConfig`: how vLLM 0.14.0 serves LoRA adapters (rank, adapters per batch and in CPU memory, the
adapters' dtype, sharding), and how a model's dtype settles the adapters' one."""

from typing import Annotated, Any, Literal, Self

from pydantic import ConfigDict, Field, GetCoreSchemaHandler, model_validator
from pydantic.dataclasses import dataclass
from pydantic_core import CoreSchema, core_schema

from compilation_bridge.vllm_config.hashing import safe_hash, vllm_name
from compilation_bridge.vllm_config.model import STR_TO_DTYPE, DType

LoRADType = Literal["auto", "float16", "bfloat16"]
MaxLoRARanks = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]
LoRAExtraVocabSize = Literal[256, 512]


class _AsTorchDType:
    """Validates a `DType` where vLLM's field takes a `torch.dtype`, under torch's class name, so a refused
    value gets vLLM's error text (`is-instance[dtype]`, "an instance of dtype")."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.is_instance_schema(DType, cls_repr="dtype")


TorchDType = Annotated[DType, _AsTorchDType]


def _torch_dtype(name: str) -> DType:
    """`getattr(torch, name)` for the dtype names this worker models (torch's aliases among them)."""
    if name in STR_TO_DTYPE:
        return STR_TO_DTYPE[name]
    raise AttributeError(f"module 'torch' has no attribute '{name}'")


@vllm_name("vllm.config.lora.LoRAConfig")
@dataclass(config=ConfigDict(arbitrary_types_allowed=True))
class LoRAConfig:
    """Configuration for LoRA."""

    max_lora_rank: MaxLoRARanks = 16
    """Max LoRA rank."""
    max_loras: int = Field(default=1, ge=1)
    """Max number of LoRAs in a single batch."""
    fully_sharded_loras: bool = False
    """By default, only half of the LoRA computation is sharded with tensor
    parallelism. Enabling this will use the fully sharded layers. At high
    sequence length, max rank or tensor parallel size, this is likely faster.
    """
    max_cpu_loras: int | None = None
    """Maximum number of LoRAs to store in CPU memory. Must be >= than
    `max_loras`."""
    lora_dtype: TorchDType | LoRADType = "auto"
    """Data type for LoRA. If auto, will default to base model dtype."""
    default_mm_loras: dict[str, str] | None = None
    """Dictionary mapping specific modalities to LoRA model paths; this field
    is only applicable to multimodal models and should be leveraged when a
    model always expects a LoRA to be active when a given modality is present.
    Note that currently, if a request provides multiple additional
    modalities, each of which have their own LoRA, we do NOT apply
    default_mm_loras because we currently only support one lora adapter
    per prompt. When run in offline mode, the lora IDs for n modalities
    will be automatically assigned to 1-n with the names of the modalities
    in alphabetic order."""
    enable_tower_connector_lora: bool = False
    """If `True`, LoRA support for the tower (vision encoder) and connector
    of multimodal models will be enabled. This is an experimental feature and
    currently only supports some MM models such as the Qwen VL series. The default
    is False."""

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
        # A settled dtype prints as torch prints it ("torch.float16"), so the text hashed is vLLM's.
        factors: list[Any] = [
            self.max_lora_rank,
            self.max_loras,
            self.fully_sharded_loras,
            self.lora_dtype,
            self.enable_tower_connector_lora,
        ]
        return str(safe_hash(str(factors).encode()).hexdigest())

    @model_validator(mode="after")
    def _validate_lora_config(self) -> Self:
        if self.max_cpu_loras is None:
            self.max_cpu_loras = self.max_loras
        elif self.max_cpu_loras < self.max_loras:
            raise ValueError(f"max_cpu_loras ({self.max_cpu_loras}) must be >= max_loras ({self.max_loras}).")
        return self

    def verify_with_model_config(self, model_config: Any) -> None:
        # As vLLM, a missing model config fails on `.dtype` only when the dtype is still to settle.
        if self.lora_dtype in (None, "auto"):
            self.lora_dtype = model_config.dtype
        elif isinstance(self.lora_dtype, str):
            self.lora_dtype = _torch_dtype(self.lora_dtype)
