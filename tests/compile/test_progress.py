"""Progress events: delivered on the calling thread, JSON-able, one compile event per piece and range."""

from __future__ import annotations

import json

from compilation_bridge.compile import compile_model, progress
from compilation_bridge.vllm_config import CompilationConfig


def test_compile_events_per_piece_and_range(cache_dir: str) -> None:
    events: list[dict] = []
    config = CompilationConfig(
        mode=3, backend="eager", cache_dir=cache_dir, splitting_ops=["silly::attention"]
    )
    with progress.collect(events.append):
        model = compile_model(config, model="simple-piecewise", max_num_tokens=4)
        model.run(2)
        model.run(3)
    json.dumps(events)
    kinds = [e["event"] for e in events]
    # a first compile in an empty cache has no bundle to start from, and says so before it traces
    assert kinds[:3] == ["warm_start_declined", "trace_start", "dynamo_traced"]
    assert events[0]["reason"].startswith("no bundle yet")
    assert "graph_split" in kinds and "trace_end" in kinds
    ends = [e for e in events if e["event"] == "compile_end"]
    assert [(e["piece"], e["range"], e["source"]) for e in ends] == [
        (0, [1, 4], "compiler"),
        (1, [1, 4], "compiler"),
        (2, [1, 4], "compiler"),
    ]
    assert all(e["seconds"] >= 0 and e["ok"] for e in ends)
    assert kinds.count("range_compiled") == 1


def test_no_events_outside_collect_and_a_failing_callback_is_harmless(cache_dir: str) -> None:
    def broken(event: dict) -> None:
        raise RuntimeError("sink gone")

    config = CompilationConfig(mode=3, backend="eager", cache_dir=cache_dir)
    with progress.collect(broken):
        model = compile_model(config, model="single-attention", max_num_tokens=4)
    assert model.run(2)["max_abs_diff_vs_eager"] == 0.0
