"""`compilation-bridge compile`: compile a reference model with a config, run it, print a readable report.

    compilation-bridge compile --config '{"mode": 3}' --model toy-llama --tokens 1,16,64

Progress (trace, one line per piece and range compiled or loaded) goes to stderr as it happens; the
report goes to stdout (`--json` prints the report and runs as JSON instead).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from compilation_bridge.commands.arguments import (
    UsageError,
    at_least,
    json_object,
    key_json_value,
    token_counts,
)
from compilation_bridge.commands.interrupt import exit_at_once_on_interrupt
from compilation_bridge.settings import PLATFORMS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=json_object, default='{"mode": 3}', help="CompilationConfig keywords as JSON"
    )
    parser.add_argument(
        "--model", default="toy-llama", help="reference model (toy-llama, simple-piecewise, ...)"
    )
    parser.add_argument(
        "--tokens", type=token_counts, default="1,16,64", help="comma-separated token counts to run, in order"
    )
    parser.add_argument(
        "--max-num-tokens", type=at_least(1), help="top of the last compile range (default 2048)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the model's weights")
    parser.add_argument(
        "--option",
        action="append",
        type=key_json_value,
        default=[],
        metavar="KEY=VALUE",
        help="model size option, VALUE as JSON, e.g. num_layers=4",
    )
    parser.add_argument("--vllm-config", action="store_true", help="wrap the config in a VllmConfig first")
    parser.add_argument(
        "--scheduler", type=json_object, help="SchedulerConfig keywords as JSON (with --vllm-config)"
    )
    parser.add_argument("--platform", choices=PLATFORMS, help="plan as on this platform (default: detected)")
    parser.add_argument(
        "--repeats",
        type=at_least(1),
        default=20,
        help="timed runs per token count after a warm-up; the report gives their medians (default 20)",
    )
    parser.add_argument("--json", action="store_true", help="print the runs and the report as JSON")


def _model_options(model: str, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The model's size options, after checking the name and the keys against what the model takes."""
    from compilation_bridge.compile.reference_models import MODELS, option_names

    if model not in MODELS:
        raise UsageError("--model", f"unknown model {model!r}; known models: {', '.join(MODELS)}")
    options = dict(pairs)
    unknown = sorted(set(options) - set(option_names(model)))
    if unknown:
        known = ", ".join(option_names(model))
        raise UsageError(
            "--option", f"model {model!r} has no option {', '.join(unknown)}; its options: {known}"
        )
    return options


