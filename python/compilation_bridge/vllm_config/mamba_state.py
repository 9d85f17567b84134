"""The page-size arithmetic vLLM 0.14.0 uses to align a hybrid attention/Mamba model's KV-cache pages.

`HybridAttentionMambaModelConfig.verify_and_update_config` (model_updates.py) compares the page of one
attention token with the page of one Mamba state. vLLM takes these from its KV-cache specs
(vllm/v1/kv_cache_interface.py) and from the model class's `get_mamba_state_shape_from_config` and
`get_mamba_state_dtype_from_config`, built on `MambaStateShapeCalculator` and `MambaStateDtypeCalculator`
(vllm/model_executor/layers/mamba/mamba_utils.py). This module mirrors those pieces for the hybrid
architectures the product's registry knows, without torch: a dtype is a `DType`, which knows its size.

The model's config is a dict here, where vLLM holds a transformers config object, so an attribute the
config.json omits is read with the default of the transformers (or vLLM) config class that vLLM would
have built for the model type (`hf_attr`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod
from typing import Any

from compilation_bridge.vllm_config.model import BFLOAT16, FLOAT16, FLOAT32, DType

Shape = tuple[int, ...]
StateShapes = tuple[Shape, ...]
StateDTypes = tuple[DType, ...]

UINT8, INT8, FLOAT8_E4M3FN = DType("uint8", 1), DType("int8", 1), DType("float8_e4m3fn", 1)

# vLLM's STR_DTYPE_TO_TORCH_DTYPE (vllm/utils/torch_utils.py): cache dtype names to dtypes.
STR_DTYPE_TO_DTYPE: dict[str, DType] = {
    "float32": FLOAT32,
    "half": FLOAT16,
    "float16": FLOAT16,
    "bfloat16": BFLOAT16,
    "float": FLOAT32,
    "fp8": UINT8,
    "fp8_e4m3": UINT8,
    "fp8_e5m2": UINT8,
    "int8": INT8,
    "fp8_inc": FLOAT8_E4M3FN,
    "fp8_ds_mla": UINT8,
}


def cdiv(a: int, b: int) -> int:
    """vLLM's `cdiv` (vllm/utils/math_utils.py): ceiling division."""
    return -(a // -b)


def divide(numerator: int, denominator: int) -> int:
    """vLLM's `divide` (vllm/distributed/utils.py), with its `ensure_divisibility` assertion."""
    assert numerator % denominator == 0, f"{numerator} is not divisible by {denominator}"
    return numerator // denominator


def get_kv_cache_dtype(cache_dtype: str | DType, model_dtype: str | DType) -> DType:
    """vLLM's `get_kv_cache_torch_dtype`: a cache dtype name, where "auto" follows the model's dtype."""
    if isinstance(cache_dtype, DType):
        return cache_dtype
    if not isinstance(cache_dtype, str):
        raise ValueError(f"Invalid kv cache dtype: {cache_dtype}")
    if cache_dtype != "auto":
        if cache_dtype not in STR_DTYPE_TO_DTYPE:
            raise ValueError(f"Invalid kv cache dtype: {cache_dtype}")
        return STR_DTYPE_TO_DTYPE[cache_dtype]
    if isinstance(model_dtype, str) and model_dtype in STR_DTYPE_TO_DTYPE:
        return STR_DTYPE_TO_DTYPE[model_dtype]
    if isinstance(model_dtype, DType):
        return model_dtype
    raise ValueError(f"Invalid model dtype: {model_dtype}")


# --- KV-cache specs' page sizes (vllm/v1/kv_cache_interface.py) ------------------------------------------


def full_attention_page_size(block_size: int, num_kv_heads: int, head_size: int, dtype: DType) -> int:
    """`FullAttentionSpec(...).page_size_bytes`, unpadded: keys and values (`head_size_v` defaults to
    `head_size`) for `block_size` tokens."""
    head_size_v = head_size
    return block_size * num_kv_heads * (head_size + head_size_v) * dtype.itemsize


def mla_attention_page_size(block_size: int, num_kv_heads: int, head_size: int, dtype: DType) -> int:
    """`MLAAttentionSpec(...).page_size_bytes` without `cache_dtype_str` (the call vLLM makes here): one
    latent vector per token, no separate values."""
    return block_size * num_kv_heads * head_size * dtype.itemsize


def mamba_page_size(shapes: StateShapes, dtypes: StateDTypes) -> int:
    """`MambaSpec(shapes, dtypes, ...).page_size_bytes`, unpadded: every state tensor of one sequence."""
    return sum(prod(shape) * dtype.itemsize for shape, dtype in zip(shapes, dtypes, strict=False))


# --- MambaStateDtypeCalculator ---------------------------------------------------------------------------


def mamba1_state_dtype(
    model_dtype: str | DType, mamba_cache_dtype: str, mamba_ssm_cache_dtype: str
) -> StateDTypes:
    """`MambaStateDtypeCalculator.mamba1_state_dtype` (through `_mamba_state_dtype`): the conv state
    follows the mamba cache dtype, the temporal (SSM) state its own dtype unless "auto"."""
    conv_state_dtype = get_kv_cache_dtype(mamba_cache_dtype, model_dtype)
    if mamba_ssm_cache_dtype == "auto":
        temporal_state_dtype = conv_state_dtype
    else:
        temporal_state_dtype = STR_DTYPE_TO_DTYPE[mamba_ssm_cache_dtype]
    return (conv_state_dtype, temporal_state_dtype)


def short_conv_state_dtype(model_dtype: str | DType, mamba_cache_dtype: str) -> StateDTypes:
    """`MambaStateDtypeCalculator.short_conv_state_dtype`: one conv state."""
    return (get_kv_cache_dtype(mamba_cache_dtype, model_dtype),)


# --- MambaStateShapeCalculator ---------------------------------------------------------------------------


def mamba1_state_shape(
    tp_world_size: int, intermediate_size: int, state_size: int, conv_kernel: int
) -> StateShapes:
    """`MambaStateShapeCalculator.mamba1_state_shape`: the conv state (transposed, kernel first) and the
    temporal state, each split over tensor parallelism."""
    conv_state_shape = (divide(intermediate_size, tp_world_size), conv_kernel - 1)
    temporal_state_shape = (divide(intermediate_size, tp_world_size), state_size)
    return (conv_state_shape[1], conv_state_shape[0]), temporal_state_shape


def short_conv_state_shape(tp_world_size: int, intermediate_size: int, conv_kernel: int) -> StateShapes:
    """`MambaStateShapeCalculator.short_conv_state_shape`: one conv state split over tensor parallelism."""
    conv_dim = divide(intermediate_size, tp_world_size)
    return ((conv_kernel - 1, conv_dim),)


# --- the model classes' config readers -------------------------------------------------------------------

_NO_DEFAULT = object()


@dataclass(frozen=True)
class HFConfigClass:
    """The config class vLLM builds for a model type: its name (in an AttributeError) and the defaults of
    the attributes the Mamba-state readers below use."""

    name: str
    defaults: dict[str, Any]


# transformers' JambaConfig and Lfm2Config (transformers 4.57), vLLM's own Lfm2MoeConfig
# (vllm/transformers_utils/configs/lfm2_moe.py). Lfm2Config has no `conv_dim`: vLLM's LFM2 reads it
# anyway, so a config.json without it fails there with the AttributeError `hf_attr` raises too.
HF_CONFIG_CLASSES: dict[str, HFConfigClass] = {
    "jamba": HFConfigClass(
        "JambaConfig", {"hidden_size": 4096, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2}
    ),
    "lfm2": HFConfigClass("Lfm2Config", {"conv_L_cache": 3}),
    "lfm2_moe": HFConfigClass("Lfm2MoeConfig", {"hidden_size": 2048, "conv_L_cache": 3}),
}


_PRETRAINED_CONFIG = HFConfigClass("PretrainedConfig", {})  # a model type of no class listed here


def hf_attr(hf_config: dict[str, Any], name: str) -> Any:
    """`hf_config.<name>` as vLLM reads it from its config object: the config.json's value, else the
    config class's default, else that class's AttributeError."""
    if name in hf_config:
        return hf_config[name]
    config_class = HF_CONFIG_CLASSES.get(str(hf_config.get("model_type")), _PRETRAINED_CONFIG)
    value = config_class.defaults.get(name, _NO_DEFAULT)
    if value is _NO_DEFAULT:
        raise AttributeError(f"'{config_class.name}' object has no attribute '{name}'")
    return value


def jamba_state_shape(vllm_config: Any) -> StateShapes:
    """`JambaForCausalLM.get_mamba_state_shape_from_config` (vllm/model_executor/models/jamba.py)."""
    hf_config = vllm_config.model_config.hf_config
    hidden_size = hf_attr(hf_config, "hidden_size")
    return mamba1_state_shape(
        tp_world_size=vllm_config.parallel_config.tensor_parallel_size,
        intermediate_size=hf_attr(hf_config, "mamba_expand") * hidden_size,
        state_size=hf_attr(hf_config, "mamba_d_state"),
        conv_kernel=hf_attr(hf_config, "mamba_d_conv"),
    )


def jamba_state_dtype(vllm_config: Any) -> StateDTypes:
    """`JambaForCausalLM.get_mamba_state_dtype_from_config`."""
    cache_config = vllm_config.cache_config
    return mamba1_state_dtype(
        vllm_config.model_config.dtype, cache_config.mamba_cache_dtype, cache_config.mamba_ssm_cache_dtype
    )


def lfm2_state_shape(vllm_config: Any) -> StateShapes:
    """`Lfm2ForCausalLM.get_mamba_state_shape_from_config` (vllm/model_executor/models/lfm2.py): the
    conv state is `conv_dim` wide."""
    hf_config = vllm_config.model_config.hf_config
    return short_conv_state_shape(
        tp_world_size=vllm_config.parallel_config.tensor_parallel_size,
        intermediate_size=hf_attr(hf_config, "conv_dim"),
        conv_kernel=hf_attr(hf_config, "conv_L_cache"),
    )


def lfm2_moe_state_shape(vllm_config: Any) -> StateShapes:
    """`Lfm2MoeForCausalLM.get_mamba_state_shape_from_config` (vllm/model_executor/models/lfm2_moe.py):
    the conv state is `hidden_size` wide."""
    hf_config = vllm_config.model_config.hf_config
    return short_conv_state_shape(
        tp_world_size=vllm_config.parallel_config.tensor_parallel_size,
        intermediate_size=hf_attr(hf_config, "hidden_size"),
        conv_kernel=hf_attr(hf_config, "conv_L_cache"),
    )


def short_conv_dtype(vllm_config: Any) -> StateDTypes:
    """`Lfm2ForCausalLM.get_mamba_state_dtype_from_config` (the same in Lfm2MoeForCausalLM)."""
    return short_conv_state_dtype(vllm_config.model_config.dtype, vllm_config.cache_config.mamba_cache_dtype)


@dataclass(frozen=True)
class MambaStateReaders:
    """A hybrid model class's `get_mamba_state_shape_from_config` and `get_mamba_state_dtype_from_config`."""

    shapes: Callable[[Any], StateShapes]
    dtypes: Callable[[Any], StateDTypes]


_JAMBA = MambaStateReaders(jamba_state_shape, jamba_state_dtype)

# The hybrid architectures of the product's registry (model_registry.json, `is_hybrid`), by the class
# vLLM's `ModelRegistry.resolve_model_cls` answers for each; JambaForSequenceClassification inherits
# JambaForCausalLM's readers.
MAMBA_STATE_READERS: dict[str, MambaStateReaders] = {
    "JambaForCausalLM": _JAMBA,
    "JambaForSequenceClassification": _JAMBA,
    "Lfm2ForCausalLM": MambaStateReaders(lfm2_state_shape, short_conv_dtype),
    "Lfm2MoeForCausalLM": MambaStateReaders(lfm2_moe_state_shape, short_conv_dtype),
}


def mamba_state_page_size(vllm_config: Any) -> int:
    """`MambaSpec(shapes=model_cls.get_mamba_state_shape_from_config(vllm_config),
    dtypes=model_cls.get_mamba_state_dtype_from_config(vllm_config), ...).page_size_bytes` for the
    model's architecture."""
    architecture = vllm_config.model_config.architecture
    readers = MAMBA_STATE_READERS.get(architecture)
    if readers is None:
        raise ValueError(
            f"{architecture}: a hybrid attention/mamba architecture without mamba-state readers "
            "(compilation_bridge.vllm_config.mamba_state.MAMBA_STATE_READERS); add its model class's "
            "state shapes and dtypes there"
        )
    return mamba_page_size(readers.shapes(vllm_config), readers.dtypes(vllm_config))
