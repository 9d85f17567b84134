"""The `compilation-bridge` command: one sub-command per module under `compilation_bridge.commands`.

Each command module defines `add_arguments(parser)` and `run(args) -> int`; its name and one-line help
are in `COMMANDS`. A module is imported only when its sub-command runs, so `compilation-bridge serve`
never pays for torch.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from types import ModuleType

from compilation_bridge import __version__
from compilation_bridge.commands.arguments import UsageError
from compilation_bridge.commands.interrupt import report_interrupted

# sub-command name -> (module under compilation_bridge.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "inspect": ("inspect", "build a CompilationConfig/VllmConfig and print its fields, ranges and hash"),
    "serve": ("serve", "serve Snakepit/SnakeBridge calls over gRPC (what python/grpc_server.py runs)"),
    "bench": ("bench", "every benchmark in one run, printed as ratios (RPC, port, compile); --markdown PATH"),
    "port": ("port", "serve SnakeBridge calls on stdin/stdout as an Erlang port (length-prefixed msgpack)"),
    "gen-elixir": ("gen_elixir", "write the Elixir stub's generated modules from the exposed Python surface"),
    "compile": ("compile", "compile a reference model with a config, run it and print a report"),
    "settings": ("settings", "print the table of every environment variable the worker reads; --update PAGE"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compilation-bridge", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, (_module, help_text) in COMMANDS.items():
        subparsers.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        build_parser().parse_args(argv)  # prints usage or the version, and exits
        return 2
    module_name, help_text = COMMANDS[argv[0]]
    module = importlib.import_module(f"compilation_bridge.commands.{module_name}")
    parser = argparse.ArgumentParser(prog=f"compilation-bridge {argv[0]}", description=help_text)
    module.add_arguments(parser)
    return _run(module, parser, parser.parse_args(argv[1:]))


def _run(module: ModuleType, parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run a sub-command: a flag it rejects late is reported as argparse reports its own (exit 2);
    a file it cannot read or write is one line (exit 1); Ctrl-C ends it with one line and status 130
    instead of a traceback through torch's internals."""
    try:
        return int(module.run(args))
    except UsageError as e:
        parser.error(str(e))  # exits 2
    except BrokenPipeError:
        return _reader_went_away()
    except OSError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return report_interrupted()


def _reader_went_away() -> int:
    """stdout's reader closed early (`| head`): stop quietly with the shell's SIGPIPE status, as Unix tools
    do; stdout goes to /dev/null so the interpreter's last flush cannot raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + signal.SIGPIPE


if __name__ == "__main__":
    raise SystemExit(main())
