"""The shared ref table: every ref's state in a `Store` any worker of the application can read.

Each worker keeps the objects it has used in a local cache, tagged with the store's version of each. A use
checks that version first (one indexed read): equal, the local object is served; different or absent
locally, the state is loaded, its size, version and signature checked and the object rebuilt, so a worker
serves a ref another worker created or changed exactly as that worker would. After a call that may have
changed its refs (`sync`), their state is encoded again and written only if it changed (the cache keeps a
digest of each state, not a copy), as the next version, and only if nobody wrote a newer one meanwhile.

Everything the table writes lies in its application's namespace (`Signer.namespace`), carries a lease
renewed by use, and is signed over application, session, ref, version and state.

When the store cannot be reached, refs this worker holds keep working, new refs and changes are kept and
written by the background flusher as soon as the store answers again (or, at shutdown, journaled in the
state folder and written by the next worker), and a ref it would have to load fails with
`RefStoreUnavailable`. Maintenance (that flusher, expiry, dropping stale copies, giving the WAL back)
runs on the table's own thread, never on a call's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from compilation_bridge.refs import state as refstate
from compilation_bridge.refs.journal import Journal
from compilation_bridge.refs.limits import DECODE_GROWTH, RefLimits
from compilation_bridge.refs.pending import Pending, PendingChanges
from compilation_bridge.refs.signing import Signer
from compilation_bridge.refs.store import (
    FOREVER_S,
    Entry,
    Key,
    QuotaExceeded,
    Store,
    StoreUnavailable,
    new_version,
    versions_from_now,
)
from compilation_bridge.refs.table import UNKNOWN_REF, Origin, RefStoreIntegrityError, RefStoreUnavailable

log = logging.getLogger("compilation_bridge.refs")

RETRY_FIRST_S = 0.05  # while the store is unreachable, pending writes are tried again after this...
RETRY_MAX_S = 1.0  # ... doubling up to this
TOUCH_EVERY_S = 1.0  # last-use times in the store are this coarse: a write per ref per second at most
MAINTAIN_EVERY_S = 1.0
# Copies of refs released or changed on another worker would stay in memory until used again, and under
# steady traffic through a pool they pile up to the table's limit (tens of thousands of objects). So every
# maintenance pass checks the share of the copies checked longest ago against the store and drops the stale
# ones: each copy is checked about once every SWEEP_PERIOD_S, SWEEP_BATCH copies per store round trip.
SWEEP_PERIOD_S = 10.0
SWEEP_BATCH = 256
TIDY_EVERY_S = 30.0  # how often the store gives back space beyond its data (SQLite's WAL)
KEY_CHECK_EVERY_S = 5.0  # how often the key file is compared with the key this worker signs with
STALE_KEY = (
    "{path} holds another key than this worker read at start-up, so it cannot see refs made with the "
    "new key; restart this worker (every worker started before the key was copied) to use it"
)


@dataclass
class _Local:
    obj: Any
    version: int  # the store's version this object matches; 0 while its creation waits for the store
    digest: bytes  # of its encoded state (or of the marker of an object that cannot be stored)
    storable: bool
    touched: float
    # (parent ref id, attribute) when the object was read from another ref's object (a get_attr): it is
    # then served as that attribute of the parent's current copy, so both refs keep sharing one object
    # on every worker, as they do in the worker that made them.
    alias: Origin | None = None


def _digest(state: bytes) -> bytes:
    return hashlib.blake2b(state, digest_size=16).digest()


class SharedRefTable:
    def __init__(
        self,
        store: Store,
        signer: Signer,
        application: str = "default",
        limits: RefLimits | None = None,
        journal: Journal | None = None,
        clock: Callable[[], float] = time.time,  # wall time: expiry times are compared across hosts
    ) -> None:
        self.store = store
        self.signer = signer
        self.app = signer.namespace(application)
        self.limits = limits or RefLimits.from_env()
        self.journal = journal
        self.worker = f"{socket.gethostname()} pid {os.getpid()}"
        self._clock = clock
        self._lease = self.limits.lease or FOREVER_S
        self._touch_every = min(TOUCH_EVERY_S, self._lease / 4)
        self._quota = self.limits.quota()
        self._lock = threading.Lock()
        self._local: OrderedDict[Key, _Local] = OrderedDict()  # oldest first: made, loaded or swept
        self._pending = PendingChanges(self.app, self.limits.max_total)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._stale_key_warned = False
        if journal is not None:
            self._pending.take(journal.take(self.app))

    # ------------------------------------------------------------------------------ the table's API
    def put(self, session_id: str, obj: Any, origin: Origin | None = None) -> str:
        self.limits.check_memory()
        key = Key(self.app, session_id, uuid.uuid4().hex)
        now = self._clock()
        alias = origin if _is_config_object(obj) else None  # other values cannot be changed in place
        state, storable = self._encode(obj, alias)
        version = self._create(key, state, now)
        with self._lock:
            self._remember(key, _Local(obj, version, _digest(state), storable, now, alias))
        return key.ref

    def get(self, session_id: str, ref_id: str) -> Any:
        key = Key(self.app, session_id, ref_id)
        now = self._clock()
        local = self._local.get(key)
        if local is None:
            return self._restore(key, now, 0)
        if local.version == 0:
            return local.obj  # created while the store was unreachable: only here until it is back
        try:
            version = self.store.version(key, now)
        except StoreUnavailable:
            return local.obj  # held here: keeps working while the store is away
        if version == local.version:
            self._touch(key, local, now)
            return self._current(session_id, local)
        if version is None:
            self._forget(key)
            raise KeyError(UNKNOWN_REF.format(ref_id))
        return self._restore(key, now, local.version)

    def sync(self, session_id: str, ref_ids: Iterable[str]) -> None:
        """Store the new state of refs a call may have changed (no write when nothing changed)."""
        for ref_id in dict.fromkeys(ref_ids):
            self._sync(Key(self.app, session_id, ref_id))

    def release(self, session_id: str, ref_id: str) -> bool:
        key = Key(self.app, session_id, ref_id)
        local = self._forget(key)
        waiting = self._pending.pop(key)
        if local is not None and local.version == 0 and waiting is not None:
            return True  # never reached the store
        try:
            return self.store.release(key)
        except StoreUnavailable as exc:
            if local is None:
                raise RefStoreUnavailable(f"cannot release SnakeBridge reference {ref_id}: {exc}") from exc
            self._pending.keep(key, Pending.release(), exc)
            self._wake.set()
            return True

    def release_session(self, session_id: str) -> int:
        dropped, unstored = self._drop_session(session_id)
        try:
            return self.store.release_session(self.app, session_id) + unstored
        except StoreUnavailable:
            self._queue_session_release(session_id, versions_from_now())
            return dropped

    def release_session_soon(self, session_id: str) -> int:
        dropped, _ = self._drop_session(session_id)
        # What exists now goes; a ref the session makes meanwhile (on any worker) has a later version.
        self._queue_session_release(session_id, versions_from_now())
        return dropped

    def count(self, session_id: str | None = None) -> int:
        return self._ask(lambda: self.store.count(self.app, session_id))

    def session_count(self) -> int:
        return self._ask(lambda: self.store.session_count(self.app))

    def stored_bytes(self, session_id: str | None = None) -> int:
        return self._ask(lambda: self.store.stored_bytes(self.app, session_id))

    def pending_count(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------------------------ lifetime
    def start(self) -> None:
        """Start the table's thread, after dropping what earlier runs of the application left (their
        callers, an ended BEAM's processes, can hold none of it)."""
        try:
            dropped = self.store.release_other_runs(self.app)
        except StoreUnavailable as exc:
            log.warning("refs of earlier runs not released (%s); they go with their lease", exc)
        else:
            if dropped:
                log.info("released %d refs left by earlier runs of this application", dropped)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ref-store", daemon=True)
            self._thread.start()

    def close(self, timeout_s: float) -> None:
        """Stop maintenance, write what waits for the store until `timeout_s` runs out, journal the rest,
        close the store."""
        deadline = time.monotonic() + timeout_s
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        delay = RETRY_FIRST_S
        # A hung store makes one try last its whole timeout: no try starts past the deadline.
        while self.pending_count() and time.monotonic() < deadline and not self._flush():
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, RETRY_MAX_S)
        left = self._pending.for_journal()
        if self.journal is not None and left:
            self.journal.save(self.app, left)
            log.warning(
                "ref store unreachable at shutdown: %d changes journaled for the next worker", len(left)
            )
        with contextlib.suppress(Exception):
            self.store.close()

    # ------------------------------------------------------------------------------ store traffic
    def _entry(self, key: Key, version: int, state: bytes) -> Entry:
        return Entry(version, state, self.signer.sign(key, version, state))

    def _create(self, key: Key, state: bytes, now: float) -> int:
        entry = self._entry(key, new_version(), state)
        try:
            self.limits.check_ref_size(len(state))
            evicted = self.store.create(key, entry, now + self._lease, self._quota)
        except QuotaExceeded as exc:
            raise RuntimeError(str(exc)) from None
        except StoreUnavailable as exc:
            self._keep_pending(key, Pending.write(state), exc)
            return 0
        with self._lock:
            for old in evicted:
                self._local.pop(Key(key.app, key.session, old), None)
        return entry.version

    def _restore(self, key: Key, now: float, seen: int) -> Any:
        """Load, check and rebuild a ref's object; `seen`: the newest version this worker has seen."""
        try:
            entry = self.store.load(key, now, self.limits.max_ref_bytes)
        except StoreUnavailable as exc:
            raise RefStoreUnavailable(f"cannot restore SnakeBridge reference {key.ref}: {exc}") from exc
        except QuotaExceeded as exc:
            raise RefStoreIntegrityError(f"ref store entry for {key.ref} is refused: {exc}") from None
        if entry is None:
            self._forget(key)
            raise KeyError(UNKNOWN_REF.format(key.ref) + self._stale_key_hint())
        if not self.signer.verify(key, entry.version, entry.state, entry.mac):
            raise RefStoreIntegrityError(
                f"ref store entry for SnakeBridge reference {key.ref} failed authentication: it is corrupt, "
                f"was moved, or was written with another key (every worker sharing {self.store.location} "
                f"needs the same key file, {self.signer.key_path})" + self._stale_key_hint()
            )
        if entry.version < seen:
            raise RefStoreIntegrityError(
                f"ref store entry for SnakeBridge reference {key.ref} is older (version {entry.version}) "
                f"than one this worker has seen ({seen}): an old state was written back; refused"
            )
        self.limits.check_memory(DECODE_GROWTH * len(entry.state))
        obj, alias = self._decode(key.ref, entry.state)
        # A restore is a use; with a TTL it must count at once. Without one, last-use times only order
        # evictions, and a pool that routes calls at random restores often: that write waits its turn.
        touched = now - self._touch_every if self.limits.ttl_seconds > 0 else now
        with self._lock:
            self._remember(
                key, local := _Local(obj, entry.version, _digest(entry.state), True, touched, alias)
            )
        self._touch(key, local, now)
        return self._current(key.session, local)

    def _stale_key_hint(self) -> str:
        """Why a ref from another worker is not found, when the cause is this worker's own key: the key
        file was replaced after it started (refs of other hosts live in the new key's namespace)."""
        if not self.signer.replaced_on_disk():
            return ""
        self._warn_stale_key()
        return f" ({STALE_KEY.format(path=self.signer.key_path)})"

    def _warn_stale_key(self) -> None:
        if not self._stale_key_warned:
            self._stale_key_warned = True
            log.warning(STALE_KEY.format(path=self.signer.key_path))

    def _current(self, session: str, local: _Local) -> Any:
        """The object to serve: an alias is its parent's attribute, as long as that is one like it."""
        if local.alias is None:
            return local.obj
        parent_id, attr = local.alias
        try:
            parent = self.get(session, parent_id)
        except (KeyError, ConnectionError, ValueError, RuntimeError, MemoryError):
            return local.obj  # the parent is gone or out of reach: the ref's own last state stands
        current = getattr(parent, attr, None)
        if type(current) is type(local.obj):
            local.obj = current
        return local.obj

    def _decode(self, ref_id: str, state: bytes) -> tuple[Any, Origin | None]:
        try:
            return refstate.decode_with_alias(state)
        except refstate.HeldElsewhere as exc:
            raise RuntimeError(f"SnakeBridge reference {ref_id} cannot be used here: {exc}") from None
        except refstate.CorruptState as exc:
            raise RefStoreIntegrityError(f"ref store entry for {ref_id} is refused: {exc}") from None

    def _sync(self, key: Key) -> None:
        local = self._local.get(key)
        if local is None or not local.storable:
            return
        state, local.storable = self._encode(local.obj, local.alias)
        digest = _digest(state)
        if digest == local.digest:
            return
        try:
            self.limits.check_ref_size(len(state))
            self.limits.check_memory()
        except (QuotaExceeded, MemoryError) as exc:
            self._refuse_change(key, exc)
        local.digest = digest
        self._sync_parent(key.session, local)
        if local.version == 0 or key in self._pending:
            self._keep_pending(key, Pending.write(state), None)  # written with the rest once it is back
            return
        version = local.version + 1
        try:
            written = self.store.update(
                key, self._entry(key, version, state), local.version, self._expiry(), self._quota
            )
        except StoreUnavailable as exc:
            self._keep_pending(key, Pending.write(state), exc)
            return
        except QuotaExceeded as exc:
            self._refuse_change(key, exc)
        if written is None:  # released meanwhile, or another worker wrote first: theirs stands
            log.warning(
                "ref %s changed on another worker at the same time; this worker's change is lost", key.ref
            )
            self._forget(key)
        else:
            local.version = written

    def _refuse_change(self, key: Key, exc: Exception) -> None:
        """A change that cannot be kept: this worker's copy goes (the next use loads the stored state)."""
        self._forget(key)
        raise RuntimeError(f"the change to SnakeBridge reference {key.ref} was not kept: {exc}") from None

    def _sync_parent(self, session: str, local: _Local) -> None:
        """A change to an alias is a change to its parent's object too."""
        if local.alias is None:
            return
        parent_key = Key(self.app, session, local.alias[0])
        parent = self._local.get(parent_key)
        if parent is not None and getattr(parent.obj, local.alias[1], None) is local.obj:
            self._sync(parent_key)

    def _expiry(self) -> float:
        return self._clock() + self._lease

    def _touch(self, key: Key, local: _Local, now: float) -> None:
        if now - local.touched < self._touch_every:
            return
        local.touched = now
        with contextlib.suppress(StoreUnavailable):  # last-use times are advisory (expiry, eviction order)
            self.store.touch(key, now + self._lease)

    def _ask(self, question: Callable[[], int]) -> int:
        try:
            return question()
        except StoreUnavailable as exc:
            raise RefStoreUnavailable(str(exc)) from exc

    # ------------------------------------------------------------------------------ waiting for the store
    def _keep_pending(self, key: Key, pending: Pending, exc: Exception | None) -> None:
        self._pending.keep(key, pending, exc)
        self._wake.set()

    def _queue_session_release(self, session: str, before: int) -> None:
        self._pending.queue_session_release(session, before)
        self._wake.set()

    def _drop_session(self, session: str) -> tuple[int, int]:
        """Forget the session's local copies and its unwritten changes: how many refs that was, and how
        many of them never reached the store."""
        with self._lock:
            keys = [key for key in self._local if key.session == session]
            unstored = sum(1 for key in keys if self._local.pop(key).version == 0)
        waiting = self._pending.drop_session(session)
        return len(set(keys) | set(waiting)), unstored

    def _flush(self) -> bool:
        """Write what waits for the store; True when nothing is left."""
        sessions, items = self._pending.snapshot()
        if not sessions and not items:
            return True
        try:
            for session, before in sessions:
                self.store.release_session(self.app, session, before)
                self._pending.session_written(session, before)
            for key, pending in items:
                self._flush_one(key, pending)
                self._pending.written(key, pending)
        except StoreUnavailable as exc:
            self._pending.store_failed(exc)
            return False
        self._pending.store_back()
        return True

    def _flush_one(self, key: Key, pending: Pending) -> None:
        if pending.kind == "release":
            self.store.release(key)
            return
        if pending.kind == "release_session":
            self.store.release_session(key.app, key.session, pending.before)
            return
        assert pending.state is not None
        version = self._write_whatever_version(key, pending.state)
        local = self._local.get(key)
        if local is not None and version is not None and local.digest == _digest(pending.state):
            local.version = version

    def _write_whatever_version(self, key: Key, state: bytes) -> int | None:
        """A change accepted while the store was away: written over whatever the store holds now."""
        while True:
            current = self.store.version(key, self._clock())
            try:
                if current is None:
                    entry = self._entry(key, new_version(), state)
                    self.store.create(key, entry, self._expiry(), self._quota)
                    return entry.version
                written = self.store.update(
                    key, self._entry(key, current + 1, state), current, self._expiry(), self._quota
                )
            except QuotaExceeded as exc:
                log.warning("ref %s could not be written once the store was back: %s", key.ref, exc)
                self._forget(key)
                return None
            if written is not None:
                return written

    # ------------------------------------------------------------------------------ maintenance
    def _run(self) -> None:
        """The table's own thread: pending writes as soon as the store answers, then expiry, stale
        copies and the store's tidying at their own pace."""
        retry = RETRY_FIRST_S
        due = {"sweep": 0.0, "prune": 0.0, "tidy": time.monotonic() + TIDY_EVERY_S, "key": 0.0}
        while not self._stopping.is_set():
            waiting = self.pending_count() > 0
            self._wake.wait(retry if waiting else MAINTAIN_EVERY_S)
            self._wake.clear()
            if self._stopping.is_set():
                return
            if self.pending_count():
                retry = RETRY_FIRST_S if self._flush() else min(retry * 2, RETRY_MAX_S)
            try:
                self._maintain(due)
            except StoreUnavailable:
                continue
            except Exception:  # never let maintenance end the thread
                log.exception("ref store maintenance failed")

    def _maintain(self, due: dict[str, float]) -> None:
        now = time.monotonic()
        if now >= due["key"]:  # said once, as soon as an operator copies a key in, not at the first miss
            due["key"] = now + KEY_CHECK_EVERY_S
            if not self._stale_key_warned and self.signer.replaced_on_disk():
                self._warn_stale_key()
        if now >= due["sweep"]:
            due["sweep"] = now + MAINTAIN_EVERY_S
            self._sweep()
        if now >= due["prune"]:
            due["prune"] = now + max(min(self._touch_every, 60.0), 0.05)
            self.store.prune(self._clock())
        if now >= due["tidy"]:
            due["tidy"] = now + TIDY_EVERY_S
            self.store.tidy()

    def _sweep(self) -> None:
        """Check the share of copies checked longest ago against the store: all of them go to the back
        of the table's order, and those the store no longer holds at their version are dropped. So the
        table turns over once a period however much traffic adds meanwhile, and copies in use never
        stand in front of stale ones."""
        with self._lock:
            share = math.ceil(len(self._local) * MAINTAIN_EVERY_S / SWEEP_PERIOD_S)
            chosen = list(itertools.islice(self._local.items(), share))
            for key, _ in chosen:
                self._local.move_to_end(key)
        copies = [(key, local) for key, local in chosen if _stored_elsewhere(local, key, self._pending)]
        for start in range(0, len(copies), SWEEP_BATCH):
            batch = copies[start : start + SWEEP_BATCH]
            stored = self.store.versions([key for key, _ in batch], self._clock())
            for (key, local), version in zip(batch, stored, strict=True):
                if version != local.version:
                    self._forget_copy(key, local)

    # ------------------------------------------------------------------------------ local cache
    def _encode(self, obj: Any, alias: Origin | None = None) -> tuple[bytes, bool]:
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

    def _forget_copy(self, key: Key, local: _Local) -> None:
        """Drop `local` unless a call replaced it meanwhile (with a newer version: that one stays)."""
        with self._lock:
            if self._local.get(key) is local:
                del self._local[key]


def _stored_elsewhere(local: _Local, key: Key, pending: PendingChanges) -> bool:
    """Whether the store holds this copy's state, so another worker can have changed or released it
    (a copy whose creation or change still waits for the store is the only one)."""
    return local.version != 0 and local.storable and key not in pending


def _is_config_object(obj: Any) -> bool:
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type)
