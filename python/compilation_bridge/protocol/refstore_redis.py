"""The ref store for many hosts: one Redis (`COMPILATION_BRIDGE_REF_STORE=redis://user:pass@host:port/db`).

Each ref is a hash (version, state, signature); a sorted set per session orders its refs by last use
(eviction), one global sorted set orders all refs (TTL), and a hash keeps the totals. Every operation that
touches more than one key is one Lua script of ours, so quotas and counts stay exact with any number of
workers; the entries themselves are data and are never run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from compilation_bridge.protocol.refstore import (
    Entry,
    Quota,
    StoreUnavailable,
    table_full,
    too_many_sessions,
)

PREFIX = "compilation-bridge:refs:v1:"
CONNECT_TIMEOUT_S = 1.0  # an unreachable store must fail a call quickly, not after the caller's timeout
SOCKET_TIMEOUT_S = 5.0
PRUNE_BATCH = 1000
T = TypeVar("T")

# Shared Lua: drop one ref (entry, its place in both sorted sets, the counts).
_DROP = """
local function drop(prefix, sess_member, ref)
    local member = sess_member .. ':' .. ref
    if redis.call('DEL', prefix .. 'r:' .. member) == 0 then return 0 end
    local sess_key = prefix .. 's:' .. sess_member
    redis.call('ZREM', sess_key, ref)
    redis.call('ZREM', prefix .. 'a', member)
    redis.call('HINCRBY', prefix .. 'n', 'refs', -1)
    if redis.call('ZCARD', sess_key) == 0 then redis.call('HINCRBY', prefix .. 'n', 'sessions', -1) end
    return 1
end
local function add(prefix, sess_member, ref, version, state, mac, now)
    local sess_key = prefix .. 's:' .. sess_member
    if redis.call('ZCARD', sess_key) == 0 then redis.call('HINCRBY', prefix .. 'n', 'sessions', 1) end
    redis.call('HSET', prefix .. 'r:' .. sess_member .. ':' .. ref, 'v', version, 's', state, 'm', mac)
    redis.call('ZADD', sess_key, now, ref)
    redis.call('ZADD', prefix .. 'a', now, sess_member .. ':' .. ref)
    redis.call('HINCRBY', prefix .. 'n', 'refs', 1)
end
"""

# ARGV: prefix, session member, ref, version, state, mac, now, max_per_session, max_total, max_sessions
_CREATE = (
    _DROP
    + """
local prefix, sm, ref = ARGV[1], ARGV[2], ARGV[3]
local max_per, max_total, max_sessions = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local held = redis.call('ZCARD', prefix .. 's:' .. sm)
local refs = tonumber(redis.call('HGET', prefix .. 'n', 'refs') or '0')
local sessions = tonumber(redis.call('HGET', prefix .. 'n', 'sessions') or '0')
if max_total > 0 and refs >= max_total then return {'full', refs} end
if held == 0 and max_sessions > 0 and sessions >= max_sessions then return {'sessions', sessions} end
add(prefix, sm, ref, ARGV[4], ARGV[5], ARGV[6], ARGV[7])
local evicted = {'ok'}
if max_per > 0 and held + 1 > max_per then
    for _, old in ipairs(redis.call('ZRANGE', prefix .. 's:' .. sm, 0, held - max_per)) do
        drop(prefix, sm, old)
        table.insert(evicted, old)
    end
end
return evicted
"""
)

# ARGV: prefix, session member, ref, version, state, mac, now
_UPSERT = (
    _DROP
    + """
local prefix, sm, ref = ARGV[1], ARGV[2], ARGV[3]
local key = prefix .. 'r:' .. sm .. ':' .. ref
if redis.call('EXISTS', key) == 1 then
    redis.call('HSET', key, 's', ARGV[5], 'm', ARGV[6])
    return redis.call('HINCRBY', key, 'v', 1)
end
add(prefix, sm, ref, ARGV[4], ARGV[5], ARGV[6], ARGV[7])
return tonumber(ARGV[4])
"""
)

# KEYS: entry; ARGV: state, mac, expected version
_UPDATE = """
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[3] then return false end
redis.call('HSET', KEYS[1], 's', ARGV[1], 'm', ARGV[2])
return redis.call('HINCRBY', KEYS[1], 'v', 1)
"""

_RELEASE = _DROP + "return drop(ARGV[1], ARGV[2], ARGV[3])"

_RELEASE_SESSION = (
    _DROP
    + """
local n = 0
for _, ref in ipairs(redis.call('ZRANGE', ARGV[1] .. 's:' .. ARGV[2], 0, -1)) do
    n = n + drop(ARGV[1], ARGV[2], ref)
