"""`compilation-bridge inspect`: build a config as vLLM 0.14.0 would and print what it became."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import sys
from pathlib import Path
from typing import Any

from compilation_bridge.commands.arguments import UsageError, json_object
from compilation_bridge.settings import PLATFORMS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=json_object, default="{}", help="CompilationConfig keywords as JSON")
    parser.add_argument("--platform", choices=PLATFORMS, help="plan as on this platform (default: detected)")
    parser.add_argument("--vllm-config", action="store_true", help="also run VllmConfig's post-init on it")
    parser.add_argument("--model", help="a bundled model name or a local folder with a config.json")
    parser.add_argument("--optimization-level", type=int, choices=range(4), help="VllmConfig's -O level")
    parser.add_argument("--scheduler", type=json_object, help="SchedulerConfig keywords as JSON")
    parser.add_argument("--parallel", type=json_object, help="ParallelConfig keywords as JSON")


def _plain(value: Any) -> Any:
    """A JSON-able view of a config value (enums by name, dataclasses as dicts)."""
    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _build(args: argparse.Namespace) -> dict[str, Any]:
    from compilation_bridge import vllm_config as vc

    cc = vc.CompilationConfig(**args.config)
    report: dict[str, Any] = {}
    engine_options = (args.model, args.scheduler, args.parallel, args.optimization_level)
    if args.vllm_config or any(option is not None for option in engine_options):
        kwargs: dict[str, Any] = {"compilation_config": cc}
        if args.model:
            kwargs["model_config"] = vc.ModelConfig(model=args.model, skip_tokenizer_init=True)
        if args.scheduler:
            kwargs["scheduler_config"] = vc.SchedulerConfig(**args.scheduler)
        if args.parallel:
            kwargs["parallel_config"] = vc.ParallelConfig(**args.parallel)
        if args.optimization_level is not None:
            kwargs["optimization_level"] = vc.OptimizationLevel(args.optimization_level)
        report["vllm_config_hash"] = vc.VllmConfig(**kwargs).compute_hash()
    skipped = {"static_forward_context", "traced_files"}
    fields = [f.name for f in dataclasses.fields(cc) if f.name not in skipped]
    report["fields"] = {name: _plain(getattr(cc, name)) for name in fields}
    report["compile_ranges"] = [[r.start, r.end] for r in cc.get_compile_ranges()]
    report["hash"] = cc.compute_hash()
    return report


def _check_model(model: str | None) -> None:
    """A name that is neither bundled nor a folder is a typo: say so, with the bundled names. (Whether a
    folder may be read, and what its config.json says, stays ModelConfig's judgement, as in vLLM.)"""
    from compilation_bridge.vllm_config.model import BUNDLED_MODELS

    if model is None or (BUNDLED_MODELS / model).is_dir() or Path(model).expanduser().is_dir():
        return
    bundled = ", ".join(sorted(p.name for p in BUNDLED_MODELS.iterdir() if p.is_dir()))
    raise UsageError("--model", f"unknown model {model!r}; bundled models: {bundled} (or a folder)")


def run(args: argparse.Namespace) -> int:
    from compilation_bridge.vllm_config.platforms import get_platform, use_platform

    _check_model(args.model)
    if args.platform:
        use_platform(args.platform)
    try:
        report = _build(args)
    except Exception as e:  # the CLI reports any config error the way vLLM raised it
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    report["platform"] = get_platform().name
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0
