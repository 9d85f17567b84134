"""The compile benchmark's pieces that need no compile: timing and the printed figures."""

from __future__ import annotations

import io

from compilation_bridge.commands.bench_compile import _interleaved_ms, print_figures


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
    warm_report["num_artifacts_loaded"] = 3
    return {
        "cold": {"compile_and_first_runs_s": 30.0, "imports_s": 5.0, "process_s": 40.0, "report": report},
        "warm": {
            "compile_and_first_runs_s": 5.0,
            "imports_s": 5.0,
            "process_s": 15.0,
            "report": warm_report,
            "timings": [{"num_tokens": 64, "compiled_ms": 1.0, "eager_ms": 2.0}],
        },
    }


def test_figures_are_printed_readably() -> None:
    out = io.StringIO()
    print_figures(_figures(), "toy-llama", out)
    text = out.getvalue()
    assert "warm is 6.0x faster than cold" in text
    assert "3 Inductor compiles, 3 artifacts saved, 0 loaded" in text
    assert "0 Inductor compiles, 0 artifacts saved, 3 loaded" in text
    assert text.rstrip().endswith("64        1.000     2.000     2.00x")


def test_interleaved_timing_returns_two_medians() -> None:
    calls: list[str] = []
    first, second = _interleaved_ms(lambda: calls.append("a"), lambda: calls.append("b"), 5)
    assert calls == ["a", "b"] * 8 and first >= 0 and second >= 0
