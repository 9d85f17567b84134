"""Every limit on refs, and the one wording of each refusal: both ref tables and both stores use these.

Counts follow SnakeBridge (`SNAKEBRIDGE_REF_MAX` refs per session, least recently used evicted first)
plus this worker's own bounds: refs and sessions per application, bytes of encoded state per ref, per
session and per application, a lease on every stored entry, and the worker's resident memory. A refusal
says which limit, its current value and its maximum, and the worker keeps serving everyone else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from compilation_bridge.refs.store import Quota, QuotaExceeded
from compilation_bridge.settings import (
    MAX_REF_BYTES_ENV,
    MAX_RSS_MB_ENV,
    MAX_SESSION_BYTES_ENV,
    MAX_SESSIONS_ENV,
    MAX_STORE_BYTES_ENV,
    MAX_TOTAL_REFS_ENV,
    REF_LEASE_ENV,
    REF_MAX_ENV,
    REF_TTL_ENV,
    env_float,
    env_int,
)

DEFAULT_REF_MAX = 10_000
DEFAULT_MAX_TOTAL_REFS = 50_000  # a config object is a few KiB: bounds the table to a few hundred MiB
DEFAULT_MAX_SESSIONS = 10_000  # as many as Snakepit's own SessionStore holds
DEFAULT_MAX_REF_BYTES = 16 << 20
DEFAULT_MAX_SESSION_BYTES = 256 << 20
DEFAULT_MAX_STORE_BYTES = 1 << 30
# Snakepit's own session TTL: a stored ref unused this long is gone, so the refs of an application that
# stopped or crashed (SnakeBridge releases nothing on Application.stop) never pile up across restarts.
DEFAULT_LEASE_S = 3600.0
# Decoding a state builds Python objects several times its size in bytes (measured: about 6x for a
# config with big lists); a restore is refused up front when that would pass the memory limit.
DECODE_GROWTH = 8


@dataclass(frozen=True)
class RefLimits:
    ttl_seconds: float = 0.0  # SnakeBridge's TTL since last use; 0: none
    lease_seconds: float = DEFAULT_LEASE_S  # a stored entry's life since last use when there is no TTL
    max_per_session: int = DEFAULT_REF_MAX
    max_total: int = DEFAULT_MAX_TOTAL_REFS
    # Sessions holding refs (a session without refs costs nothing: it is never kept). 0: no limit.
    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_ref_bytes: int = DEFAULT_MAX_REF_BYTES
    max_session_bytes: int = DEFAULT_MAX_SESSION_BYTES
    max_total_bytes: int = DEFAULT_MAX_STORE_BYTES
    # Refs can hold big objects (a list field of a million ints): above this resident size new refs,
    # changes and restores are refused with MemoryError. 0 disables the check.
    max_rss_bytes: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RefLimits:
        """The operator's limits (`compilation_bridge.settings` documents them), from `env` or the
        environment. The least value is 0, which means "no limit" (the checks all test `> 0`)."""
        return cls(
            ttl_seconds=env_float(REF_TTL_ENV, 0.0, least=0.0, env=env),
            lease_seconds=env_float(REF_LEASE_ENV, DEFAULT_LEASE_S, least=0.0, env=env),
            max_per_session=env_int(REF_MAX_ENV, DEFAULT_REF_MAX, least=0, env=env),
            max_total=env_int(MAX_TOTAL_REFS_ENV, DEFAULT_MAX_TOTAL_REFS, least=0, env=env),
            max_sessions=env_int(MAX_SESSIONS_ENV, DEFAULT_MAX_SESSIONS, least=0, env=env),
            max_ref_bytes=env_int(MAX_REF_BYTES_ENV, DEFAULT_MAX_REF_BYTES, least=0, env=env),
            max_session_bytes=env_int(MAX_SESSION_BYTES_ENV, DEFAULT_MAX_SESSION_BYTES, least=0, env=env),
            max_total_bytes=env_int(MAX_STORE_BYTES_ENV, DEFAULT_MAX_STORE_BYTES, least=0, env=env),
            max_rss_bytes=env_int(MAX_RSS_MB_ENV, default_max_rss_mb(), least=0, env=env) << 20,
        )

    @property
    def lease(self) -> float:
        """How long a stored entry lives unused: the TTL when there is one, else the lease (0: forever)."""
        return self.ttl_seconds if self.ttl_seconds > 0 else self.lease_seconds

    def quota(self) -> Quota:
        return Quota(
            self.max_per_session,
            self.max_total,
            self.max_sessions,
            self.max_session_bytes,
            self.max_total_bytes,
        )

    def check_ref_size(self, size: int) -> None:
        if 0 < self.max_ref_bytes < size:
            raise ref_too_large(size, self.max_ref_bytes)

    def check_memory(self, extra_bytes: int = 0) -> None:
        """Refuse new work when the worker's resident size (plus what it is about to build) passes the
        limit. Reading /proc/self/statm costs microseconds: it is done on every put, change and restore."""
        if self.max_rss_bytes <= 0:
            return
        resident = resident_bytes()
        if resident + extra_bytes > self.max_rss_bytes:
            needed = f" + {extra_bytes >> 20} MiB to restore a ref" if extra_bytes else ""
            raise MemoryError(
                f"worker memory {resident >> 20} MiB{needed} is above {MAX_RSS_MB_ENV} "
                f"({self.max_rss_bytes >> 20} MiB); release refs or sessions before creating more"
            )


def default_max_rss_mb() -> int:
    """8 GiB, or three quarters of the machine's memory if that is less."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 8192
    return min(8192, physical * 3 // 4 >> 20)


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_statm: list[int] = []  # the process's /proc/self/statm, opened once (a read is then a microsecond)


def resident_bytes() -> int:
    """Current resident set size (Linux /proc; 0 where unavailable, which disables the check)."""
    try:
        if not _statm:
            _statm.append(os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC))
        return int(os.pread(_statm[0], 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


# ------------------------------------------------------------------------------ the refusals, worded once
def table_full(count: int, limit: int) -> QuotaExceeded:
    return QuotaExceeded(
        f"SnakeBridge reference table is full ({count} refs, limit {limit}); "
        "release refs or sessions before creating more"
    )


def too_many_sessions(count: int, limit: int) -> QuotaExceeded:
    return QuotaExceeded(
        f"too many sessions hold SnakeBridge references ({count}, limit {limit}); "
        "release sessions before creating refs in a new one"
    )


def ref_too_large(size: int, limit: int) -> QuotaExceeded:
    return QuotaExceeded(
        f"SnakeBridge reference state too large: {size} bytes (limit {limit}, {MAX_REF_BYTES_ENV})"
    )


def session_bytes_full(held: int, size: int, limit: int) -> QuotaExceeded:
    return QuotaExceeded(
        f"session holds {held} bytes of SnakeBridge references; {size} more would pass its limit "
        f"({limit}, {MAX_SESSION_BYTES_ENV}); release refs before creating more"
    )


def store_bytes_full(held: int, size: int, limit: int) -> QuotaExceeded:
    return QuotaExceeded(
        f"ref store holds {held} bytes for this application; {size} more would pass its limit "
        f"({limit}, {MAX_STORE_BYTES_ENV}); release refs or sessions before creating more"
    )
