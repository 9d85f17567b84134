"""Loggers of the config model; vLLM's `warning_once` / `info_once` without vLLM's logger."""

from __future__ import annotations

import functools
import logging

logger = logging.getLogger("compilation_bridge.vllm_config")


@functools.cache
def _log_once(level: int, msg: str, args: tuple[object, ...]) -> None:
    logger.log(level, msg, *args)


def warning_once(msg: str, *args: object) -> None:
    _log_once(logging.WARNING, msg, args)


def info_once(msg: str, *args: object) -> None:
    _log_once(logging.INFO, msg, args)
