"""The observers benchmark runs end to end, with its collector and stream reader in processes of their
own, and shows that "on" was on (figures only; nothing about speed is asserted)."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the observers benchmark needs the `otel` extra")

from compilation_bridge.bench import observers
from compilation_bridge.bench.sidecar import Sidecar
from compilation_bridge.bench.workload import STEPS


def test_measure_delivers_spans_and_events_while_on(capsys: pytest.CaptureFixture[str]) -> None:
    result = observers.measure(iterations=3, warmup=1)
    calls = 3 * len(STEPS)
    assert result["calls_per_side"] == calls
    # Every call of the "on" worker, warm-up included, is a span and two stream events; none of the
    # "off" worker's is.
    assert result["spans_exported"] == 4 * len(STEPS)
    assert result["telemetry_events"] == 2 * 4 * len(STEPS)
    assert result["p50_ratio"] == result["on"]["p50_us"] / result["off"]["p50_us"]
    observers.report(result)
    assert "observers on (OpenTelemetry and the telemetry stream) vs off (12 calls each, interleaved)" in (
        capsys.readouterr().out
    )


def test_each_observer_alone_is_on_by_itself(capsys: pytest.CaptureFixture[str]) -> None:
    results = observers.alone(iterations=2, warmup=1)
    assert list(results) == ["otel", "stream"]
    otel, stream = results["otel"], results["stream"]
    assert (otel["spans_exported"], otel["telemetry_events"]) == (3 * len(STEPS), 0)
    assert (stream["spans_exported"], stream["telemetry_events"]) == (0, 2 * 3 * len(STEPS))
    observers.report_alone(results)
    out = capsys.readouterr().out
    assert "OpenTelemetry: per call p50 ratio" in out and "the telemetry stream: per call p50 ratio" in out


def test_a_sidecar_that_says_nothing_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="did not start"):
        Sidecar("compilation_bridge.bench.no_such_module")


def test_the_grpc_floor_is_measured_on_a_bare_servicer_sending_events(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cpu_us = observers.grpc_message_cpu_us(messages=300)
    assert cpu_us > 0  # sending takes some CPU; how much is a figure, not asserted
    observers.report_floor(cpu_us)
    assert "us of CPU a message" in capsys.readouterr().out
