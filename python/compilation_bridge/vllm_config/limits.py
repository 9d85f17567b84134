"""The cap on caller-set sizes that make the worker allocate or loop in proportion to them.

vLLM has no such cap; a remote caller could otherwise ask for a padding table of 2**40 entries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

MAX_SIZE = 2**24


def check_size(field_name: str, value: object) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_SIZE:
        raise ValueError(f"{field_name} must be at most {MAX_SIZE} (2**24), got {value}")


def check_sizes(field_name: str, values: Iterable[object] | None) -> None:
    for value in values or ():
        check_size(field_name, value)


# The counts in a model config that transformers' config classes allocate in proportion to as they load:
# layer and block counts (a list with an entry a layer: `layer_types`, ..., and vLLM's config code loops
# over layers; no model has more than a few hundred) and `num_labels` (an `id2label` entry a label: a
# million took seconds). Vision classifiers have up to about 22,000 labels.
MAX_COUNT = 2**16


def _is_a_count(key: str) -> bool:
    return "layer" in key or "block" in key or key == "num_labels"


def check_config_counts(config: Mapping[str, object], where: str) -> None:
    """Refuses a model config (or overrides of one) holding, at any depth, a layer or block count or a
    label count above MAX_COUNT, with a `ValueError` that names it."""
    pending: list[tuple[str, object]] = [(where, config)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, Mapping):
            pending.extend((f"{path}.{key}", item) for key, item in value.items())
        elif isinstance(value, list | tuple):
            pending.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
        elif (
            isinstance(value, int)
            and not isinstance(value, bool)
            and value > MAX_COUNT
            and _is_a_count(path.rsplit(".", 1)[-1])
        ):
            raise ValueError(f"{path} must be at most {MAX_COUNT} (2**16), got {value}")
