"""`compilation-bridge gen-elixir`: write the Elixir stub's modules from the exposed Python surface
(compilation_bridge/elixir_gen/)."""

from __future__ import annotations

import argparse
from pathlib import Path

from compilation_bridge.commands.arguments import UsageError
from compilation_bridge.elixir_gen.render import format_with_mix, render, write


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=Path("elixir_stub"), help="the Mix project (default ./elixir_stub)"
    )
    parser.add_argument("--no-format", action="store_true", help="do not run `mix format` on the output")
    parser.add_argument("--force", action="store_true", help="write into --out even when it holds no mix.exs")


def run(args: argparse.Namespace) -> int:
    if not args.force and not (args.out / "mix.exs").is_file():
        # A mistyped --out would otherwise grow a lib/generated/ tree wherever it points.
        raise UsageError(
            "--out", f"{str(args.out)!r} is not a Mix project (no mix.exs); pass --force to write there"
        )
    paths = write(args.out, render())
    if not args.no_format:
        format_with_mix(args.out, paths)
    for path in paths:
        print(path)
    return 0
