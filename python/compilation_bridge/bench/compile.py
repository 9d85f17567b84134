"""Compile benchmark: ours against plain `torch.compile`, cold and warm, in fresh processes of one run.

Four fresh processes on one model: ours cold (empty compile cache, empty Inductor cache), ours warm
(the same caches: the warm-start bundle), plain `torch.compile(model, dynamic=True, fullgraph=True)` cold
(its own empty Inductor cache) and plain warm (that cache again). Each reports the time from the compile
call to the end of the first forward at every token count; imports (torch, Dynamo, Inductor) are
measured apart, as a worker pays them once at start-up. The warm processes then time compiled and eager
forwards alternately (medians of N after a warm-up). A worker is also timed answering Heartbeat every
20 ms while it compiles the model cold and while a second worker loads it warm. Figures are printed,
never asserted: this is a benchmark, not a test.

    python -m compilation_bridge.bench.compile --tokens 4,16,64 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, TextIO

from compilation_bridge.bench.stats import percentile
from compilation_bridge.testing.session import SnakeBridgeSession, wire_ref
from compilation_bridge.testing.worker_process import WorkerProcess

DEFAULT_CONFIG = {"mode": 3, "backend": "inductor"}
DEFAULT_OPTIONS = {"hidden_size": 256, "num_layers": 4}
DEFAULT_TOKENS = (4, 16, 64)
WARMUP = 3
HEARTBEAT_EVERY_S = 0.02


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs in the fresh process: compile (ours or plain torch), first runs, then steady-state timings."""
    start = time.perf_counter()
    import torch

    from compilation_bridge.compile import preload

    # What a worker pays once at start-up, not per compile: reported apart from the compile time.
    preload()
    imports_s = time.perf_counter() - start
    with torch.no_grad():
        call, eager, inputs_for, compile_s, report = (_ours if spec["kind"] == "ours" else _plain)(spec)
        timings = []
        for n in spec["tokens"] if spec["repeats"] else ():
            inputs = inputs_for(n)
            compiled_ms, eager_ms = _interleaved_ms(
                lambda i=inputs: call(*i), lambda i=inputs: eager(*i), spec["repeats"]
            )
            timings.append({"num_tokens": n, "compiled_ms": compiled_ms, "eager_ms": eager_ms})
    return {
        "compile_and_first_runs_s": compile_s,
        "imports_s": imports_s,
        "timings": timings,
        "repeats": spec["repeats"],
        "warmup": WARMUP,
        "report": report,
    }


def _first_runs(call: Any, inputs_for: Any, tokens: list[int]) -> None:
    for n in tokens:
        call(*inputs_for(n))


def _ours(spec: dict[str, Any]) -> tuple[Any, Any, Any, float, dict[str, Any]]:
    from compilation_bridge.compile import compile_model
    from compilation_bridge.vllm_config import CompilationConfig

    start = time.perf_counter()
    config = CompilationConfig(**spec["config"], cache_dir=spec["cache_dir"])
    model = compile_model(config, model=spec["model"], **spec["options"])

    def inputs_for(n: int) -> Any:
        return model.model.example_inputs(n, model.device)  # type: ignore[operator]

    _first_runs(model.forward, inputs_for, spec["tokens"])
    compile_s = time.perf_counter() - start
    return model.forward, model.model, inputs_for, compile_s, model.report()


def _plain(spec: dict[str, Any]) -> tuple[Any, Any, Any, float, dict[str, Any]]:
    """Plain torch.compile on the same model (same weights, same custom-op choices as ours)."""
    import torch

    from compilation_bridge.compile import ops, reference_models
    from compilation_bridge.compile.plan import make_plan
    from compilation_bridge.vllm_config import CompilationConfig

    config = CompilationConfig(**spec["config"])
    with ops.custom_op_context(make_plan(config, None).custom_ops, config):
        module = reference_models.build_model(spec["model"], 0, **spec["options"]).eval()

    def inputs_for(n: int) -> Any:
        return module.example_inputs(n, torch.device("cpu"))  # type: ignore[operator]

    start = time.perf_counter()
    compiled = torch.compile(module, dynamic=True, fullgraph=True)
    _first_runs(compiled, inputs_for, spec["tokens"])
    compile_s = time.perf_counter() - start
    counters = torch._dynamo.utils.counters
    report = {
        "mode": "torch.compile(dynamic=True, fullgraph=True)",
        "dynamo_graphs_in_process": int(counters["stats"]["unique_graphs"]),
        "fx_graph_cache_hits": int(counters["inductor"]["fxgraph_cache_hit"]),
        "fx_graph_cache_misses": int(counters["inductor"]["fxgraph_cache_miss"]),
    }
    return compiled, module, inputs_for, compile_s, report


def _interleaved_ms(first: Any, second: Any, repeats: int) -> tuple[float, float]:
    """Median milliseconds of two callables timed alternately, so both see the same machine load."""
    for _ in range(WARMUP):
        first()
        second()
    a: list[float] = []
    b: list[float] = []
    for _ in range(repeats):
        for fn, samples in ((first, a), (second, b)):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return statistics.median(a) * 1e3, statistics.median(b) * 1e3