class ProgressPrinter:
    """Draws compile progress as lines on a terminal stream."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.start = time.perf_counter()

    def __call__(self, event: dict[str, Any]) -> None:
        line = self._line(event)
        if line:
            print(f"[{time.perf_counter() - self.start:7.2f}s] {line}", file=self.out, flush=True)

    @staticmethod
    def _line(e: dict[str, Any]) -> str | None:
        kind = e["event"]
        if kind == "trace_start":
            return f"tracing with {e['num_tokens']} tokens ({e['mode']}) ..."
        if kind == "dynamo_traced":
            return f"Dynamo traced the model in {e['seconds']:.2f} s"
        if kind == "graph_split":
            return f"split into {e['num_pieces']} pieces, {e['num_compiled_pieces']} to compile"
        if kind == "compile_start":
            r = e["range"]
            return f"  piece {e['piece'] + 1}/{e['num_pieces']} for range ({r[0]}, {r[1]}) ..."
        if kind == "compile_end":
            verb = "loaded from cache" if e.get("source") == "cache" else f"compiled ({e['compiler']})"
            verb = verb if e["ok"] else "FAILED"
            return f"  piece {e['piece'] + 1}/{e['num_pieces']} {verb} in {e['seconds']:.2f} s"
        if kind == "range_compiled":
            return f"range ({e['range'][0]}, {e['range'][1]}) ready in {e['seconds']:.2f} s"
        if kind == "run_start":
            return f"run with {e['num_tokens']} tokens"
        if kind == "warm_start_end":
            return f"warm start: loaded {e['num_pieces']} pieces from the bundle in {e['seconds']:.2f} s"
        if kind == "warm_start_declined":
            return f"no warm start: {e['reason']}"
        if kind == "piece_loaded":
            return f"  piece {e['piece'] + 1}/{e['num_pieces']} loaded from the bundle ({e['bytes']} bytes)"
        return None


class ProgressBar:
    """Compile progress on a terminal: the pieces of the step under way as a bar redrawn in place, and
    every other event as a line above it (the lines a `ProgressPrinter` prints)."""

    WIDTH = 24
    PIECE_EVENTS = frozenset({"compile_start", "compile_end", "piece_loaded"})

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lines = ProgressPrinter(out)
        self.drawn = False

    def __call__(self, event: dict[str, Any]) -> None:
        if event["event"] in self.PIECE_EVENTS:
            self._draw(self.bar(event))
            return
        if ProgressPrinter._line(event) is not None:
            self._clear()
            self.lines(event)

    @classmethod
    def bar(cls, e: dict[str, Any]) -> str:
        done = e["piece"] + (0 if e["event"] == "compile_start" else 1)
        total = max(e["num_pieces"], 1)
        filled = cls.WIDTH * done // total
        what = (
            "loading the bundle"
            if e["event"] == "piece_loaded"
            else f"range ({e['range'][0]}, {e['range'][1]})"
        )
        return f"[{'#' * filled}{'.' * (cls.WIDTH - filled)}] {done}/{total} pieces, {what}"

    def _draw(self, text: str) -> None:
        self.out.write(f"\r\x1b[2K{text}")  # back to the line's start, erase it, draw
        self.out.flush()
        self.drawn = True

    def _clear(self) -> None:
        if self.drawn:
            self.out.write("\r\x1b[2K")
            self.drawn = False


def progress_display(out: TextIO) -> Callable[[dict[str, Any]], None]:
    """A bar on a terminal, plain lines anywhere else (a log file, a pipe, CI)."""
    return ProgressBar(out) if out.isatty() else ProgressPrinter(out)


def format_report(report: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    ranges = ", ".join(f"({a}, {b})" for a, b in report["compile_ranges"])
    compiled = ", ".join(f"({a}, {b})" for a, b in report["compiled_ranges"]) or "none"
    lines = [
        f"model            {report['model']} {report['model_options'] or ''}".rstrip(),
        f"mode             {report['mode']} (backend {report['backend']}, device {report['device']})",
        f"pieces           {report['num_pieces']} ({report['num_compiled_pieces']} compiled)",
        f"compile ranges   {ranges}; sizes {report['compile_sizes']}",
        f"compiled so far  {compiled}",
        f"compilations     {report['num_backend_compilations']} backend "
        f"({report['num_artifacts_saved']} saved, {report['num_artifacts_loaded']} loaded from cache)",
        f"compilation time {report['compilation_time_s']:.2f} s",
        f"cache            {report['local_cache_dir'] or '-'} ({report['cache_status']})",
        f"custom ops       enabled {report['enabled_custom_ops']}, disabled {report['disabled_custom_ops']}",
        f"cudagraphs       {report['cudagraph_mode']}: {report['cudagraphs_reason']}",
        f"warm start       {_warm_start(report)}",
        "",
        f"{'tokens':>8} {'first call ms':>14} {'compiled ms':>12} {'eager ms':>9} {'speed-up':>9} "
        f"{'max |diff|':>11}  dispatched to",
    ]
    for r in runs:
        where = r["dispatched_to"]
        speedup = r["speedup_vs_eager"]
        lines.append(
            f"{r['num_tokens']:>8} {r['first_call_ms']:>14.3f} {r['compiled_ms']:>12.3f} "
            f"{r['eager_ms']:>9.3f} {(f'{speedup:.2f}x' if speedup else '-'):>9} "
            f"{r['max_abs_diff_vs_eager']:>11.2e}  {tuple(where) if where else '-'}"
        )
    counts = sorted({r["repeats"] for r in runs})
    footer = (
        f"compiled ms and eager ms: medians of {'/'.join(map(str, counts)) or '0'} runs each, timed "
        f"alternately after {runs[0]['warmup'] if runs else 0} warm-up runs; first call ms is the "
        "first run alone, with the compiles or cache loads it triggered"
    )
    return "\n".join([*lines, "", footer])


def _warm_start(report: dict[str, Any]) -> str:
    warm = report.get("warm_start") or {}
    if warm.get("used"):
        return f"yes, in {warm['seconds']:.2f} s ({warm['reason']})"
    return f"no ({warm.get('reason', 'unknown')})"


def run(args: argparse.Namespace) -> int:
    from compilation_bridge.vllm_config.platforms import use_platform

    if args.platform:
        use_platform(args.platform)
    with exit_at_once_on_interrupt():
        return _compile_and_report(args)


def _compile_and_report(args: argparse.Namespace) -> int:
    model_options = _model_options(args.model, args.option)
    try:
        from compilation_bridge.compile import compile_model, progress

        config = _config(args)
        _check_tokens(args, config)  # before the compile, not after it
        with progress.collect(progress_display(sys.stderr)):
            model = compile_model(
                config,
                model=args.model,
                max_num_tokens=args.max_num_tokens,
                seed=args.seed,
                **model_options,
            )
            runs = [model.run(n, repeats=args.repeats) for n in args.tokens]
        report = model.report()
    except UsageError:
        raise
    except Exception as e:  # the CLI reports the error as raised, with its type
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"runs": runs, "report": report}, indent=2, sort_keys=True))
    else:
        print(format_report(report, runs))
    return 0


def _config(args: argparse.Namespace) -> Any:
    """The CompilationConfig of --config, wrapped in a VllmConfig with --vllm-config."""
    from compilation_bridge import vllm_config as vc

    config: Any = vc.CompilationConfig(**args.config)
    if not args.vllm_config:
        return config
    kwargs: dict[str, Any] = {"compilation_config": config}
    if args.scheduler:
        kwargs["scheduler_config"] = vc.SchedulerConfig(**args.scheduler)
    return vc.VllmConfig(**kwargs)


def _check_tokens(args: argparse.Namespace, config: Any) -> None:
    """Every --tokens count must lie within the compile ranges: the plan's top is the limit."""
    from compilation_bridge.compile.plan import make_plan

    top = make_plan(config, args.max_num_tokens).max_num_tokens
    largest = max(args.tokens)
    if largest <= top:
        return
    if args.vllm_config:
        fix = f"pass --scheduler '{{\"max_num_batched_tokens\": {largest}}}' or more"
    else:
        fix = f"pass --max-num-tokens {largest} or more"
    raise UsageError("--tokens", f"{largest} is above the top of the compile ranges, {top}: {fix}")
