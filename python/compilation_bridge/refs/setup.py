"""The worker's ref table, chosen by the operator's `COMPILATION_BRIDGE_REF_STORE` setting.

`sqlite` (the default) shares refs between the workers of one application on this host; `redis://...`
between hosts (and, when `COMPILATION_BRIDGE_INDUCTOR_REMOTE_CACHE` is on, Inductor's own caches too, each
entry authenticated before it is unpickled); `off` keeps each worker's refs to itself.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from compilation_bridge.refs.journal import Journal
from compilation_bridge.refs.keys import KEY_FILE, StateFolder
from compilation_bridge.refs.local import LocalRefTable
from compilation_bridge.refs.shared import SharedRefTable
from compilation_bridge.refs.signing import Signer
from compilation_bridge.refs.store import Store, StoreUnavailable
from compilation_bridge.refs.table import RefTable
from compilation_bridge.settings import REF_STORE_ENV, inductor_remote_cache_wanted, ref_store_setting

if TYPE_CHECKING:  # the redis client is imported only when a Redis store is chosen
    from compilation_bridge.refs.store.redis import RedisStore

log = logging.getLogger("compilation_bridge.refs")

OFF = ("off", "none", "local")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def open_ref_table(application: str = "default", run: str | None = None) -> RefTable:
    """The table of a serving worker for `application`, started by Snakepit run `run` (not started: its
    owner starts and closes it)."""
    setting = ref_store_setting()
    if setting.lower() in OFF:
        return LocalRefTable()
    folder = StateFolder()
    signer = Signer(folder.key(), folder.path / KEY_FILE, folder.key_on_disk)
    store = open_store(setting, folder, signer, run or "")
    table = SharedRefTable(store, signer, application, journal=Journal(folder, signer, store.location))
    log.info("refs shared through %s", store.location)
    return table


def open_store(setting: str, folder: StateFolder, signer: Signer, run: str = "") -> Store:
    # Each store's module is imported only when chosen: the redis client is not loaded for SQLite.
    if setting.lower() == "sqlite":
        from compilation_bridge.refs.store.sqlite import SqliteStore

        return SqliteStore(folder, run)
    if setting.startswith(REDIS_SCHEMES):
        from compilation_bridge.refs.store.redis import RedisStore

        if inductor_remote_cache_wanted():
            from compilation_bridge.remote_cache import use_authenticated_remote_cache

            use_authenticated_remote_cache(setting, signer.tag)
        store = RedisStore(setting)
        _ping(store)
        return store
    raise ValueError(f"{REF_STORE_ENV} must be sqlite, off, or a redis:// URL, not {setting[:40]!r}")


def _ping(store: RedisStore) -> None:
    """One round trip at start-up: a mistyped or unreachable URL is reported now, not at the first write
    (the worker still starts: refs it makes wait for the store, as in any outage)."""
    try:
        store.ping()
    except StoreUnavailable as exc:
        log.warning(
            "%s; check %s (until the store answers, new refs wait in this worker and refs made "
            "elsewhere cannot be loaded)",
            exc,
            REF_STORE_ENV,
        )
