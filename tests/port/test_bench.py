"""The port-vs-gRPC benchmark runs end to end (figures only; nothing about speed is asserted)."""

from __future__ import annotations

import pytest

from compilation_bridge.bench import port as bench_port


def test_measure_returns_both_sides_and_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    result = bench_port.measure(iterations=3, warmup=1)
    assert set(result) >= {"port", "grpc", "p50_ratio", "p99_ratio", "target_ratio"}
    assert result["port"]["p50_us"] > 0 and result["grpc"]["p50_us"] > 0
    bench_port.report(result)
    assert "port vs gRPC" in capsys.readouterr().out
