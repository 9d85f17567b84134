"""`AttentionConfig`: the attention-backend settings of vLLM 0.14.0, and the backend enum it names."""

import dataclasses
import os
from collections.abc import Callable
from enum import Enum, EnumMeta
from typing import Any, Literal

from pydantic import field_validator
from pydantic.dataclasses import dataclass

from compilation_bridge.vllm_config.env import env_with_choices, int_flag, is_set, optional_int
from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors, vllm_name
from compilation_bridge.vllm_config.logs import warning_once


class _AttentionBackendEnumMeta(EnumMeta):
    """vLLM's metaclass: an unknown backend name is a ValueError listing the valid ones."""

    def __getitem__(cls, name: str) -> Any:
        try:
            return super().__getitem__(name)
        except KeyError:
            valid_backends = ", ".join(cls.__members__.keys())
            raise ValueError(
                f"Unknown attention backend: '{name}'. Valid options are: {valid_backends}"
            ) from None


@vllm_name("vllm.v1.attention.backends.registry.AttentionBackendEnum")
class AttentionBackendEnum(Enum, metaclass=_AttentionBackendEnumMeta):
    """Enumeration of all supported attention backends.

    The enum value is the default class path, but this can be overridden
    at runtime using register_backend().
    """

    FLASH_ATTN = "vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"
    FLASH_ATTN_DIFFKV = "vllm.v1.attention.backends.flash_attn_diffkv.FlashAttentionDiffKVBackend"
    TRITON_ATTN = "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"
    ROCM_ATTN = "vllm.v1.attention.backends.rocm_attn.RocmAttentionBackend"
    ROCM_AITER_MLA = "vllm.v1.attention.backends.mla.rocm_aiter_mla.AiterMLABackend"
    ROCM_AITER_TRITON_MLA = "vllm.v1.attention.backends.mla.aiter_triton_mla.AiterTritonMLABackend"
    ROCM_AITER_FA = "vllm.v1.attention.backends.rocm_aiter_fa.AiterFlashAttentionBackend"
    ROCM_AITER_MLA_SPARSE = "vllm.v1.attention.backends.mla.rocm_aiter_mla_sparse.ROCMAiterMLASparseBackend"
    TORCH_SDPA = ""  # this tag is only used for ViT
    FLASHINFER = "vllm.v1.attention.backends.flashinfer.FlashInferBackend"
    FLASHINFER_MLA = "vllm.v1.attention.backends.mla.flashinfer_mla.FlashInferMLABackend"
    TRITON_MLA = "vllm.v1.attention.backends.mla.triton_mla.TritonMLABackend"
    CUTLASS_MLA = "vllm.v1.attention.backends.mla.cutlass_mla.CutlassMLABackend"
    FLASHMLA = "vllm.v1.attention.backends.mla.flashmla.FlashMLABackend"
    FLASHMLA_SPARSE = "vllm.v1.attention.backends.mla.flashmla_sparse.FlashMLASparseBackend"
    FLASH_ATTN_MLA = "vllm.v1.attention.backends.mla.flashattn_mla.FlashAttnMLABackend"
    IPEX = "vllm.v1.attention.backends.ipex.IpexAttentionBackend"
    NO_ATTENTION = "vllm.v1.attention.backends.no_attention.NoAttentionBackend"
    FLEX_ATTENTION = "vllm.v1.attention.backends.flex_attention.FlexAttentionBackend"
    TREE_ATTN = "vllm.v1.attention.backends.tree_attn.TreeAttentionBackend"
    ROCM_AITER_UNIFIED_ATTN = (
        "vllm.v1.attention.backends.rocm_aiter_unified_attn.RocmAiterUnifiedAttentionBackend"
    )
    CPU_ATTN = "vllm.v1.attention.backends.cpu_attn.CPUAttentionBackend"
    # Placeholder for third-party/custom backends - must be registered before use
    # set to None to avoid alias with other backend, whose value is an empty string
    CUSTOM = None

    def get_path(self, include_classname: bool = True) -> str:
        """Get the class path for this backend.

        Raises:
            ValueError: If Backend.CUSTOM is used without being registered
        """
        # vLLM consults its override registry first; nothing is ever registered in this worker (it
        # serves no register_backend and never imports a backend), so the default path is the answer.
        path = self.value
        if not path:
            raise ValueError(
                f"Backend {self.name} must be registered before use. "
                f"Use register_backend(Backend.{self.name}, 'your.module.YourClass')"
            )
        if not include_classname:
            path = path.rsplit(".", 1)[0]
        return str(path)

    def is_overridden(self) -> bool:
        """Check if this backend has been overridden (never, in this worker)."""
        return False


def _trtllm_attention() -> bool | None:
    value = os.environ.get("VLLM_USE_TRTLLM_ATTENTION")
    return None if value is None else value.lower() in ("1", "true")


