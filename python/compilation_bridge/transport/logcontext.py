"""The correlation id of the request being served, for log lines on any thread that serves it."""

from __future__ import annotations

import contextvars
import logging

correlation_id: contextvars.ContextVar[str] = contextvars.ContextVar("correlation_id", default="-")


class CorrelationFilter(logging.Filter):
    """Adds `record.corr` so that formatters can print `[corr=<id>]` (Snakepit's log format)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.corr = correlation_id.get()
        return True
