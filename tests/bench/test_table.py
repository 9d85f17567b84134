"""The bench's markdown table: one row per comparison, ratios computed from the figures given."""

from compilation_bridge.bench.table import markdown, page


def test_table_rows_and_ratios() -> None:
    summary = {"p50_us": 1300.0, "p99_us": 2000.0, "calls_per_s": 700.0}
    bare = {"p50_us": 1000.0, "p99_us": 1000.0, "calls_per_s": 1000.0}
    rpc = {
        "ours": {"all": summary},
        "bare": {"all": bare},
        "p50_ratio": 1.3,
        "p99_ratio": 2.0,
        "throughput_ratio": 0.7,
        "ready_s": 0.25,
        "rss_idle_mib": 55.0,
        "heartbeat_p99_ms": 4.0,
        "sigterm_idle_s": 0.01,
        "sigterm_busy_s": 0.5,
    }
    port = {"port": {"p50_us": 200.0}, "grpc": {"p50_us": 800.0}, "p50_ratio": 0.25, "target_ratio": 0.5}
    compiled = {
        "cold": {"compile_and_first_runs_s": 20.0},
        "warm": {
            "compile_and_first_runs_s": 2.0,
            "timings": [{"num_tokens": 64, "compiled_ms": 1.5, "eager_ms": 2.0}],
        },
    }
    table = markdown(rpc, port, compiled)
    lines = table.splitlines()
    assert lines[0] == "| comparison | ours | baseline | ratio | target |"
    assert "| 1300 us | 1000 us | 1.30x | <= 1.3x |" in lines[2]
    assert any("Erlang port vs gRPC" in line and "0.25x" in line for line in lines)
    assert any("warm start vs cold (fresh processes)" in line and "0.10x" in line for line in lines)
    assert any("64 tokens" in line and "0.75x" in line for line in lines)
    assert "SIGTERM to exit 0 in 10 ms idle and 500 ms during a long call" in table


def test_table_with_only_some_benchmarks() -> None:
    table = markdown(
        None, {"port": {"p50_us": 1.0}, "grpc": {"p50_us": 2.0}, "p50_ratio": 0.5, "target_ratio": 0.5}, None
    )
    assert len(table.splitlines()) == 3


def test_the_observers_row_and_a_skipped_observers_benchmark() -> None:
    observers = {
        "on": {"p50_us": 1020.0},
        "off": {"p50_us": 1000.0},
        "p50_ratio": 1.02,
        "target_ratio": 1.03,
        "spans_exported": 800,
    }
    (row,) = markdown(None, None, None, observers).splitlines()[2:]
    assert "observers on vs off" in row and "800 spans delivered" in row
    assert row.endswith("| 1020 us | 1000 us | 1.020x | <= 1.03x |")
    alone = {"on": {"p50_us": 1034.0}, "off": {"p50_us": 1000.0}, "p50_ratio": 1.034}
    rows = markdown(None, None, None, {**observers, "alone": {"stream": alone}}).splitlines()[2:]
    assert rows[1].endswith("| 1034 us | 1000 us | 1.034x | - |")  # not rounded to the target
    assert "the telemetry stream alone vs off" in rows[1]
    assert len(markdown(None, None, None, {"skipped": "no otel"}).splitlines()) == 2


def test_page_says_how_and_on_what_it_was_measured() -> None:
    written = page(
        "| comparison | ours | baseline | ratio | target |\n", "compilation-bridge bench --only rpc"
    )
    lines = written.splitlines()
    assert lines[0] == "# Benchmark figures"
    assert "`compilation-bridge bench --only rpc`" in lines[2]
    assert " CPUs (" in lines[4] and "Python 3." in lines[4] and "torch 2." in lines[4]
    assert lines[-1] == "| comparison | ours | baseline | ratio | target |"
