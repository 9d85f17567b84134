"""What one caller may make the worker allocate for a reference model: its weights, and one run.

Each model option is capped on its own, but their product is what costs memory: toy-llama at every
option's cap would need tens of GiB of weights. So the total parameter size is bounded
(`COMPILATION_BRIDGE_MAX_MODEL_BYTES`, 1 GiB), and so is a run's token count times hidden size
(`COMPILATION_BRIDGE_MAX_RUN_ELEMENTS`, 2**24: one hidden-state tensor of 64 MiB in float32), which
every activation of the model scales with. Both are operator settings (`compilation_bridge.settings`),
read when used: the operator sets them at start, and tests change them.
"""

from __future__ import annotations

from compilation_bridge.settings import (
    MAX_MODEL_BYTES_ENV,
    MAX_RUN_ELEMENTS_ENV,
    max_model_bytes,
    max_run_elements,
)


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def check_model_bytes(model: str, parameters: int, bytes_per_parameter: int = 4) -> None:
    """Refuse a model whose weights would exceed the budget, before anything is allocated."""
    size, budget = parameters * bytes_per_parameter, max_model_bytes()
    if size > budget:
        raise ValueError(
            f"{model} with these options has {parameters} parameters ({_mib(size)} in float32), "
            f"above the worker's budget of {_mib(budget)} ({MAX_MODEL_BYTES_ENV}); choose smaller options"
        )


def check_run_elements(num_tokens: int, hidden_size: int) -> None:
    """Refuse a run whose hidden states (num_tokens x hidden_size) exceed the budget."""
    elements, budget = num_tokens * hidden_size, max_run_elements()
    if elements > budget:
        raise ValueError(
            f"num_tokens={num_tokens} x hidden_size={hidden_size} = {elements} is above the worker's "
            f"run budget of {budget} elements ({MAX_RUN_ELEMENTS_ENV}); run fewer tokens"
        )
