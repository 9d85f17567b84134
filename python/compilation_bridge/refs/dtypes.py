"""torch dtypes in the ref store, stored by name: a model's settled `dtype`, and the LoRA adapters' once
`VllmConfig` settles them from it, so configs holding one are served by every worker, not just one."""

from __future__ import annotations

from typing import Any

from compilation_bridge.refs import state as refstate
from compilation_bridge.vllm_config.model import STR_TO_DTYPE, DType


def name_of(value: Any) -> str | None:
    return value.name if isinstance(value, DType) else None


def dtype_named(name: Any) -> DType:
    # Only the dtypes the config model knows: a stored name is data, never a lookup into anything else.
    if not isinstance(name, str) or name not in STR_TO_DTYPE:
        raise refstate.CorruptState(f"unknown dtype {name!r} in a ref state")
    return STR_TO_DTYPE[name]


refstate.register_extension("dtype", name_of, dtype_named)
