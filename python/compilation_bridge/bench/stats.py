"""The figures every benchmark reports: percentiles of call times, calls per second, medians of runs."""

from __future__ import annotations

import statistics
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """The value at quantile `q` (0..1) of `values`, nearest rank: p99 of 100 samples is the 99th."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(seconds: list[float]) -> dict[str, float]:
    """p50 and p99 in microseconds, and calls per second one client completes back to back."""
    return {
        "p50_us": percentile(seconds, 0.50) * 1e6,
        "p99_us": percentile(seconds, 0.99) * 1e6,
        "calls_per_s": len(seconds) / sum(seconds),
    }


def median_of_runs(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The run-by-run median of every figure of several runs that report the same (nested) keys."""

    def merge(values: list[Any]) -> Any:
        if isinstance(values[0], dict):
            return {key: merge([v[key] for v in values]) for key in values[0]}
        if values[0] is None:
            return None
        return statistics.median(values)

    return merge(results)
