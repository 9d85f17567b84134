"""`compilation-bridge settings`: the table of every environment variable the worker reads
(compilation_bridge/settings_catalog.py), printed, or written into a Markdown page between its markers."""

from __future__ import annotations

import argparse
from pathlib import Path

from compilation_bridge.commands.arguments import UsageError
from compilation_bridge.settings_catalog import markdown_table, updated_page


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--update",
        type=Path,
        metavar="PAGE",
        help="rewrite the generated table in this Markdown page (docs/settings.md) instead of printing it",
    )


def run(args: argparse.Namespace) -> int:
    if args.update is None:
        print(markdown_table())
        return 0
    page = args.update.read_text(encoding="utf-8")
    try:
        updated = updated_page(page)
    except ValueError as e:
        raise UsageError("--update", f"{str(args.update)!r}: {e}") from None
    if updated != page:
        args.update.write_text(updated, encoding="utf-8")
    print(f"{args.update}: {'updated' if updated != page else 'already current'}")
    return 0
