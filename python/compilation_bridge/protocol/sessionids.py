"""Session ids come from callers: bounded in length wherever they enter, and never echoed when too long.

A session id keys the ref table, the servicer's session bookkeeping and error contexts, so an unbounded
one would let a single call make the worker hold (and send back) megabytes per session. Snakepit's own
ids look like `session_<n>_<µs>` and SnakeBridge's like `auto_<0.123.0>_<n>`: far below the cap.
"""

from __future__ import annotations

MAX_SESSION_ID_BYTES = 256
# Any str of at most this many characters is within the cap (UTF-8 uses at most 4 bytes a character),
# so the common case never encodes the id just to measure it.
_ALWAYS_SHORT = MAX_SESSION_ID_BYTES // 4


def utf8_size(text: str) -> int:
    # surrogatepass: a lone surrogate (possible from JSON escapes) still has a size, and is refused later.
    return len(text.encode("utf-8", "surrogatepass"))


def is_too_long(session_id: str) -> bool:
    return len(session_id) > _ALWAYS_SHORT and utf8_size(session_id) > MAX_SESSION_ID_BYTES


def check_session_id(session_id: str, what: str = "session_id") -> str:
    """`session_id` itself when it is within the cap, else a ValueError naming `what` and the sizes (never
    the id). A plain ValueError: Elixir maps that type to `Snakepit.Error.ValueError`."""
    if is_too_long(session_id):
        raise ValueError(
            f"{what} too long: {utf8_size(session_id)} bytes (limit {MAX_SESSION_ID_BYTES} bytes)"
        )
    return session_id


def shown_session_id(session_id: str) -> str:
    """What an error context may carry: the id itself, or a size note instead of an over-long id."""
    if is_too_long(session_id):
        return f"<{utf8_size(session_id)}-byte session id over the {MAX_SESSION_ID_BYTES}-byte limit>"
    return session_id
