"""vLLM's custom-op enablement rules (`CustomOp.enabled`, `default_on`, `dispatch_forward` bookkeeping).

The compile layer registers the names of the ops it implements (RMSNorm, SiLU-and-mul, ...) and asks
`dispatch_custom_op` which path to take; the answer is recorded in the config's `enabled_custom_ops` /
`disabled_custom_ops` counters exactly as vLLM records it (those counters are part of the hash).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compilation_bridge.vllm_config.compilation import CompilationConfig

_op_registry: set[str] = set()


def register_custom_op_name(name: str) -> None:
    _op_registry.add(name)


def registered_custom_ops() -> frozenset[str]:
    return frozenset(_op_registry)


def default_on(config: CompilationConfig) -> bool:
    count_none = config.custom_ops.count("none")
    count_all = config.custom_ops.count("all")
    assert count_none + count_all == 1
    return not count_none > 0 or count_all > 0


def custom_op_enabled(config: CompilationConfig, name: str) -> bool:
    enabled = f"+{name}" in config.custom_ops
    disabled = f"-{name}" in config.custom_ops
    assert not (enabled and disabled), f"Cannot enable and disable {name}"
    return (default_on(config) or enabled) and not disabled


def dispatch_custom_op(config: CompilationConfig, name: str, enforce_enable: bool = False) -> bool:
    """True for the custom-op path, False for the native one; counts the choice on the config."""
    enabled = enforce_enable or custom_op_enabled(config, name)
    counter = config.enabled_custom_ops if enabled else config.disabled_custom_ops
    counter.update([name])
    return enabled
