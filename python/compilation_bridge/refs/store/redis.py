"""The ref store for many hosts: one Redis (`COMPILATION_BRIDGE_REF_STORE=redis://user:pass@host:port/db`,
or `rediss://` for TLS).

Each application has its own key space (`<base><app>:`): a hash per ref (version, state, signature, size,
expiry), a sorted set per session ordering its refs by expiry (eviction), a hash of the application's
totals and one of its sessions' bytes. One sorted set shared by all applications orders every entry by
expiry, so any worker drops expired entries of any application (each entry's lease is its writer's).
Every operation that touches more than one key is one Lua script of ours, so quotas and counts stay exact
with any number of workers; the entries themselves are data and are never run.

Who may write to this Redis can delete refs, but not forge or move them: entries are signed
(`refs.signing`). Use an ACL user of its own and `rediss://` where the network is not trusted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from compilation_bridge.refs.limits import (
    ref_too_large,
    session_bytes_full,
    store_bytes_full,
    table_full,
    too_many_sessions,
)
from compilation_bridge.refs.store import Entry, Key, Quota, QuotaExceeded, StoreUnavailable

BASE = "compilation-bridge:refs:v2:"
CONNECT_TIMEOUT_S = 1.0  # an unreachable store must fail a call quickly, not after the caller's timeout
SOCKET_TIMEOUT_S = 2.0  # a hung store: each operation gives up after this (inside Snakepit's grace)
PRUNE_BATCH = 1000
T = TypeVar("T")

# Shared Lua. ARGV[1] is always the base, ARGV[2] the application; an entry is `<app>:r:<sm>:<ref>`,
# where sm (`<length>:<session>`) keeps any session id unambiguous.
_COMMON = """
local base, app = ARGV[1], ARGV[2]
local p = base .. app .. ':'
-- Drop one ref of application `of` (any application's: the prune drops what expired for all of them).
local function drop_of(of, sm, ref)
    local q = base .. of .. ':'
    local key = q .. 'r:' .. sm .. ':' .. ref
    local size = redis.call('HGET', key, 'z')
    if not size then return 0 end
    redis.call('DEL', key)
    local sess = q .. 's:' .. sm
    redis.call('ZREM', sess, ref)
    redis.call('ZREM', base .. 'x', of .. sm .. ':' .. ref)
    redis.call('HINCRBY', q .. 'n', 'refs', -1)
    redis.call('HINCRBY', q .. 'n', 'bytes', -tonumber(size))
    redis.call('HINCRBY', q .. 'b', sm, -tonumber(size))
    if redis.call('ZCARD', sess) == 0 then
        redis.call('HINCRBY', q .. 'n', 'sessions', -1)
        redis.call('HDEL', q .. 'b', sm)
    end
    return 1
end
local function drop(sm, ref) return drop_of(app, sm, ref) end
local function place(sm, ref, expires)
    redis.call('ZADD', p .. 's:' .. sm, expires, ref)
    redis.call('ZADD', base .. 'x', expires, app .. sm .. ':' .. ref)
end
local function bytes_check(sm, growth, max_sb, max_tb)
    local sbytes = tonumber(redis.call('HGET', p .. 'b', sm) or '0')
    local tbytes = tonumber(redis.call('HGET', p .. 'n', 'bytes') or '0')
    if max_sb > 0 and sbytes + growth > max_sb then return {'sbytes', sbytes, growth} end
    if max_tb > 0 and tbytes + growth > max_tb then return {'tbytes', tbytes, growth} end
    return nil
end
"""

# ARGV: base, app, sm, ref, version, state, mac, expires, max_per, max_total, max_sessions, max_sb, max_tb
_CREATE = (
    _COMMON
    + """
local sm, ref, expires = ARGV[3], ARGV[4], ARGV[8]
local max_per, max_total, max_sessions = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local size = string.len(ARGV[6])
local sess = p .. 's:' .. sm
local held = redis.call('ZCARD', sess)
local refs = tonumber(redis.call('HGET', p .. 'n', 'refs') or '0')
local sessions = tonumber(redis.call('HGET', p .. 'n', 'sessions') or '0')
if max_total > 0 and refs >= max_total then return {'full', refs} end
if held == 0 and max_sessions > 0 and sessions >= max_sessions then return {'sessions', sessions} end
local refused = bytes_check(sm, size, tonumber(ARGV[12]), tonumber(ARGV[13]))
if refused then return refused end
if held == 0 then redis.call('HINCRBY', p .. 'n', 'sessions', 1) end
local key = p .. 'r:' .. sm .. ':' .. ref
redis.call('HSET', key, 'v', ARGV[5], 's', ARGV[6], 'm', ARGV[7], 'z', size, 'e', expires)
place(sm, ref, expires)
redis.call('HINCRBY', p .. 'n', 'refs', 1)
redis.call('HINCRBY', p .. 'n', 'bytes', size)
redis.call('HINCRBY', p .. 'b', sm, size)
local evicted = {'ok'}
if max_per > 0 and held + 1 > max_per then
    for _, old in ipairs(redis.call('ZRANGE', sess, 0, held - max_per + 1)) do
        if old ~= ref and #evicted <= held + 1 - max_per then
            drop(sm, old)
            table.insert(evicted, old)
        end
    end
end
return evicted
"""
)

# ARGV: base, app, sm, ref, max_bytes
_LOAD = """
local key = ARGV[1] .. ARGV[2] .. ':r:' .. ARGV[3] .. ':' .. ARGV[4]
local head = redis.call('HMGET', key, 'v', 'e', 'z')
if not head[1] then return false end
local max = tonumber(ARGV[5])
if max > 0 and tonumber(head[3]) > max then return {head[1], head[2], head[3]} end
local body = redis.call('HMGET', key, 's', 'm')
return {head[1], head[2], head[3], body[1], body[2]}
"""

# ARGV: base, app, sm, ref, version, state, mac, expected, expires, max_sb, max_tb
_UPDATE = (
    _COMMON
    + """
local sm, ref = ARGV[3], ARGV[4]
local key = p .. 'r:' .. sm .. ':' .. ref
if redis.call('HGET', key, 'v') ~= ARGV[8] then return false end
local size = string.len(ARGV[6])
local growth = size - tonumber(redis.call('HGET', key, 'z'))
local refused = bytes_check(sm, growth, tonumber(ARGV[10]), tonumber(ARGV[11]))
if refused then return refused end
redis.call('HSET', key, 'v', ARGV[5], 's', ARGV[6], 'm', ARGV[7], 'z', size, 'e', ARGV[9])
redis.call('HINCRBY', p .. 'n', 'bytes', growth)
redis.call('HINCRBY', p .. 'b', sm, growth)
place(sm, ref, ARGV[9])
return {'ok', ARGV[5]}
"""
)

# ARGV: base, app, sm, ref, expires
_TOUCH = (
    _COMMON
    + """
local key = p .. 'r:' .. ARGV[3] .. ':' .. ARGV[4]
local e = redis.call('HGET', key, 'e')
if e and tonumber(e) < tonumber(ARGV[5]) then
    redis.call('HSET', key, 'e', ARGV[5])
    place(ARGV[3], ARGV[4], ARGV[5])
end
return 0
"""
)

_RELEASE = _COMMON + "return drop(ARGV[3], ARGV[4])"

# ARGV: base, app, sm, '', before (0: every ref)
_RELEASE_SESSION = (
    _COMMON
    + """
local n = 0
local before = tonumber(ARGV[5])
for _, ref in ipairs(redis.call('ZRANGE', p .. 's:' .. ARGV[3], 0, -1)) do
    local v = tonumber(redis.call('HGET', p .. 'r:' .. ARGV[3] .. ':' .. ref, 'v') or '0')
    if before == 0 or v < before then n = n + drop(ARGV[3], ref) end
end
return n
"""
)

# ARGV: base, '' (any application), now, batch. Members are '<app><length>:<session>:<ref>'.
_PRUNE = (
    _COMMON
    + """
local n = 0
local old = redis.call('ZRANGEBYSCORE', base .. 'x', '-inf', '(' .. ARGV[3], 'LIMIT', 0, ARGV[4])
for _, member in ipairs(old) do
    local rest = string.sub(member, 33)
    local colon = string.find(rest, ':', 1, true)
    local length = tonumber(string.sub(rest, 1, colon - 1))
    redis.call('ZREM', base .. 'x', member)  -- also a member whose entry is already gone
    n = n + drop_of(string.sub(member, 1, 32), string.sub(rest, 1, colon + length),
                    string.sub(rest, colon + length + 2))
end
return n
"""
)


def session_member(session: str) -> str:
    return f"{len(session.encode())}:{session}"


def redacted(url: str) -> str:
    """Where the store is, for messages and logs: scheme, host, port and db, never a user or secret."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    if parts.scheme == "unix":
        db = query.get("db", ["0"])[0]
        return f"unix://{parts.path}?db={db}"
    db = (parts.path or "/").strip("/") or query.get("db", ["0"])[0]
    return f"{parts.scheme}://{parts.hostname or 'localhost'}:{parts.port or 6379}/{db}"


def _secrets(url: str) -> list[str]:
    parts = urlsplit(url)
    found = [parts.password or "", *parse_qs(parts.query).get("password", [])]
    return [s for value in found if value for s in {value, unquote(value)}]


class RedisStore:
    def __init__(self, url: str, base: str = BASE) -> None:
        self.location = redacted(url)
        self.base = base
        self._secrets = _secrets(url)
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
                ("load", _LOAD),
                ("update", _UPDATE),
                ("touch", _TOUCH),
                ("release", _RELEASE),
                ("release_session", _RELEASE_SESSION),
                ("prune", _PRUNE),
            )
        }

    def ping(self) -> None:
        """One round trip; raises StoreUnavailable, naming the store, when it does not answer."""
        self._guard(self._redis.ping)

    def _guard(self, operation: Callable[[], T]) -> T:
        try:
            return operation()
        except (redis.ConnectionError, redis.TimeoutError, redis.AuthenticationError) as exc:
            raise StoreUnavailable(f"ref store {self.location} is unreachable: {self._scrub(exc)}") from None
        except redis.ResponseError as exc:  # NOAUTH, NOPERM, OOM: the store refuses us
            raise StoreUnavailable(f"ref store {self.location} refused: {self._scrub(exc)}") from None

    def _scrub(self, exc: Exception) -> str:
        text = str(exc)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _run(self, name: str, key: Key, *args: Any) -> Any:
        argv = [self.base, key.app, session_member(key.session), key.ref, *args]
        return self._guard(lambda: self._scripts[name](keys=[], args=argv))

    def _prefix(self, app: str) -> str:
        return f"{self.base}{app}:"

    def _entry_key(self, key: Key) -> str:
        return f"{self.base}{key.app}:r:{session_member(key.session)}:{key.ref}"

    # ------------------------------------------------------------------------------ Store
    def create(self, key: Key, entry: Entry, expires: float, quota: Quota) -> list[str]:
        limits = (quota.max_per_session, quota.max_total, quota.max_sessions)
        bytes_limits = (quota.max_session_bytes, quota.max_total_bytes)
        reply = self._run(
            "create", key, entry.version, entry.state, entry.mac, expires, *limits, *bytes_limits
        )
        _raise_refusal(reply, quota)
        return [old.decode() for old in reply[1:]]

    def version(self, key: Key, now: float) -> int | None:
        version, expires = self._guard(lambda: self._redis.hmget(self._entry_key(key), "v", "e"))
        if version is None or expires is None or float(expires) < now:
            return None
        return int(version)

    def versions(self, keys: Sequence[Key], now: float) -> list[int | None]:
        def fetch() -> list[Any]:
            pipe = self._redis.pipeline(transaction=False)
            for key in keys:
                pipe.hmget(self._entry_key(key), "v", "e")
            return pipe.execute()

        replies = self._guard(fetch) if keys else []
        return [
            None if version is None or expires is None or float(expires) < now else int(version)
            for version, expires in replies
        ]

    def load(self, key: Key, now: float, max_bytes: int) -> Entry | None:
        reply = self._run("load", key, max_bytes)
        if not reply or float(reply[1]) < now:
            return None
        if len(reply) == 3:
            raise ref_too_large(int(reply[2]), max_bytes)
        return Entry(int(reply[0]), bytes(reply[3] or b""), bytes(reply[4] or b""))

    def update(self, key: Key, entry: Entry, expected: int, expires: float, quota: Quota) -> int | None:
        bytes_limits = (quota.max_session_bytes, quota.max_total_bytes)
        reply = self._run(
            "update", key, entry.version, entry.state, entry.mac, expected, expires, *bytes_limits
        )
        if not reply:
            return None
        _raise_refusal(reply, quota)
        return int(reply[1])

    def touch(self, key: Key, expires: float) -> None:
        self._run("touch", key, expires)

    def release(self, key: Key) -> bool:
        return bool(self._run("release", key))

    def release_session(self, app: str, session: str, before: int = 0) -> int:
        return int(self._run("release_session", Key(app, session, ""), before))

    def count(self, app: str, session: str | None = None) -> int:
        prefix = self._prefix(app)
        if session is None:
            return int(self._guard(lambda: self._redis.hget(f"{prefix}n", "refs")) or 0)
        return int(self._guard(lambda: self._redis.zcard(f"{prefix}s:{session_member(session)}")))

    def session_count(self, app: str) -> int:
        return int(self._guard(lambda: self._redis.hget(f"{self._prefix(app)}n", "sessions")) or 0)

    def stored_bytes(self, app: str, session: str | None = None) -> int:
        prefix = self._prefix(app)
        if session is None:
            return int(self._guard(lambda: self._redis.hget(f"{prefix}n", "bytes")) or 0)
        return int(self._guard(lambda: self._redis.hget(f"{prefix}b", session_member(session))) or 0)

    def prune(self, now: float) -> int:
        dropped = 0
        while True:
            n = int(
                self._guard(lambda: self._scripts["prune"](keys=[], args=[self.base, "", now, PRUNE_BATCH]))
            )
            dropped += n
            if n < PRUNE_BATCH:
                return dropped

    def release_other_runs(self, app: str) -> int:
        """Nothing: other hosts' runs of the application may be alive; their refs go with their lease."""
        return 0

    def tidy(self) -> None:
        """Nothing to give back: Redis frees what a deletion frees."""

    def close(self) -> None:
        self._redis.close()


def _raise_refusal(reply: list[Any], quota: Quota) -> None:
    status = reply[0]
    if status == b"ok":
        return
    if status == b"full":
        raise table_full(int(reply[1]), quota.max_total)
    if status == b"sessions":
        raise too_many_sessions(int(reply[1]), quota.max_sessions)
    if status == b"sbytes":
        raise session_bytes_full(int(reply[1]), int(reply[2]), quota.max_session_bytes)
    if status == b"tbytes":
        raise store_bytes_full(int(reply[1]), int(reply[2]), quota.max_total_bytes)
    raise QuotaExceeded(f"unexpected answer from the ref store: {status!r}")