# The environment variables AttentionConfig reads, each parsed as vLLM's `envs` parses it.
ENV_READERS: dict[str, Callable[[], Any]] = {
    "VLLM_ATTENTION_BACKEND": lambda: env_with_choices(
        "VLLM_ATTENTION_BACKEND", None, list(AttentionBackendEnum.__members__.keys())
    ),
    "VLLM_FLASH_ATTN_VERSION": lambda: optional_int("VLLM_FLASH_ATTN_VERSION"),
    "VLLM_V1_USE_PREFILL_DECODE_ATTENTION": lambda: (
        os.getenv("VLLM_V1_USE_PREFILL_DECODE_ATTENTION", "False").lower() in ("true", "1")
    ),
    "VLLM_FLASH_ATTN_MAX_NUM_SPLITS_FOR_CUDA_GRAPH": lambda: int(
        os.getenv("VLLM_FLASH_ATTN_MAX_NUM_SPLITS_FOR_CUDA_GRAPH", "32")
    ),
    "VLLM_USE_CUDNN_PREFILL": lambda: int_flag("VLLM_USE_CUDNN_PREFILL"),
    "VLLM_USE_TRTLLM_RAGGED_DEEPSEEK_PREFILL": lambda: int_flag("VLLM_USE_TRTLLM_RAGGED_DEEPSEEK_PREFILL"),
    "VLLM_USE_TRTLLM_ATTENTION": _trtllm_attention,
    "VLLM_DISABLE_FLASHINFER_PREFILL": lambda: os.environ.get("VLLM_DISABLE_FLASHINFER_PREFILL", "0") == "1",
    "VLLM_FLASHINFER_DISABLE_Q_QUANTIZATION": lambda: int_flag("VLLM_FLASHINFER_DISABLE_Q_QUANTIZATION"),
}


@vllm_name("vllm.config.attention.AttentionConfig")
@dataclass
class AttentionConfig:
    """Configuration for attention mechanisms in vLLM."""

    backend: AttentionBackendEnum | None = None
    """Attention backend to use. If None, will be selected automatically."""

    flash_attn_version: Literal[2, 3] | None = None
    """Force vllm to use a specific flash-attention version (2 or 3).
    Only valid when using the flash-attention backend."""

    use_prefill_decode_attention: bool = False
    """Use separate prefill and decode kernels for attention instead of
    the unified triton kernel."""

    flash_attn_max_num_splits_for_cuda_graph: int = 32
    """Flash Attention max number splits for cuda graph decode."""

    use_cudnn_prefill: bool = False
    """Whether to use cudnn prefill."""

    use_trtllm_ragged_deepseek_prefill: bool = False
    """Whether to use TRTLLM ragged deepseek prefill."""

    use_trtllm_attention: bool | None = None
    """If set to True/False, use or don't use the TRTLLM attention backend
    in flashinfer. If None, auto-detect the attention backend in flashinfer."""

    disable_flashinfer_prefill: bool = False
    """Whether to disable flashinfer prefill."""

    disable_flashinfer_q_quantization: bool = False
    """If set, when using fp8 kv, do not quantize Q to fp8."""

    def compute_hash(self) -> str:
        """
        Provide a hash that uniquely identifies all the configs
        that affect the structure of the computation
        graph from input ids/embeddings to the final hidden states,
        excluding anything before input ids/embeddings and after
        the final hidden states.
        """
        return hash_factors(get_hash_factors(self, ()))

    @field_validator("backend", mode="before")
    @classmethod
    def validate_backend_before(cls, value: Any) -> Any:
        """Enable parsing of the `backend` enum type from string."""
        if isinstance(value, str):
            return AttentionBackendEnum[value.upper()]
        return value

    def _set_from_env_if_set(self, field_name: str, env_var_name: str) -> None:
        """Set field from env var if set, with deprecation warning."""
        # vLLM reads any of its environment variables into any attribute; a caller reaches this method,
        # so it is held to the variables and fields AttentionConfig itself pairs.
        if env_var_name not in ENV_READERS:
            raise ValueError(
                f"{env_var_name!r} is not one of the environment variables AttentionConfig reads"
            )
        if field_name not in _FIELD_NAMES:
            raise ValueError(f"{field_name!r} is not a field of AttentionConfig")
        if is_set(env_var_name):
            value = ENV_READERS[env_var_name]()
            if field_name == "backend":
                value = self.validate_backend_before(value)
            setattr(self, field_name, value)
            warning_once(
                "Using %s environment variable is deprecated and will be removed in "
                "v0.14.0 or v1.0.0, whichever is soonest. Please use "
                "--attention-config.%s command line argument or "
                "AttentionConfig(%s=...) config field instead.",
                env_var_name,
                field_name,
                field_name,
            )

    def __post_init__(self) -> None:
        self._set_from_env_if_set("backend", "VLLM_ATTENTION_BACKEND")
        self._set_from_env_if_set("flash_attn_version", "VLLM_FLASH_ATTN_VERSION")
        self._set_from_env_if_set("use_prefill_decode_attention", "VLLM_V1_USE_PREFILL_DECODE_ATTENTION")
        self._set_from_env_if_set(
            "flash_attn_max_num_splits_for_cuda_graph", "VLLM_FLASH_ATTN_MAX_NUM_SPLITS_FOR_CUDA_GRAPH"
        )
        self._set_from_env_if_set("use_cudnn_prefill", "VLLM_USE_CUDNN_PREFILL")
        self._set_from_env_if_set(
            "use_trtllm_ragged_deepseek_prefill", "VLLM_USE_TRTLLM_RAGGED_DEEPSEEK_PREFILL"
        )
        self._set_from_env_if_set("use_trtllm_attention", "VLLM_USE_TRTLLM_ATTENTION")
        self._set_from_env_if_set("disable_flashinfer_prefill", "VLLM_DISABLE_FLASHINFER_PREFILL")
        self._set_from_env_if_set(
            "disable_flashinfer_q_quantization", "VLLM_FLASHINFER_DISABLE_Q_QUANTIZATION"
        )


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(AttentionConfig))
