"""Which observers a worker starts at start-up, from the operator's settings.

OpenTelemetry is optional (the `otel` extra): it is imported only when `SNAKEPIT_OTEL_ENDPOINT` (or
`SNAKEPIT_OTEL_CONSOLE`) asks for it. Asked for but not installed, the worker says so once and serves
without it: a missing optional package must never cost a pool its workers.
"""

from __future__ import annotations

import logging
from typing import Protocol

from compilation_bridge.observability.readings import Readings
from compilation_bridge.settings import OTEL_ENDPOINT_ENV, otel_settings

log = logging.getLogger("compilation_bridge.observability")


class Started(Protocol):
    def stop(self, timeout_s: float) -> None:
        """Stop observing and deliver what is still buffered, within `timeout_s`."""
        ...


def start_observers(readings: Readings) -> list[Started]:
    """The observers the settings ask for, registered with the hub; none (and no import) by default."""
    wanted = otel_settings()
    if wanted is None:
        return []
    try:
        from compilation_bridge.observability import otel_export
    except ImportError as exc:
        if not (exc.name or "").startswith("opentelemetry"):
            raise
        log.warning(
            "%s is set but OpenTelemetry is not installed (%s): serving without spans and metrics; "
            "install the package's `otel` extra to export them",
            OTEL_ENDPOINT_ENV,
            exc.name,
        )
        return []
    try:
        return [otel_export.start(wanted, readings)]
    except Exception as exc:  # observing is optional: a worker that cannot export still serves
        log.warning("OpenTelemetry could not start (%s: %s): serving without it", type(exc).__name__, exc)
        return []
