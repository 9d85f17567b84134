"""Back-pressure: a call refused at once, instead of queued, because a limit is full."""

from __future__ import annotations


class BusyError(RuntimeError):
    """A limit is full. `limit`, `current` and `maximum` travel in the error's context
    (`context_fields`), so that a caller can tell which limit it met and back off."""

    def __init__(self, message: str, *, limit: str, current: int, maximum: int) -> None:
        super().__init__(message)
        self.context_fields = {"limit": limit, "current": str(current), "max": str(maximum)}