end
return n
"""
)

# ARGV: prefix, before, batch. Members are '<len>:<session>:<ref>': the length makes them unambiguous.
_PRUNE = (
    _DROP
    + """
local n = 0
local old = redis.call('ZRANGEBYSCORE', ARGV[1] .. 'a', '-inf', '(' .. ARGV[2], 'LIMIT', 0, ARGV[3])
for _, member in ipairs(old) do
    local colon = string.find(member, ':', 1, true)
    local size = tonumber(string.sub(member, 1, colon - 1))
    local sm = string.sub(member, 1, colon + size)
    n = n + drop(ARGV[1], sm, string.sub(member, colon + size + 2))
end
return n
"""
)


def session_member(session: str) -> str:
    return f"{len(session.encode())}:{session}"


def _fields(entry: Entry) -> list[Any]:
    return [entry.version, entry.state, entry.mac]


def redacted(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class RedisStore:
    def __init__(self, url: str, prefix: str = PREFIX) -> None:
        self.location = redacted(url)
        self.prefix = prefix
        self._redis = redis.Redis.from_url(
            url,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            socket_timeout=SOCKET_TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),  # fail fast: the shared table reports and retries later itself
        )
        self._scripts = {
            name: self._redis.register_script(source)
            for name, source in (
                ("create", _CREATE),
                ("upsert", _UPSERT),
                ("update", _UPDATE),
                ("release", _RELEASE),
                ("release_session", _RELEASE_SESSION),
                ("prune", _PRUNE),
            )
        }

    def _guard(self, operation: Callable[[], T]) -> T:
        try:
            return operation()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StoreUnavailable(f"ref store {self.location} is unreachable: {exc}") from exc

    def _run(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return self._guard(lambda: self._scripts[name](keys=keys, args=args))

    def _entry_key(self, session: str, ref_id: str) -> str:
        return f"{self.prefix}r:{session_member(session)}:{ref_id}"

    # ------------------------------------------------------------------------------ Store
    def create(self, session: str, ref_id: str, entry: Entry, now: float, quota: Quota) -> list[str]:
        limits = [quota.max_per_session, quota.max_total, quota.max_sessions]
        args = [self.prefix, session_member(session), ref_id, *_fields(entry), now, *limits]
        status, *rest = self._run("create", [], args)
        if status == b"full":
            raise table_full(int(rest[0]))
        if status == b"sessions":
            raise too_many_sessions(int(rest[0]), quota.max_sessions)
        return [old.decode() for old in rest]

    def upsert(self, session: str, ref_id: str, entry: Entry, now: float) -> int:
        args = [self.prefix, session_member(session), ref_id, *_fields(entry), now]
        return int(self._run("upsert", [], args))

    def version(self, session: str, ref_id: str) -> int | None:
        value = self._guard(lambda: self._redis.hget(self._entry_key(session, ref_id), "v"))
        return None if value is None else int(value)

    def load(self, session: str, ref_id: str) -> Entry | None:
        key = self._entry_key(session, ref_id)
        version, state, mac = self._guard(lambda: self._redis.hmget(key, "v", "s", "m"))
        if version is None:
            return None
        assert isinstance(state, bytes) and isinstance(mac, bytes)  # the client decodes nothing
        return Entry(int(version), state, mac)

    def update(self, session: str, ref_id: str, state: bytes, mac: bytes, expected: int) -> int | None:
        version = self._run("update", [self._entry_key(session, ref_id)], [state, mac, expected])
        return None if version is None else int(version)

    def touch(self, session: str, ref_id: str, now: float) -> None:
        member = session_member(session)
        pipe = self._redis.pipeline(transaction=False)
        pipe.zadd(f"{self.prefix}s:{member}", {ref_id: now}, xx=True)
        pipe.zadd(f"{self.prefix}a", {f"{member}:{ref_id}": now}, xx=True)
        self._guard(pipe.execute)

    def release(self, session: str, ref_id: str) -> bool:
        return bool(self._run("release", [], [self.prefix, session_member(session), ref_id]))

    def release_session(self, session: str) -> int:
        return int(self._run("release_session", [], [self.prefix, session_member(session)]))

    def count(self, session: str | None = None) -> int:
        if session is None:
            value = self._guard(lambda: self._redis.hget(f"{self.prefix}n", "refs"))
            return int(value or 0)
        return int(self._guard(lambda: self._redis.zcard(f"{self.prefix}s:{session_member(session)}")))

    def session_count(self) -> int:
        return int(self._guard(lambda: self._redis.hget(f"{self.prefix}n", "sessions")) or 0)

    def prune(self, before: float) -> int:
        return int(self._run("prune", [], [self.prefix, before, PRUNE_BATCH]))

    def close(self) -> None:
        self._redis.close()
