"""Planning a deployment: `EngineArgs(model=...).create_engine_config()` and reading the `VllmConfig` back,
here against vLLM 0.14.0 itself on the same machine (target: at most half of vLLM's time).

Both sides run the same timing program in a fresh interpreter of their own, naming their modules by
string: this package's (`compilation_bridge.vllm_config...`) and, under the interpreter of an environment
that has vLLM (`--vllm-python`, by default the differential tests' `.oracle-venv`), vLLM's. So this package
never imports vLLM; it only starts the interpreter the user points it at. Figures:

- import included: a fresh process's import of the module plus its first create-and-read;
- import excluded: the median of the following create-and-read calls in that process.

The model is the config-only tiny Llama this package ships, read by both from the same folder.
Figures only; asserts nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

TARGET_RATIO = 0.5  # ours / vLLM's, import excluded and included
MODEL = Path(__file__).resolve().parents[1] / "vllm_config" / "models" / "tiny-llama"
OURS = ("compilation_bridge.vllm_config.engine_args", "compilation_bridge.vllm_config.usage")
VLLMS = ("vllm.engine.arg_utils", "vllm.usage.usage_lib")

# The timing program, run by each side's interpreter: argv = args module, usage module, model, iterations,
# and which side it is: each selects the CPU platform (an install of vLLM's GPU wheel beside a CPU torch,
# as the differential tests' environment is, detects no platform by itself).
PROGRAM = r"""
import importlib, json, statistics, sys, time
start = time.perf_counter()
if sys.argv[5] == "vllm":  # vLLM's CPU platform, as a CPU build of vLLM selects it by itself
    platforms = importlib.import_module("vllm.platforms")
    platforms._current_platform = importlib.import_module("vllm.platforms.cpu").CpuPlatform()
else:  # ours plans for the CPU too, whatever this machine's torch
    importlib.import_module("compilation_bridge.vllm_config.platforms").set_platform("cpu")
engine_args = importlib.import_module(sys.argv[1]).EngineArgs
usage = importlib.import_module(sys.argv[2]).UsageContext.LLM_CLASS
imported = time.perf_counter()

def create_and_read():
    config = engine_args(model=sys.argv[3]).create_engine_config(usage)
    config.compute_hash()
    config.scheduler_config.max_num_batched_tokens, config.cache_config.block_size
    config.compilation_config.compute_hash(), config.parallel_config.world_size

create_and_read()
first = time.perf_counter()
calls = []
for _ in range(int(sys.argv[4])):
    t0 = time.perf_counter()
    create_and_read()
    calls.append(time.perf_counter() - t0)
print(json.dumps({"import_s": imported - start, "first_call_s": first - imported,
                  "call_p50_s": statistics.median(calls)}))
"""


def default_vllm_python() -> Path:
    return Path(os.environ.get("ORACLE_VENV", ".oracle-venv")) / "bin" / "python"


def time_side(python: str, modules: tuple[str, str], iterations: int, setup: str) -> dict[str, float]:
    # Both plan for the CPU platform with the same KV cache space (vLLM sizes it from the machine).
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0", "VLLM_CPU_KVCACHE_SPACE": "4"}
    out = subprocess.run(
        [python, "-c", PROGRAM, *modules, str(MODEL), str(iterations), setup],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{modules[0]} under {python} failed:\n{out.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    figures["import_included_s"] = figures["import_s"] + figures["first_call_s"]
    return figures


def measure(iterations: int = 50, vllm_python: Path | None = None) -> dict[str, Any]:
    python = vllm_python or default_vllm_python()
    if not python.exists():
        return {"skipped": f"no interpreter with vLLM at {python} (bash scripts/setup_oracle.sh builds one)"}
    ours = time_side(sys.executable, OURS, iterations, "ours")
    vllm = time_side(str(python), VLLMS, iterations, "vllm")
    return {
        "iterations": iterations,
        "ours": ours,
        "vllm": vllm,
        "ratio_import_excluded": ours["call_p50_s"] / vllm["call_p50_s"],
        "ratio_import_included": ours["import_included_s"] / vllm["import_included_s"],
    }


def report(figures: dict[str, Any]) -> None:
    if "skipped" in figures:
        print(f"engine config: skipped, {figures['skipped']}")
        return
    ours, vllm = figures["ours"], figures["vllm"]
    print(
        f"engine config vs vLLM 0.14.0, EngineArgs(...).create_engine_config() and reading it back "
        f"({figures['iterations']} calls a side, target <= {TARGET_RATIO}x):\n"
        f"  import excluded: ours p50 {ours['call_p50_s'] * 1e3:.2f} ms, "
        f"vLLM {vllm['call_p50_s'] * 1e3:.2f} ms, "
        f"ratio {figures['ratio_import_excluded']:.3f}x\n"
        f"  import included: ours {ours['import_included_s']:.2f} s, vLLM {vllm['import_included_s']:.2f} s, "
        f"ratio {figures['ratio_import_included']:.3f}x"
    )
