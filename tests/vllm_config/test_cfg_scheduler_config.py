"""vLLM 0.14.0's tests/test_config.py, ported: the SchedulerConfig test (`test_scheduler_config_init`), which
needs no model, GPU or engine. Same test name and cases."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from compilation_bridge.vllm_config import SchedulerConfig


def test_scheduler_config_init() -> None:
    with pytest.raises(ValidationError):
        # Positional InitVars missing (InitVars cannot have defaults, or they would become attributes)
        SchedulerConfig()  # type: ignore[call-arg]

    with pytest.raises(AttributeError):
        # An InitVar does not become an attribute
        print(SchedulerConfig.default_factory().max_model_len)  # type: ignore[attr-defined]
