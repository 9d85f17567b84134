"""Logging on stderr (stdout carries only protocol data), with the request's correlation id.

Text format is Snakepit's own (`time - [thread] - name - LEVEL - [corr=<id>] msg`);
COMPILATION_BRIDGE_LOG_FORMAT=json writes one JSON object per line instead. The level comes from
SNAKEPIT_LOG_LEVEL (debug, info, warning, error, none), default warning.

Log lines carry caller text (tool names, session and correlation ids, error messages). Both formats
escape control characters in the whole record (C0 and C1 controls, DEL, the Unicode line and paragraph
separators), so one record is always one line: a caller cannot forge records or send terminal escapes.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable

from compilation_bridge.settings import LOG_LEVEL_ENV, LOG_LEVELS, log_format_setting, log_level_setting
from compilation_bridge.transport.logcontext import CorrelationFilter

TEXT_FORMAT = "%(asctime)s - [%(threadName)s] - %(name)s - %(levelname)s - [corr=%(corr)s] %(message)s"
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
_CONTROLS = [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}


def _escapes(spell: Callable[[int], str]) -> dict[int, str]:
    return {code: _NAMED.get(code) or spell(code) for code in _CONTROLS}


# Text: readable Python-style escapes. JSON: only what json.dumps leaves raw (it escapes C0 itself),
# spelled as JSON escapes so that the line stays valid JSON.
_TEXT_ESCAPES = _escapes(lambda code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
_JSON_ESCAPES = {code: f"\\u{code:04x}" for code in _CONTROLS if code >= 0x7F}


def escape_controls(text: str) -> str:
    """`text` on one line: every control character as a visible escape."""
    return text.translate(_TEXT_ESCAPES)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # The whole record, traceback included: a multi-line record could not be told from two.
        return escape_controls(super().format(record))


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
        return json.dumps(entry, ensure_ascii=False).translate(_JSON_ESCAPES)


def configure_logging(level_name: str | None = None, default: str = "warning") -> None:
    """Log at `level_name`, else SNAKEPIT_LOG_LEVEL, else `default`. A level that is none of LOG_LEVELS
    (`loud`) leaves `default` and says so: a typo must not change how much a worker reports."""
    requested = (level_name or log_level_setting(default)).strip().lower() or default
    chosen = requested if requested in LOG_LEVELS else default
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    if chosen == "none":
        root.addHandler(logging.NullHandler())
        root.setLevel(logging.CRITICAL + 1)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(CorrelationFilter())
    if log_format_setting() == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(LEVELS[chosen])
    if chosen != requested:
        logging.getLogger("compilation_bridge").warning(
            "ignoring %s=%r: not one of %s; logging at %s",
            LOG_LEVEL_ENV,
            requested,
            ", ".join(LOG_LEVELS),
            chosen,
        )
