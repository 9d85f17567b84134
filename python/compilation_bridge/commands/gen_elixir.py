"""`compilation-bridge gen-elixir`: write the Elixir stub's modules from the exposed Python surface
(compilation_bridge/elixir_gen/)."""

from __future__ import annotations

import argparse
from pathlib import Path

from compilation_bridge.elixir_gen.render import format_with_mix, render, write


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=Path("elixir_stub"), help="the Mix project (default ./elixir_stub)"
    )
    parser.add_argument("--no-format", action="store_true", help="do not run `mix format` on the output")


def run(args: argparse.Namespace) -> int:
    paths = write(args.out, render())
    if not args.no_format:
        format_with_mix(args.out, paths)
    for path in paths:
        print(path)
    return 0
