"""Logging on stderr (stdout carries only protocol data), with the request's correlation id.

Text format is Snakepit's own (`time - [thread] - name - LEVEL - [corr=<id>] msg`);
COMPILATION_BRIDGE_LOG_FORMAT=json writes one JSON object per line instead. The level comes from
SNAKEPIT_LOG_LEVEL (debug, info, warning, error, none), default warning.
"""

from __future__ import annotations

import json
import logging
import os
import sys

from compilation_bridge.protocol.logcontext import CorrelationFilter

TEXT_FORMAT = "%(asctime)s - [%(threadName)s] - %(name)s - %(levelname)s - [corr=%(corr)s] %(message)s"
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "thread": record.threadName,
            "correlation_id": getattr(record, "corr", "-"),
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level_name: str | None = None) -> None:
    level_name = (level_name or os.environ.get("SNAKEPIT_LOG_LEVEL") or "warning").strip().lower()
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    if level_name == "none":
        root.addHandler(logging.NullHandler())
        root.setLevel(logging.CRITICAL + 1)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(CorrelationFilter())
    if os.environ.get("COMPILATION_BRIDGE_LOG_FORMAT", "").strip().lower() == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(LEVELS.get(level_name, logging.WARNING))
