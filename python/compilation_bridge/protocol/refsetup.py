"""The worker's ref table, chosen by the operator's `COMPILATION_BRIDGE_REF_STORE` setting.

`sqlite` (the default) shares refs between every worker of this user on this host; `redis://...` between
hosts, and then also switches on Inductor's own remote caches (FX graphs and AOTAutograd) in the same
Redis, so a model compiled on one host loads warm on another; `off` keeps each worker's refs to itself.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.protocol.refs import RefTable
from compilation_bridge.protocol.refsign import KEY_FILE, Signer, load_or_create_key
from compilation_bridge.protocol.refstore import Store
from compilation_bridge.protocol.sharedrefs import SharedRefTable
from compilation_bridge.protocol.statedir import private_state_dir
from compilation_bridge.settings import REF_STORE_ENV, ref_store_setting

log = logging.getLogger("compilation_bridge.refs")

OFF = ("off", "none", "local")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def worker_dispatcher() -> Dispatcher:
    """The dispatcher of a serving worker (gRPC or port): refs in the operator's store."""
    return Dispatcher(refs=open_ref_table())


def open_ref_table() -> RefTable | SharedRefTable:
    setting = ref_store_setting()
    if setting.lower() in OFF:
        return RefTable()
    state_dir = private_state_dir()
    signer = Signer(load_or_create_key(state_dir), state_dir / KEY_FILE)
    table = SharedRefTable(open_store(setting, state_dir), signer)
    log.info("refs shared through %s", table.store.location)
    return table


def open_store(setting: str, state_dir: Path) -> Store:
    # Each store's module is imported only when chosen: the redis client is not loaded for SQLite.
    if setting.lower() == "sqlite":
        from compilation_bridge.protocol.refstore_sqlite import SqliteStore

        return SqliteStore(state_dir)
    if setting.startswith(REDIS_SCHEMES):
        from compilation_bridge.protocol.refstore_redis import RedisStore

        enable_inductor_remote_caches(setting)
        return RedisStore(setting)
    raise ValueError(f"{REF_STORE_ENV} must be sqlite, off, or a redis:// URL, not {setting[:40]!r}")


def enable_inductor_remote_caches(url: str) -> None:
    """Inductor's FX graph and AOTAutograd caches in the same Redis, unless the operator chose otherwise.
    torch reads these when it is first imported, which in a worker is later (at the first compile)."""
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "1")
    os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE", "1")
    os.environ.setdefault("TORCHINDUCTOR_REDIS_URL", url)
