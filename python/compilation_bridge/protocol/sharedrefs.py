"""The shared ref table: the ref table's interface, with every ref's state in a `Store` any worker can read.

Each worker keeps the objects it has used in a local cache, tagged with the store's version of each. A use
checks that version first (one indexed read): equal, the local object is served; different or absent
locally, the state is loaded, its signature checked and the object rebuilt, so a worker serves a ref
another worker created or changed exactly as that worker would. After a call that may have changed its
refs (`sync`), their state is encoded again and written only if it changed, as a new version, and only if
nobody wrote a newer one meanwhile.

When the store cannot be reached, refs this worker holds keep working, new refs and changes are kept and
written once it is back, and a ref it would have to load fails with `RefStoreUnavailable`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from compilation_bridge.protocol import refstate
from compilation_bridge.protocol.refs import MEMORY_CHECK_EVERY, UNKNOWN_REF, RefLimits, resident_bytes
from compilation_bridge.protocol.refsign import Signer
from compilation_bridge.protocol.refstore import (
    Entry,
    Quota,
    QuotaExceeded,
    Store,
    StoreUnavailable,
    first_version,
)

log = logging.getLogger("compilation_bridge.refs")

RETRY_EVERY_S = 1.0  # while the store is unreachable, how often pending writes are tried again
TOUCH_EVERY_S = 1.0  # last-use times in the store are this coarse: a write per ref per second at most
# Copies of refs released or changed elsewhere would stay in memory until used again: every SWEEP_EVERY_S
# the SWEEP_BATCH least recently used copies are checked against the store, and stale ones dropped.
SWEEP_EVERY_S = 10.0
SWEEP_BATCH = 256
Key = tuple[str, str]


class RefStoreUnavailable(ConnectionError):
    pass


class RefStoreIntegrityError(ValueError):
    pass


@dataclass
class _Local:
    obj: Any
    version: int  # the store's version this object matches; 0 while its creation waits for the store
    state: bytes  # its encoded state (or the marker of an object that cannot be stored)
    storable: bool
    touched: float
    # (parent ref id, attribute) when the object was read from another ref's object (a get_attr): it is
    # then served as that attribute of the parent's current copy, so both refs keep sharing one object
    # on every worker, as they do in the worker that made them.
    alias: tuple[str, str] | None = None


class SharedRefTable:
    def __init__(
        self,
        store: Store,
        signer: Signer,
        limits: RefLimits | None = None,
        clock: Callable[[], float] = time.time,  # wall time: last-use times are compared across hosts
    ) -> None:
        self.store = store
        self.signer = signer
        self.limits = limits or RefLimits.from_env()
        self.worker = f"{socket.gethostname()} pid {os.getpid()}"
        self._clock = clock
        self._lock = threading.Lock()
        self._local: OrderedDict[Key, _Local] = OrderedDict()
        self._pending: dict[Key, str] = {}  # "write" | "release", kept while the store is unreachable
        self._pending_sessions: set[str] = set()
        self._flushing = threading.Lock()
        self._retry_at = 0.0
        self._prune_at = 0.0
        self._sweep_at = 0.0
        self._puts = 0
        ttl = self.limits.ttl_seconds
        self._touch_every = min(TOUCH_EVERY_S, ttl / 4) if ttl > 0 else TOUCH_EVERY_S

    # ------------------------------------------------------------------------------ the table's API
    def put(self, session_id: str, obj: Any, origin: tuple[str, str] | None = None) -> str:
        ref_id = uuid.uuid4().hex
        self._check_memory()
        now = self._clock()
        self._maintain(now)
        alias = origin if _is_config_object(obj) else None  # other values cannot be changed in place
        state, storable = self._encode(obj, alias)
        version, evicted = self._create(session_id, ref_id, state)
        with self._lock:
            for old in evicted:
                self._local.pop((session_id, old), None)
            self._remember((session_id, ref_id), _Local(obj, version, state, storable, now, alias))
        return ref_id

    def get(self, session_id: str, ref_id: str) -> Any:
        key = (session_id, ref_id)
        now = self._clock()
        self._maintain(now)
        local = self._local.get(key)
        if local is not None and local.version == 0:
            return local.obj  # created while the store was unreachable: only here until it is back
        if local is not None:
            try:
                version = self.store.version(session_id, ref_id)
            except StoreUnavailable:
                return local.obj  # held here: keeps working while the store is away
            if version == local.version:
                self._touch(key, local, now)
                return self._current(session_id, local)
            if version is None:
                self._forget(key)
                raise KeyError(UNKNOWN_REF.format(ref_id))
        return self._restore(key, now)

    def sync(self, session_id: str, ref_ids: Iterable[str]) -> None:
        """Store the new state of refs a call may have changed (no write when nothing changed)."""
        for ref_id in dict.fromkeys(ref_ids):
            self._sync((session_id, ref_id))

    def release(self, session_id: str, ref_id: str) -> bool:
        key = (session_id, ref_id)
        local = self._forget(key)
        if local is not None and local.version == 0 and self._pending.pop(key, None) == "write":
            return True  # never reached the store
        try:
            return self.store.release(session_id, ref_id)
        except StoreUnavailable as exc:
            if local is None:
                raise RefStoreUnavailable(f"cannot release SnakeBridge reference {ref_id}: {exc}") from exc
            self._pending[key] = "release"
            return True

    def release_session(self, session_id: str) -> int:
        dropped = self._forget_session(session_id)
        unstored = sum(1 for key in dropped if self._pending.pop(key, None) == "write")
        try:
            return self.store.release_session(session_id) + unstored
        except StoreUnavailable:
            self._pending_sessions.add(session_id)
            return len(dropped)

    def count(self, session_id: str | None = None) -> int:
        return self._ask(lambda: self.store.count(session_id))

    def session_count(self) -> int:
        return self._ask(self.store.session_count)

    # ------------------------------------------------------------------------------ store traffic
    def _create(self, session: str, ref_id: str, state: bytes) -> tuple[int, list[str]]:
        quota = Quota(self.limits.max_per_session, self.limits.max_total, self.limits.max_sessions)
        entry = Entry(first_version(), state, self.signer.sign(session, ref_id, state))
        try:
            return entry.version, self.store.create(session, ref_id, entry, self._clock(), quota)
        except QuotaExceeded as exc:
            raise RuntimeError(str(exc)) from None
        except StoreUnavailable as exc:
            self._keep_pending((session, ref_id), exc)
            return 0, []

    def _restore(self, key: Key, now: float) -> Any:
        session, ref_id = key
        try:
            entry = self.store.load(session, ref_id)
        except StoreUnavailable as exc:
            raise RefStoreUnavailable(f"cannot restore SnakeBridge reference {ref_id}: {exc}") from exc
        if entry is None:
            self._forget(key)
            raise KeyError(UNKNOWN_REF.format(ref_id))
        if not self.signer.verify(session, ref_id, entry.state, entry.mac):
            raise RefStoreIntegrityError(
                f"ref store entry for SnakeBridge reference {ref_id} failed authentication: it is corrupt "
                f"or was written with another key (every worker sharing {self.store.location} needs the "
                f"same key file, {self.signer.key_path})"
            )
        obj, alias = self._decode(ref_id, entry.state)
        # A restore is a use; with a TTL it must count at once. Without one, last-use times only order
        # evictions, and a pool that routes calls at random restores often: that write waits its turn.
        touched = now - self._touch_every if self.limits.ttl_seconds > 0 else now
        with self._lock:
            self._remember(key, local := _Local(obj, entry.version, entry.state, True, touched, alias))
        self._touch(key, local, now)
        return self._current(session, local)

    def _current(self, session: str, local: _Local) -> Any:
        """The object to serve: an alias is its parent's attribute, as long as that is one like it."""
        if local.alias is None:
            return local.obj
        parent_id, attr = local.alias
        try:
            parent = self.get(session, parent_id)
        except (KeyError, ConnectionError, ValueError, RuntimeError):
            return local.obj  # the parent is gone or out of reach: the ref's own last state stands
        current = getattr(parent, attr, None)
        if type(current) is type(local.obj):
            local.obj = current
        return local.obj

    def _decode(self, ref_id: str, state: bytes) -> tuple[Any, tuple[str, str] | None]:
        try:
            return refstate.decode(state), refstate.alias_of(state)
        except refstate.HeldElsewhere as exc:
            raise RuntimeError(f"SnakeBridge reference {ref_id} cannot be used here: {exc}") from None
        except refstate.CorruptState as exc:
            raise RefStoreIntegrityError(f"ref store entry for {ref_id} is refused: {exc}") from None

    def _sync(self, key: Key) -> None:
        local = self._local.get(key)
        if local is None or not local.storable:
            return
        state, local.storable = self._encode(local.obj, local.alias)
        if state == local.state:
            return
        local.state = state
        self._sync_parent(key[0], local)
        if local.version == 0 or key in self._pending:
            return  # written with the rest once the store is back
        try:
            version = self.store.update(*key, state, self.signer.sign(*key, state), local.version)
        except StoreUnavailable as exc:
            self._keep_pending(key, exc)
            return
        if version is None:  # released meanwhile, or another worker wrote first: theirs stands
            log.warning(
                "ref %s changed on another worker at the same time; this worker's change is lost", key[1]
            )
            self._forget(key)
        else:
            local.version = version

    def _sync_parent(self, session: str, local: _Local) -> None:
        """A change to an alias is a change to its parent's object too."""
        if local.alias is None:
            return
        parent_key = (session, local.alias[0])
        parent = self._local.get(parent_key)
        if parent is not None and getattr(parent.obj, local.alias[1], None) is local.obj:
            self._sync(parent_key)

    def _touch(self, key: Key, local: _Local, now: float) -> None:
        if now - local.touched < self._touch_every:
            return
        local.touched = now
        with contextlib.suppress(StoreUnavailable):  # last-use times are advisory (TTL, eviction order)
            self.store.touch(*key, now)

    def _ask(self, question: Callable[[], int]) -> int:
        try:
            return question()
        except StoreUnavailable as exc:
            raise RefStoreUnavailable(str(exc)) from exc

    # ------------------------------------------------------------------------------ unreachable store
    def _keep_pending(self, key: Key, exc: Exception) -> None:
        if len(self._pending) >= max(self.limits.max_total, 1):
            raise RefStoreUnavailable(f"too many changes wait for the ref store: {exc}") from exc
        if not self._pending:
            log.warning("ref store unreachable (%s); keeping changes until it is back", exc)
        self._pending[key] = "write"
        self._retry_at = self._clock() + RETRY_EVERY_S

    def _maintain(self, now: float) -> None:
        if (self._pending or self._pending_sessions) and now >= self._retry_at:
            self._retry_at = now + RETRY_EVERY_S
            self._flush(now)
        if now >= self._sweep_at:
            self._sweep_at = now + SWEEP_EVERY_S
            self._sweep()
        ttl = self.limits.ttl_seconds
        if ttl > 0 and now >= self._prune_at:
            self._prune_at = now + self._touch_every
            with contextlib.suppress(StoreUnavailable):
                self.store.prune(now - ttl)

    def _sweep(self) -> None:
        with self._lock:
            oldest = list(itertools.islice(self._local.items(), SWEEP_BATCH))
        for key, local in oldest:
            if local.version == 0 or not local.storable or key in self._pending:
                continue  # the only copy
            try:
                current = self.store.version(*key)
            except StoreUnavailable:
                return
            if current != local.version:
                self._forget(key)

    def _flush(self, now: float) -> None:
        if not self._flushing.acquire(blocking=False):
            return  # another call's thread is writing them
        try:
            for session in list(self._pending_sessions):
                self.store.release_session(session)
                self._pending_sessions.discard(session)
            for key, action in list(self._pending.items()):
                self._flush_one(key, action, now)
                if self._pending.get(key) == action:  # unless a call queued another action meanwhile
                    del self._pending[key]
        except StoreUnavailable:
            return
        finally:
            self._flushing.release()
        log.warning("ref store reachable again; pending changes written")

    def _flush_one(self, key: Key, action: str, now: float) -> None:
        local = self._local.get(key)
        if action == "release":
            self.store.release(*key)
        elif local is not None:
            entry = Entry(first_version(), local.state, self.signer.sign(*key, local.state))
            local.version = self.store.upsert(*key, entry, now)

    # ------------------------------------------------------------------------------ local cache
    def _encode(self, obj: Any, alias: tuple[str, str] | None = None) -> tuple[bytes, bool]:
        try:
            return refstate.encode(obj, alias), True
        except refstate.NotStorable:
            return refstate.local_only(obj, self.worker), False

    def _remember(self, key: Key, local: _Local) -> None:
        self._local[key] = local
        self._local.move_to_end(key)
        capacity = self.limits.max_total if self.limits.max_total > 0 else len(self._local)
        while len(self._local) > capacity:
            old_key, old = self._local.popitem(last=False)
            if old.version == 0 or not old.storable:  # the only copy: keep it
                self._local[old_key] = old
                break

    def _forget(self, key: Key) -> _Local | None:
        with self._lock:
            return self._local.pop(key, None)

    def _forget_session(self, session: str) -> list[Key]:
        with self._lock:
            keys = [key for key in self._local if key[0] == session]
            for key in keys:
                del self._local[key]
        return keys

    def _check_memory(self) -> None:
        self._puts += 1
        if self.limits.max_rss_bytes <= 0 or self._puts % MEMORY_CHECK_EVERY != 1:
            return
        resident = resident_bytes()
        if resident > self.limits.max_rss_bytes:
            raise MemoryError(
                f"worker memory {resident >> 20} MiB is above COMPILATION_BRIDGE_MAX_RSS_MB "
                f"({self.limits.max_rss_bytes >> 20} MiB); release refs or sessions before creating more"
            )


def _is_config_object(obj: Any) -> bool:
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type)