def _spawn(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "compilation_bridge.bench.compile", "--child", json.dumps(spec)],
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


def _beat_while(worker: Any, work: Any) -> dict[str, Any]:
    """Heartbeat latencies (ms) while `work()` runs on the worker, one beat every 20 ms."""
    stop, latencies = threading.Event(), []

    def beat() -> None:
        while not stop.wait(HEARTBEAT_EVERY_S):
            latency = worker.heartbeat_once(timeout_s=10)
            latencies.append(latency * 1e3 if latency >= 0 else float("inf"))

    thread = threading.Thread(target=beat, name="bench-heartbeats", daemon=True)
    thread.start()
    try:
        work()
    finally:
        stop.set()
        thread.join()
    if not latencies:
        return {"beats": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    return {
        "beats": len(latencies),
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": max(latencies),
    }


def heartbeats_during_compile(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """A worker compiles the model cold while Heartbeat is timed; a second worker then loads it warm."""
    out = {}
    for phase in ("cold_compile", "warm_load"):
        worker = WorkerProcess.spawn(heartbeat_interval_s=None, extra_env=env, ready_timeout_s=60)
        try:
            session = SnakeBridgeSession(worker.stub, worker.session_id, session_id="bench-compile")
            # torch and Dynamo imported first (a tiny eager-backend compile), so that the beats below
            # cover the compile or load itself rather than the worker's one-off imports
            tiny = session.call_class("vllm.config", "CompilationConfig", [], mode=3, backend="eager")
            session.call(
                "compilation_bridge.compile", "compile_model", [wire_ref(tiny)], model="simple-piecewise"
            )

            def work(session: SnakeBridgeSession = session) -> None:
                cc = session.call_class("vllm.config", "CompilationConfig", [], **spec["config"])
                kwargs = {"model": spec["model"], **spec["options"]}
                model = session.call("compilation_bridge.compile", "compile_model", [wire_ref(cc)], **kwargs)
                for n in spec["tokens"]:
                    session.call_method(model, "run", [n], repeats=1)

            out[phase] = _beat_while(worker, work)
        finally:
            worker.terminate()
    return out


def bench_compile(
    model: str = "toy-llama",
    tokens: tuple[int, ...] = DEFAULT_TOKENS,
    config: dict[str, Any] | None = None,
    repeats: int = 30,
    out: TextIO | None = None,
    threads: int | None = 1,
    heartbeats: bool = True,
    **options: Any,
) -> dict[str, Any]:
    """Measure and print ours vs plain torch.compile, cold and warm, and return the figures."""
    out = out or sys.stdout
    options = options or dict(DEFAULT_OPTIONS)
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as root:
        spec: dict[str, Any] = {
            "kind": "ours",
            "config": config or DEFAULT_CONFIG,
            "cache_dir": os.path.join(root, "cache"),
            "model": model,
            "options": options,
            "tokens": list(tokens),
            "repeats": 0,
        }
        env = _env(root, "ours", threads)
        figures: dict[str, Any] = {"threads": env.get("OMP_NUM_THREADS", "default"), "options": options}
        figures["cold"] = _spawn(spec, env)
        figures["warm"] = _spawn({**spec, "repeats": repeats}, env)
        plain = {**spec, "kind": "torch"}
        torch_env = _env(root, "torch", threads)
        figures["torch_cold"] = _spawn(plain, torch_env)
        figures["torch_warm"] = _spawn({**plain, "repeats": repeats}, torch_env)
        if heartbeats:
            beat_spec = {**spec, "config": {**spec["config"], "cache_dir": os.path.join(root, "beat-cache")}}
            beat_env = {
                "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor-beat"),
                "OMP_NUM_THREADS": str(threads or 1),
                "COMPILATION_BRIDGE_ALLOWED_ROOTS": root,
            }
            figures["heartbeats"] = heartbeats_during_compile(beat_spec, beat_env)
    print_figures(figures, model, out)
    return figures


def _env(root: str, name: str, threads: int | None) -> dict[str, str]:
    # Each side's Inductor cache starts empty, so "cold" really compiles every kernel.
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, f"inductor-{name}"),
        # the benchmark's private temporary folder (0700) is where its caches may be written
        "COMPILATION_BRIDGE_ALLOWED_ROOTS": root,
    }
    if threads:
        # On a shared machine, OpenMP kernels with more threads than free cores stall; one thread
        # gives comparable figures for compiled and eager.
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def ratios(figures: dict[str, Any]) -> dict[str, float | None]:
    """The ratios the targets are stated in (x faster: baseline time / our time)."""

    def t(name: str) -> float:
        return max(figures[name]["compile_and_first_runs_s"], 1e-9)

    at64 = [x for x in figures["warm"]["timings"] if x["num_tokens"] == 64]
    beats = figures.get("heartbeats", {}).get("cold_compile", {})
    return {
        "warm_vs_cold": t("cold") / t("warm"),
        "warm_vs_torch_warm": t("torch_warm") / t("warm"),
        "torch_warm_vs_torch_cold": t("torch_cold") / t("torch_warm"),
        "compiled_vs_eager_at_64": at64[0]["eager_ms"] / at64[0]["compiled_ms"] if at64 else None,
        "heartbeat_p99_cold_compile_ms": beats.get("p99_ms"),
    }


