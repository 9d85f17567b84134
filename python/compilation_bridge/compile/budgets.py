"""What one caller may make the worker allocate for a reference model: its weights, and one run.

Each model option is capped on its own, but their product is what costs memory: toy-llama at every
option's cap would need tens of GiB of weights. So the total parameter size is bounded
(`COMPILATION_BRIDGE_MAX_MODEL_BYTES`, 1 GiB), and so is a run: its token count times hidden size
(`COMPILATION_BRIDGE_MAX_RUN_ELEMENTS`, 2**24: one hidden-state tensor of 64 MiB in float32), and the
peak bytes its forward passes allocate (`COMPILATION_BRIDGE_MAX_RUN_BYTES`, 1 GiB). The second is not
implied by the first: attention allocates heads x tokens² scores, so a model of a few MB at 1024 tokens,
far inside the element budget, peaked at 2.0 GiB resident. Each model states its own peak (`run_footprint`,
computed from its options, nothing allocated), and a run or trace above the budget is refused before
it starts. All are operator settings (`compilation_bridge.settings`), read when used: the operator sets
them at start, and tests change them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from compilation_bridge.settings import (
    MAX_MODEL_BYTES_ENV,
    MAX_RUN_BYTES_ENV,
    MAX_RUN_ELEMENTS_ENV,
    max_model_bytes,
    max_run_bytes,
    max_run_elements,
)

# A run is two forward passes at least: `runner._measure` calls the compiled forward, keeps its output,
# then runs the eager reference (and times both in turn). Each reaches the peak of one forward, and the
# allocator keeps the pages the first freed resident when they are below glibc's mmap threshold (up to
# 32 MiB), so the second may peak on fresh ones: measured on toy-llama at 1024 tokens, a run grew 83 MiB
# where one eager forward grew 50 MiB. Compiled code needs no more than eager: Inductor frees its
# buffers once dead, and attention is an opaque custom op whose scores are the op's own in every mode.
RUN_FACTOR = 2


@dataclasses.dataclass(frozen=True)
class RunFootprint:
    """A run's estimated peak allocation, and its largest term in words for the refusal's message."""

    num_tokens: int
    peak_bytes: int
    dominant: str  # e.g. "attention 4 heads x 1024² tokens"

    @classmethod
    def of(cls, num_tokens: int, terms: dict[str, int], held: int) -> RunFootprint:
        """RUN_FACTOR times one forward's `terms` (what each allocates, in words, to bytes), plus what the
        runner `held` meanwhile.

        The terms are summed although a layer's attention and its MLP follow each other: glibc keeps freed
        blocks below its mmap threshold (up to 32 MiB) resident, and fragmented, so the MLP need not reuse
        the scores' pages (measured: one forward grew 78 MiB where its attention and MLP each need 60)."""
        peak = RUN_FACTOR * sum(terms.values()) + held
        return cls(num_tokens, peak, max(terms, key=terms.__getitem__))


# A model's `run_footprint`: what a run of this many tokens allocates at its peak (`models.footprint_of`).
Footprint = Callable[[int], RunFootprint]


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


def check_run_bytes(footprint: Footprint, num_tokens: int) -> None:
    """Refuse a run whose estimated peak allocation exceeds the budget, before anything is allocated."""
    estimate, budget = footprint(num_tokens), max_run_bytes()
    if estimate.peak_bytes > budget:
        raise ValueError(
            f"a run of {num_tokens} tokens would allocate about {_mib(estimate.peak_bytes)} at its peak "
            f"(mostly {estimate.dominant}), above the worker's run budget of {_mib(budget)} "
            f"({MAX_RUN_BYTES_ENV}); run fewer tokens or build the model with smaller options"
        )


def largest_run_within(footprint: Footprint, upper: int, lower: int = 1) -> int:
    """The most tokens in [lower, upper] whose run fits the byte budget (`lower` when none does).

    Footprints grow with the token count, so a binary search finds it in a few dozen estimates."""
    budget = max_run_bytes()
    while lower < upper:
        middle = (lower + upper + 1) // 2
        if footprint(middle).peak_bytes <= budget:
            lower = middle
        else:
            upper = middle - 1
    return lower
