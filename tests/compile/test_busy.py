"""A compiled model runs one call at a time; a second call is refused at once (never waits holding its
worker's call slot) with the limit, its current value and its maximum."""

from __future__ import annotations

import pytest

from compilation_bridge.compile import compile_model
from compilation_bridge.compile.runner import ModelBusyError
from compilation_bridge.protocol.errors import error_payload
from compilation_bridge.vllm_config import CompilationConfig


def test_a_run_while_another_runs_is_refused_at_once_and_the_model_runs_after(cache_dir: str) -> None:
    config = CompilationConfig(mode=0, cache_dir=cache_dir)
    model = compile_model(config, model="toy-llama", max_num_tokens=8, num_layers=1, hidden_size=32)
    assert model._lock.acquire(blocking=False)  # another call's run in progress
    try:
        with pytest.raises(ModelBusyError, match="compiled model busy") as busy:
            model.run(4)
    finally:
        model._lock.release()
    context = error_payload(busy.value, {})["context"]
    assert context == {"limit": "runs in flight on this compiled model", "current": "1", "max": "1"}
    assert model.run(4)["num_tokens"] == 4
