"""Compile benchmark for a reference model: cold vs warm compile, compiled vs eager run time.

`bench_compile()` starts two fresh processes on the same new cache directory: the first compiles
everything (cold: an empty compile cache and an empty Inductor cache), the second finds the artifacts
and loads them (warm). Each reports the time from `compile_model` to the end of the first run of every
token count. The warm process then times compiled and eager forwards, alternately (medians).
Figures are printed, never asserted: this is a benchmark, not a test.

    python -m compilation_bridge.commands.bench_compile --model toy-llama --tokens 1,16,64
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, TextIO

DEFAULT_CONFIG = {"mode": 3, "backend": "inductor"}


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs in the fresh process: compile, first runs, then steady-state timings."""
    start = time.perf_counter()
    import torch

    from compilation_bridge.compile import compile_model, preload
    from compilation_bridge.vllm_config import CompilationConfig

    # What a worker pays once at start-up, not per compile: reported apart from the compile time.
    preload()
    imports_s = time.perf_counter() - start
    start = time.perf_counter()
    config = CompilationConfig(**spec["config"], cache_dir=spec["cache_dir"])
    model = compile_model(config, model=spec["model"], **spec["options"])
    for n in spec["tokens"]:
        model.run(n)
    compile_s = time.perf_counter() - start
    timings = []
    if spec["repeats"]:
        with torch.no_grad():
            for n in spec["tokens"]:
                inputs = model.model.example_inputs(n, model.device)
                compiled, eager = _interleaved_ms(
                    lambda i=inputs: model.forward(*i), lambda i=inputs: model.model(*i), spec["repeats"]
                )
                timings.append({"num_tokens": n, "compiled_ms": compiled, "eager_ms": eager})
    report = model.report()
    return {
        "compile_and_first_runs_s": compile_s,
        "imports_s": imports_s,
        "timings": timings,
        "report": report,
    }


def _interleaved_ms(first: Any, second: Any, repeats: int) -> tuple[float, float]:
    """Median milliseconds of two callables timed alternately, so both see the same machine load."""
    for _ in range(3):  # warm-up
        first()
        second()
    a, b = [], []
    for _ in range(repeats):
        for fn, samples in ((first, a), (second, b)):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return statistics.median(a) * 1e3, statistics.median(b) * 1e3


def _spawn(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "compilation_bridge.commands.bench_compile", "--child", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"benchmark process failed:\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - start
    return result


def bench_compile(
    model: str = "toy-llama",
    tokens: tuple[int, ...] = (1, 16, 64),
    config: dict[str, Any] | None = None,
    repeats: int = 30,
    out: TextIO | None = None,
    threads: int | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Measure and print cold vs warm compile and compiled vs eager run time; return the figures."""
    out = out or sys.stdout
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as root:
        spec = {
            "config": config or DEFAULT_CONFIG,
            "cache_dir": os.path.join(root, "cache"),
            "model": model,
            "options": options,
            "tokens": list(tokens),
            "repeats": 0,
        }
        # Inductor's own cache starts empty too, so "cold" really compiles every kernel.
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor")}
        if threads:
            # On a shared machine, OpenMP kernels with more threads than free cores stall; one thread
            # gives comparable figures for compiled and eager.
            env["OMP_NUM_THREADS"] = str(threads)
        cold = _spawn(spec, env)
        warm = _spawn({**spec, "repeats": repeats}, env)
    figures = {"cold": cold, "warm": warm, "threads": env.get("OMP_NUM_THREADS", "default")}
    print_figures(figures, model, out)
    return figures


def print_figures(figures: dict[str, Any], model: str, out: TextIO) -> None:
    cold, warm = figures["cold"], figures["warm"]
    c, w = cold["report"], warm["report"]
    speedup = cold["compile_and_first_runs_s"] / max(warm["compile_and_first_runs_s"], 1e-9)
    print(
        f"{model}: {c['mode']} with {c['backend']}, {c['num_pieces']} pieces, ranges {c['compile_ranges']}, "
        f"OMP threads {figures.get('threads', 'default')}",
        file=out,
    )
    for name, fig, rep in (("cold", cold, c), ("warm", warm, w)):
        print(
            f"{name}: compile + first runs {fig['compile_and_first_runs_s']:.2f} s "
            f"(imports {fig['imports_s']:.2f} s, whole process {fig['process_s']:.2f} s), "
            f"{rep['counters']['num_inductor_compiles']} Inductor compiles, "
            f"{rep['num_artifacts_saved']} artifacts saved, {rep['num_artifacts_loaded']} loaded",
            file=out,
        )
    print(f"warm is {speedup:.1f}x faster than cold", file=out)
    print(f"{'tokens':>8} {'compiled ms':>12} {'eager ms':>9} {'speed-up':>9}", file=out)
    for t in warm["timings"]:
        ratio = t["eager_ms"] / max(t["compiled_ms"], 1e-9)
        print(
            f"{t['num_tokens']:>8} {t['compiled_ms']:>12.3f} {t['eager_ms']:>9.3f} {ratio:>8.2f}x", file=out
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="toy-llama")
    parser.add_argument("--tokens", default="1,16,64")
    parser.add_argument(
        "--config", default=json.dumps(DEFAULT_CONFIG), help="CompilationConfig keywords as JSON"
    )
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, help="OMP_NUM_THREADS for the measured processes")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(json.loads(args.child))))
        return 0
    options = {k: json.loads(v) for k, _, v in (o.partition("=") for o in args.option)}
    tokens = tuple(int(t) for t in args.tokens.split(","))
    bench_compile(args.model, tokens, json.loads(args.config), args.repeats, threads=args.threads, **options)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
