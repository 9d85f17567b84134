"""`compilation-bridge port`: serve SnakeBridge calls over stdin/stdout as an Erlang port.

Each frame is a 4-byte big-endian length and a msgpack map (see `compilation_bridge.transport.port`);
the Elixir side opens it with `Port.open({:spawn_executable, python}, [{:packet, 4}, :binary, ...])`.
"""

from __future__ import annotations

import argparse

from compilation_bridge.commands.arguments import at_least
from compilation_bridge.settings import LOG_LEVELS, PLATFORMS

MIN_FRAME_BYTES = 1024  # the least that carries an ordinary call


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from compilation_bridge.transport.port import DEFAULT_MAX_FRAME_BYTES

    parser.add_argument(
        "--max-frame-bytes",
        type=at_least(MIN_FRAME_BYTES),
        default=DEFAULT_MAX_FRAME_BYTES,
        help=f"largest request frame accepted (default {DEFAULT_MAX_FRAME_BYTES})",
    )
    parser.add_argument("--platform", choices=PLATFORMS, help="plan as on this platform (default: detected)")
    parser.add_argument(
        "--log-level", choices=LOG_LEVELS, help="the log level (default: SNAKEPIT_LOG_LEVEL, else warning)"
    )


def run(args: argparse.Namespace) -> int:
    from compilation_bridge.transport.launch import apply_platform, environment_refused
    from compilation_bridge.transport.logs import configure_logging
    from compilation_bridge.transport.port import run_port

    configure_logging(args.log_level)
    if environment_refused():
        return 2
    apply_platform(args.platform)
    return run_port(args.max_frame_bytes)
