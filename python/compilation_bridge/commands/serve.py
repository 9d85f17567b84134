"""`compilation-bridge serve`: run the gRPC worker by hand (Snakepit itself starts python/grpc_server.py).

Takes the same flags as the launch script; `--platform cpu|cuda` fixes the platform the config model
resolves against, and `--host` widens the loopback-only default (see docs/settings.md).
"""

from __future__ import annotations

import argparse

from compilation_bridge.transport import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from compilation_bridge.transport.launch import environment_refused, run_worker
    from compilation_bridge.transport.logs import configure_logging

    configure_logging(default="info")  # a person is watching: say where
    if environment_refused():
        return 2
    return run_worker(options.from_namespace(args))
