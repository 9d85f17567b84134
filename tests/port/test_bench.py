"""The port-vs-gRPC benchmark runs end to end (figures only; nothing about speed is asserted)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from compilation_bridge.bench import port as bench_port


def test_measure_returns_both_sides_and_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    result = bench_port.measure(iterations=3, warmup=1)
    assert set(result) >= {"port", "grpc", "p50_ratio", "p99_ratio", "target_ratio"}
    assert result["port"]["p50_us"] > 0 and result["grpc"]["p50_us"] > 0
    bench_port.report(result)
    assert "port vs gRPC" in capsys.readouterr().out


def test_run_alone_it_has_help_and_checks_its_argument() -> None:
    """`python -m compilation_bridge.bench.port --help`, as the README shows it, once raised ValueError."""
    command = [sys.executable, "-m", "compilation_bridge.bench.port"]
    helped = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: python -m compilation_bridge.bench.port [-h] [iterations]")
    refused = subprocess.run([*command, "0"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "argument iterations: expected a whole number of at least 1, got 0" in refused.stderr
    assert "Traceback" not in refused.stderr