def print_figures(figures: dict[str, Any], model: str, out: TextIO) -> None:
    c, w = figures["cold"]["report"], figures["warm"]["report"]
    print(
        f"{model} {figures.get('options', {})}: {c['mode']} with {c['backend']}, {c['num_pieces']} pieces, "
        f"ranges {c['compile_ranges']}, OMP threads {figures.get('threads', 'default')}",
        file=out,
    )
    print("compile + first runs (fresh processes; imports apart):", file=out)
    for name, label in (
        ("cold", "ours cold"),
        ("warm", "ours warm"),
        ("torch_cold", "torch.compile cold"),
        ("torch_warm", "torch.compile warm"),
    ):
        if name in figures:
            fig = figures[name]
            print(
                f"  {label:<20} {fig['compile_and_first_runs_s']:7.2f} s  (imports {fig['imports_s']:.2f} s, "
                f"whole process {fig['process_s']:.2f} s)",
                file=out,
            )
    print(
        f"ours: cold {c['counters']['num_inductor_compiles']} Inductor compiles, warm "
        f"{w['counters']['num_inductor_compiles']} compiles, {w['num_artifacts_loaded']} artifacts loaded, "
        f"{w.get('dynamo_graphs_in_process', '?')} Dynamo traces; warm start: "
        f"{(w.get('warm_start') or {}).get('reason', '-')}",
        file=out,
    )
    _print_ratios(figures, out)
    _print_timings(figures["warm"], out)
    _print_heartbeats(figures.get("heartbeats"), out)


def _print_ratios(figures: dict[str, Any], out: TextIO) -> None:
    if "torch_warm" not in figures:
        print(f"warm is {ratios_cold_warm(figures):.1f}x faster than cold", file=out)
        return
    r = ratios(figures)
    print(f"warm is {r['warm_vs_cold']:.1f}x faster than cold (target >= 10x)", file=out)
    print(
        f"ours warm is {r['warm_vs_torch_warm']:.1f}x faster than torch.compile's own warm cache "
        f"(target >= 2x); torch.compile warm is {r['torch_warm_vs_torch_cold']:.1f}x faster than its cold",
        file=out,
    )


def ratios_cold_warm(figures: dict[str, Any]) -> float:
    return figures["cold"]["compile_and_first_runs_s"] / max(
        figures["warm"]["compile_and_first_runs_s"], 1e-9
    )


def _print_timings(warm: dict[str, Any], out: TextIO) -> None:
    print(
        f"forward, ours warm process: medians of {warm.get('repeats', '?')} runs each after "
        f"{warm.get('warmup', WARMUP)} warm-up runs, compiled and eager timed alternately",
        file=out,
    )
    print(f"{'tokens':>8} {'compiled ms':>12} {'eager ms':>9} {'speed-up':>9}", file=out)
    for t in warm["timings"]:
        ratio = t["eager_ms"] / max(t["compiled_ms"], 1e-9)
        print(
            f"{t['num_tokens']:>8} {t['compiled_ms']:>12.3f} {t['eager_ms']:>9.3f} {ratio:>8.2f}x", file=out
        )


def _print_heartbeats(beats: dict[str, Any] | None, out: TextIO) -> None:
    for phase, label in (("cold_compile", "a cold compile"), ("warm_load", "a warm load")):
        b = (beats or {}).get(phase)
        if b and b["beats"]:
            print(
                f"heartbeat during {label}: p50 {b['p50_ms']:.1f} ms, p99 {b['p99_ms']:.1f} ms, "
                f"max {b['max_ms']:.1f} ms over {b['beats']} beats (target p99 < 100 ms)",
                file=out,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="toy-llama")
    parser.add_argument("--tokens", default=",".join(map(str, DEFAULT_TOKENS)))
    parser.add_argument(
        "--config", default=json.dumps(DEFAULT_CONFIG), help="CompilationConfig keywords as JSON"
    )
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS for the measured processes")
    parser.add_argument("--no-heartbeats", action="store_true", help="skip the worker heartbeat measurement")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(json.loads(args.child))))
        return 0
    options = {k: json.loads(v) for k, _, v in (o.partition("=") for o in args.option)}
    tokens = tuple(int(t) for t in args.tokens.split(","))
    figures = bench_compile(
        args.model,
        tokens,
        json.loads(args.config),
        args.repeats,
        threads=args.threads,
        heartbeats=not args.no_heartbeats,
        **options,
    )
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
