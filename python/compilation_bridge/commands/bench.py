"""`compilation-bridge bench`: every benchmark of `compilation_bridge.bench` in one run, as ratios.

RPC against a bare grpcio servicer, the Erlang port against gRPC, compile (ours against plain
torch.compile, cold and warm; compiled against eager; heartbeats during a compile), the ref store, and
the worker with its observers on against off (OpenTelemetry and Snakepit's telemetry stream), and
`EngineArgs(...).create_engine_config()` against vLLM 0.14.0 itself (an interpreter that has it);
`--markdown PATH` also writes the table of ratios as a page (`scripts/bench.sh`: docs/figures.md).
Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compilation_bridge.commands.arguments import at_least, file_in_existing_folder

BENCHMARKS = ("rpc", "port", "compile", "store", "observers", "engine")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--iterations", type=at_least(1), default=2000, help="workload iterations per run")
    parser.add_argument("--warmup", type=at_least(0), default=200, help="iterations before measuring")
    parser.add_argument(
        "--repeat", type=at_least(1), default=1, help="runs; the summary gives the median of runs"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument(
        "--only",
        choices=BENCHMARKS,
        action="append",
        help="run only these benchmarks (repeatable; default: all)",
    )
    # Checked now: the table is written after a run of minutes.
    parser.add_argument(
        "--markdown",
        metavar="PATH",
        type=file_in_existing_folder,
        help="also write the table of ratios to PATH",
    )
    parser.add_argument(
        "--vllm-python",
        metavar="PATH",
        type=Path,
        default=None,
        help="interpreter of an environment with vLLM 0.14.0, for the engine benchmark "
        "(default: $ORACLE_VENV/bin/python, else .oracle-venv/bin/python)",
    )
    parser.add_argument(
        "--compile-threads",
        type=at_least(1),
        default=1,
        help="OMP_NUM_THREADS for the compile benchmark (1 gives comparable figures on a shared machine)",
    )


def _rpc(args: argparse.Namespace) -> dict[str, Any]:
    from compilation_bridge.bench import rpc

    figures = rpc.measure(args.iterations, args.warmup, args.repeat)
    if not args.json:
        rpc.report(figures)
    return figures


def _port(args: argparse.Namespace) -> dict[str, Any]:
    from compilation_bridge.bench import port

    figures = port.measure(iterations=max(100, args.iterations // 2), warmup=args.warmup)
    if not args.json:
        port.report(figures)
    return figures


def _compile(args: argparse.Namespace) -> dict[str, Any]:
    from compilation_bridge.bench.compile import bench_compile

    return bench_compile(threads=args.compile_threads, out=sys.stderr if args.json else sys.stdout)


def _store(args: argparse.Namespace) -> dict[str, Any]:
    from compilation_bridge.bench import store

    figures = store.measure(iterations=max(100, args.iterations // 2), warmup=args.warmup)
    if not args.json:
        store.report(figures)
    return figures


def _observers(args: argparse.Namespace) -> dict[str, Any]:
    from importlib.util import find_spec

    if find_spec("opentelemetry") is None or find_spec("opentelemetry.proto") is None:
        print("observers: skipped, the `otel` extra is not installed", file=sys.stderr)
        return {"skipped": "the otel extra is not installed"}
    from compilation_bridge.bench import observers

    figures = observers.measure(iterations=args.iterations, warmup=args.warmup)
    if not args.json:
        observers.report(figures)
    figures["alone"] = observers.alone(iterations=args.iterations, warmup=args.warmup)
    if not args.json:
        observers.report_alone(figures["alone"])
    figures["grpc_message_cpu_us"] = observers.grpc_message_cpu_us()
    if not args.json:
        observers.report_floor(figures["grpc_message_cpu_us"])
    return figures


def _engine(args: argparse.Namespace) -> dict[str, Any]:
    from compilation_bridge.bench import engine_config

    figures = engine_config.measure(iterations=max(20, args.iterations // 40), vllm_python=args.vllm_python)
    if not args.json:
        engine_config.report(figures)
    return figures


RUNNERS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "rpc": _rpc,
    "port": _port,
    "compile": _compile,
    "store": _store,
    "observers": _observers,
    "engine": _engine,
}


def run(args: argparse.Namespace) -> int:
    chosen = set(args.only or BENCHMARKS)
    figures: dict[str, Any] = {}
    for name in BENCHMARKS:
        if name in chosen:
            figures[name] = RUNNERS[name](args)
            if not args.json:
                print()
    if args.json:
        print(json.dumps(figures, indent=2))
    if args.markdown:
        from compilation_bridge.bench.table import markdown, page

        table = markdown(
            figures.get("rpc"), figures.get("port"), figures.get("compile"), figures.get("observers")
        )
        args.markdown.write_text(page(table, "compilation-bridge bench " + " ".join(sys.argv[2:])))
        print(f"wrote {args.markdown}", file=sys.stderr)
    return 0
