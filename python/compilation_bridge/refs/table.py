"""The ref table: live Python objects that callers hold by (session id, ref id), and the one interface
both tables implement (`local.LocalRefTable`: objects only in this worker; `shared.SharedRefTable`:
state in a store every worker of the application can read).

Semantics follow SnakeBridge's adapter: ids are uuid4 hex, TTL counts from the last access, the error
messages are the exact strings SnakeBridge's Elixir side pattern-matches.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

UNKNOWN_REF = "Unknown SnakeBridge reference: {}"


class RefStoreUnavailable(ConnectionError):
    """A ref that must come from the store cannot, or a change cannot be kept, while it is away."""


class RefStoreIntegrityError(ValueError):
    """A stored entry failed its checks (signature, version, size, format): refused, never decoded."""


Origin = tuple[str, str]  # (parent ref id, attribute): the object was read from another ref's object


class RefTable(Protocol):
    def put(self, session_id: str, obj: Any, origin: Origin | None = None) -> str:
        """A new ref to `obj` in the session (`origin`: it is that attribute of that ref's object)."""
        ...

    def get(self, session_id: str, ref_id: str) -> Any:
        """The ref's object; KeyError(UNKNOWN_REF) when there is none."""
        ...

    def sync(self, session_id: str, ref_ids: Iterable[str]) -> None:
        """Keep what a call may have changed in the refs it used."""
        ...

    def release(self, session_id: str, ref_id: str) -> bool: ...

    def release_session(self, session_id: str) -> int: ...

    def release_session_soon(self, session_id: str) -> int:
        """Release the session without waiting for any store (the control path: CleanupSession); the
        refs this worker holds go at once, the store's copies in the background."""
        ...

    def count(self, session_id: str | None = None) -> int: ...

    def session_count(self) -> int: ...

    def start(self) -> None:
        """Start background work (the store's flusher and maintenance)."""
        ...

    def close(self, timeout_s: float) -> None:
        """Write what waits for the store (within `timeout_s`, the rest to the journal) and close it."""
        ...
