"""The page of benchmark ratios that `compilation-bridge bench --markdown` writes (docs/figures.md by
`scripts/bench.sh`): where and when it was measured, then one table.

Each row is one comparison measured in the same run: ours against its baseline, with the target the
project aims for. Ratios are what matter on a shared machine; absolute times are given for context.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
from datetime import UTC, datetime
from typing import Any


def _row(what: str, ours: str, baseline: str, ratio: float, target: str, digits: int = 2) -> str:
    return f"| {what} | {ours} | {baseline} | {ratio:.{digits}f}x | {target} |"


def rpc_rows(rpc: dict[str, Any]) -> list[str]:
    ours, bare = rpc["ours"]["all"], rpc["bare"]["all"]
    return [
        _row(
            "RPC per call p50 (gRPC worker vs bare grpcio servicer)",
            f"{ours['p50_us']:.0f} us",
            f"{bare['p50_us']:.0f} us",
            rpc["p50_ratio"],
            "<= 1.3x",
        ),
        _row(
            "RPC per call p99",
            f"{ours['p99_us']:.0f} us",
            f"{bare['p99_us']:.0f} us",
            rpc["p99_ratio"],
            "",
        ),
        _row(
            "RPC throughput, one client (calls/s)",
            f"{ours['calls_per_s']:.0f}",
            f"{bare['calls_per_s']:.0f}",
            rpc["throughput_ratio"],
            "",
        ),
    ]


def port_rows(port: dict[str, Any]) -> list[str]:
    return [
        _row(
            "Workload round trip p50 (Erlang port vs gRPC)",
            f"{port['port']['p50_us']:.0f} us",
            f"{port['grpc']['p50_us']:.0f} us",
            port["p50_ratio"],
            f"<= {port['target_ratio']}x",
        )
    ]


ALONE = {"otel": "OpenTelemetry alone", "stream": "the telemetry stream alone"}


def observer_rows(observers: dict[str, Any]) -> list[str]:
    if "skipped" in observers:
        return []
    rows = [
        _row(
            "RPC per call p50, observers on vs off (OpenTelemetry to a loopback collector, telemetry "
            f"stream open; {observers['spans_exported']} spans delivered)",
            f"{observers['on']['p50_us']:.0f} us",
            f"{observers['off']['p50_us']:.0f} us",
            observers["p50_ratio"],
            f"<= {observers['target_ratio']}x",
            digits=3,  # the target is 1.03x: two digits would round 1.034 to it
        )
    ]
    for name, alone in observers.get("alone", {}).items():
        rows.append(
            _row(
                f"RPC per call p50, {ALONE[name]} vs off (a run of its own)",
                f"{alone['on']['p50_us']:.0f} us",
                f"{alone['off']['p50_us']:.0f} us",
                alone["p50_ratio"],
                "-",
                digits=3,
            )
        )
    return rows


def compile_rows(figures: dict[str, Any]) -> list[str]:
    """Warm vs cold, ours warm vs torch.compile's own warm cache, compiled vs eager, heartbeats."""
    cold, warm = figures["cold"], figures["warm"]
    rows = [
        _startup_row("toy-llama warm start vs cold (fresh processes)", warm, cold, "<= 0.1x (10x faster)")
    ]
    if "torch_warm" in figures:
        rows += [
            _startup_row(
                "toy-llama warm start, ours vs plain torch.compile's warm cache",
                warm,
                figures["torch_warm"],
                "<= 0.5x (2x faster)",
            ),
            _startup_row(
                "plain torch.compile warm vs its cold", figures["torch_warm"], figures["torch_cold"], ""
            ),
        ]
    threads = figures.get("threads", "default")
    for timing in warm["timings"]:
        rows.append(
            _row(
                f"toy-llama forward at {timing['num_tokens']} tokens, {threads} thread(s) "
                f"(compiled vs eager, medians of {warm.get('repeats', '?')})",
                f"{timing['compiled_ms']:.3f} ms",
                f"{timing['eager_ms']:.3f} ms",
                timing["compiled_ms"] / max(timing["eager_ms"], 1e-9),
                "<= 0.77x (1.3x faster)" if timing["num_tokens"] == 64 else "",
            )
        )
    rows += _heartbeat_rows(figures.get("heartbeats") or {})
    return rows


def _startup_row(what: str, ours: dict[str, Any], baseline: dict[str, Any], target: str) -> str:
    a, b = ours["compile_and_first_runs_s"], baseline["compile_and_first_runs_s"]
    return _row(what, f"{a:.2f} s", f"{b:.2f} s", a / max(b, 1e-9), target)


def _heartbeat_rows(beats: dict[str, Any]) -> list[str]:
    rows = []
    for phase, label in (("cold_compile", "a cold compile"), ("warm_load", "a warm load")):
        b = beats.get(phase)
        if b and b["beats"]:
            rows.append(
                f"| heartbeat p99 during {label} ({b['beats']} beats, max {b['max_ms']:.0f} ms) "
                f"| {b['p99_ms']:.1f} ms | 100 ms | {b['p99_ms'] / 100:.2f}x | < 1.0x |"
            )
    return rows


def markdown(
    rpc: dict[str, Any] | None,
    port: dict[str, Any] | None,
    compiled: dict[str, Any] | None,
    observers: dict[str, Any] | None = None,
) -> str:
    lines = ["| comparison | ours | baseline | ratio | target |", "|---|---|---|---|---|"]
    if rpc is not None:
        lines += rpc_rows(rpc)
    if observers is not None:
        lines += observer_rows(observers)
    if port is not None:
        lines += port_rows(port)
    if compiled is not None:
        lines += compile_rows(compiled)
    if rpc is not None:
        lines += [
            "",
            f"Ready file {rpc['ready_s'] * 1000:.0f} ms after spawn; {rpc['rss_idle_mib']:.0f} MiB resident "
            f"before torch; heartbeat p99 {rpc['heartbeat_p99_ms']:.1f} ms while calls run back to back; "
            f"SIGTERM to exit 0 in {rpc['sigterm_idle_s'] * 1000:.0f} ms idle and "
            f"{rpc['sigterm_busy_s'] * 1000:.0f} ms during a long call.",
        ]
    return "\n".join(lines) + "\n"


def page(table: str, command: str) -> str:
    """`table` under a heading that says how, when and on what it was measured, since figures from
    another machine or another load say little about this one."""
    return "\n".join(
        [
            "# Benchmark figures",
            "",
            f"Written by `{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
            "",
            f"Machine: {machine()}.",
            "",
            "Each ratio is against a baseline measured in the same run; absolute figures move with the",
            "machine's load, ratios much less. docs/performance.md says what each benchmark measures.",
            "",
            table,
        ]
    )


def machine() -> str:
    """CPUs, load, Python and torch (when installed) of the machine measuring."""
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    try:  # the compile benchmark imports torch in child processes only
        version = f", torch {importlib.metadata.version('torch')}"
    except importlib.metadata.PackageNotFoundError:
        version = ""
    return (
        f"{os.cpu_count()} CPUs ({platform.machine()}), load average {load} at the end, "
        f"Python {platform.python_version()}{version}"
    )
