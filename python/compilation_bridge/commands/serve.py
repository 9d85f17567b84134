"""`compilation-bridge serve`: run the gRPC worker by hand (Snakepit itself starts python/grpc_server.py).

Takes the same flags as the launch script; `--platform cpu|cuda` fixes the platform the config model
resolves against, and `--host` widens the loopback-only default (see README, security options).
"""

from __future__ import annotations

import argparse
import os

from compilation_bridge.transport import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from compilation_bridge.transport.launch import apply_platform, health_check
    from compilation_bridge.transport.logs import configure_logging

    configure_logging(os.environ.get("SNAKEPIT_LOG_LEVEL") or "info")  # a person is watching: say where
    serve_options = options.from_namespace(args)
    apply_platform(serve_options.platform)
    if serve_options.health_check:
        return health_check()
    from compilation_bridge.transport.server import serve

    return serve(serve_options)
