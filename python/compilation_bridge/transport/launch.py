"""Entry point of `python/grpc_server.py`, the script Snakepit spawns (spec §1.1)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from compilation_bridge.transport import options as serve_options
from compilation_bridge.transport.logs import configure_logging

log = logging.getLogger("compilation_bridge.transport")


def apply_platform(platform: str | None) -> None:
    """--platform sets the operator setting before anything reads it."""
    if platform:
        os.environ["COMPILATION_BRIDGE_PLATFORM"] = platform
        from compilation_bridge.settings import reload_settings

        reload_settings()


def health_check() -> int:
    """`--health-check` (mix snakepit.doctor): can this interpreter run the worker? Exit 0 or 1."""
    try:
        from compilation_bridge.protocol.dispatch import Dispatcher
        from compilation_bridge.transport import server  # noqa: F401  (imports grpc and the stubs)

        dispatcher = Dispatcher()
        dispatcher.surface.load_module("vllm.config")
    except Exception as exc:
        print(f"compilation-bridge health check failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print("compilation-bridge health check: ok", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    configure_logging()
    options = serve_options.parse(sys.argv[1:] if argv is None else argv)
    if options.ignored:
        log.debug("ignoring unknown arguments %s", list(options.ignored))
    apply_platform(options.platform)
    if options.health_check:
        return health_check()
    from compilation_bridge.transport.server import serve

    return serve(options)
