"""Loggers of the config model; vLLM's `warning_once` / `info_once` without vLLM's logger.

vLLM remembers every (message, args) it has logged, forever. Here the args often hold caller data (an op
name from `custom_ops`, a field value), so the memory is a bounded LRU of fixed-size digests: a caller
who varies the args cannot grow it, and at worst makes a message repeat once it was forgotten.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict

logger = logging.getLogger("compilation_bridge.vllm_config")

MAX_REMEMBERED = 4096


class _Seen:
    """A bounded, thread-safe set of digests, least recently seen dropped first."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._keys: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, key: bytes) -> bool:
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return False
            self._keys[key] = None
            if len(self._keys) > self._limit:
                self._keys.popitem(last=False)
            return True

    def __len__(self) -> int:
        return len(self._keys)


_seen = _Seen(MAX_REMEMBERED)


def _digest(level: int, msg: str, args: tuple[object, ...]) -> bytes:
    try:
        text = repr((level, msg, args))
    except Exception:  # an argument whose repr fails (or is too deep) is remembered by its type
        text = repr((level, msg, [type(arg).__name__ for arg in args]))
    return hashlib.blake2b(text.encode("utf-8", "backslashreplace"), digest_size=16).digest()


def _log_once(level: int, msg: str, args: tuple[object, ...]) -> None:
    if _seen.first_time(_digest(level, msg, args)):
        logger.log(level, msg, *args)


def warning_once(msg: str, *args: object) -> None:
    _log_once(logging.WARNING, msg, args)


def info_once(msg: str, *args: object) -> None:
    _log_once(logging.INFO, msg, args)
