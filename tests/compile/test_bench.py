"""The compile benchmark's pieces that need no compile: timing and the printed figures."""

from __future__ import annotations

import io

from compilation_bridge.bench.compile import _interleaved_ms, print_figures, ratios
from compilation_bridge.bench.table import compile_rows


def _figures() -> dict:
    report = {
        "mode": "VLLM_COMPILE",
        "backend": "inductor",
        "num_pieces": 5,
        "compile_ranges": [[1, 2048]],
        "counters": {"num_inductor_compiles": 3},
        "num_artifacts_saved": 3,
        "num_artifacts_loaded": 0,
    }
    warm_report = {**report, "counters": {"num_inductor_compiles": 0}, "num_artifacts_saved": 0}
    warm_report.update(
        num_artifacts_loaded=3,
        dynamo_graphs_in_process=0,
        warm_start={"used": True, "reason": "loaded the bundle"},
    )
    plain = {"imports_s": 5.0, "process_s": 10.0, "report": {}, "timings": []}
    return {
        "threads": "1",
        "cold": {"compile_and_first_runs_s": 30.0, "imports_s": 5.0, "process_s": 40.0, "report": report},
        "warm": {
            "compile_and_first_runs_s": 1.0,
            "imports_s": 5.0,
            "process_s": 15.0,
            "report": warm_report,
            "repeats": 30,
            "warmup": 3,
            "timings": [{"num_tokens": 64, "compiled_ms": 1.0, "eager_ms": 2.0}],
        },
        "torch_cold": {**plain, "compile_and_first_runs_s": 24.0},
        "torch_warm": {**plain, "compile_and_first_runs_s": 3.0},
        "heartbeats": {
            "cold_compile": {"beats": 500, "p50_ms": 2.0, "p99_ms": 40.0, "max_ms": 80.0},
            "warm_load": {"beats": 50, "p50_ms": 3.0, "p99_ms": 20.0, "max_ms": 25.0},
        },
    }


def test_figures_are_printed_readably() -> None:
    out = io.StringIO()
    print_figures(_figures(), "toy-llama", out)
    text = out.getvalue()
    assert "warm is 30.0x faster than cold (target >= 10x)" in text
    assert "ours warm is 3.0x faster than torch.compile's own warm cache (target >= 2x)" in text
    assert "torch.compile warm is 8.0x faster than its cold" in text
    assert "cold 3 Inductor compiles, warm 0 compiles, 3 artifacts loaded, 0 Dynamo traces" in text
    assert "medians of 30 runs each after 3 warm-up runs" in text
    assert "      64        1.000     2.000     2.00x" in text
    assert "heartbeat during a cold compile: p50 2.0 ms, p99 40.0 ms, max 80.0 ms over 500 beats" in text


def test_ratios_are_baseline_over_ours() -> None:
    r = ratios(_figures())
    assert r["warm_vs_cold"] == 30.0 and r["warm_vs_torch_warm"] == 3.0
    assert r["compiled_vs_eager_at_64"] == 2.0 and r["heartbeat_p99_cold_compile_ms"] == 40.0


def test_the_markdown_rows_name_each_target() -> None:
    rows = "\n".join(compile_rows(_figures()))
    assert "| 0.03x | <= 0.1x (10x faster) |" in rows
    assert "| 0.33x | <= 0.5x (2x faster) |" in rows
    assert "heartbeat p99 during a cold compile" in rows


def test_interleaved_timing_returns_two_medians() -> None:
    calls: list[str] = []
    first, second = _interleaved_ms(lambda: calls.append("a"), lambda: calls.append("b"), 5)
    assert calls == ["a", "b"] * 8 and first >= 0 and second >= 0
