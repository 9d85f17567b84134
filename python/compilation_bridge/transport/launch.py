"""Entry point of `python/grpc_server.py`, the script Snakepit spawns (docs/wire.md, Launch arguments)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from compilation_bridge.transport import options as serve_options
from compilation_bridge.transport.logs import configure_logging

log = logging.getLogger("compilation_bridge.transport")


def apply_platform(platform: str | None) -> None:
    """--platform sets the operator setting before anything reads it."""
    if platform:
        from compilation_bridge.vllm_config.platforms import use_platform

        use_platform(platform)


def environment_refused() -> bool:
    """Whether a setting holds a value of the wrong kind: said in one line, and the worker does not start
    (a typo in a limit must not quietly become its default)."""
    from compilation_bridge.settings import SettingError, check_environment

    try:
        check_environment()
    except SettingError as exc:
        print(f"compilation-bridge: {exc}", file=sys.stderr)
        return True
    return False


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


def launched_by_snakepit(options: serve_options.ServeOptions) -> bool:
    """Snakepit always passes --snakepit-run-id and a ready file; a stray invocation has neither."""
    return bool(options.run_id or options.ready_file)


def run_worker(options: serve_options.ServeOptions) -> int:
    """What both doors (this script and `compilation-bridge serve`) do once logging and options are set."""
    apply_platform(options.platform)
    if options.health_check:
        return health_check()
    if serve_options.beyond_loopback(options.host):
        # The port has no authentication of its own (docs/worker.md, "Trust boundary").
        log.warning(
            "binding %s: the worker then listens beyond loopback, and whoever can reach this port can "
            "call it; keep the default (localhost) unless your own network controls guard the port",
            options.host,
        )
    from compilation_bridge.transport.server import serve

    return serve(options)


def main(argv: Sequence[str] | None = None) -> int:
    configure_logging()
    if environment_refused():
        return 2
    options = serve_options.parse(sys.argv[1:] if argv is None else argv)
    if options.ignored:
        log.debug("ignoring unknown arguments %s", list(options.ignored))
    if not options.health_check and not launched_by_snakepit(options):
        # A server nobody waits for and Snakepit's cleanup cannot match (it looks for the run id) would
        # outlive its caller: refuse, and point a person at the command meant for serving by hand.
        print(
            "grpc_server.py serves only when Snakepit starts it (with --snakepit-run-id or "
            "SNAKEPIT_READY_FILE); to serve by hand run: compilation-bridge serve",
            file=sys.stderr,
        )
        return 2
    return run_worker(options)
