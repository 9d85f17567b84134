"""The one callable a config holds: a speculative draft model's `hf_overrides`, vLLM's
`SpeculativeConfig.hf_config_override`, stored by name so a SpeculativeConfig (or a VllmConfig with one)
is served by every worker. No other callable is carried."""

from __future__ import annotations

from typing import Any

from compilation_bridge.refs import state as refstate
from compilation_bridge.vllm_config.speculative import SpeculativeConfig

_NAME = "SpeculativeConfig.hf_config_override"


def name_of(value: Any) -> str | None:
    return _NAME if value is SpeculativeConfig.hf_config_override else None


def override_named(name: Any) -> Any:
    if name != _NAME:
        raise refstate.CorruptState(f"unknown config override {name!r} in a ref state")
    return SpeculativeConfig.hf_config_override


refstate.register_extension("hf_override", name_of, override_named)
