"""Inductor's remote caches (FX graphs, AOTAutograd) in the ref store's Redis, authenticated.

Inductor unpickles what its remote caches hand back, so an entry anyone else could have written would
run their code in every worker that compiles. Here every entry is written as `MAC || bytes` with the ref
store's key, and one whose MAC does not match is a miss (logged once), never handed to Inductor. Off
unless the operator asks (`COMPILATION_BRIDGE_INDUCTOR_REMOTE_CACHE`, with a Redis ref store): then a
model compiled on one host loads warm on another.

Nothing here imports torch: the compile package, which loads torch anyway, calls `install`. This module
sits below every layer so that the ref store's set-up (which knows the URL and the key) and the compile
package (which loads torch) can both reach it.
"""

from __future__ import annotations

import hmac
import logging
import sys
from collections.abc import Callable
from typing import Any

from compilation_bridge.settings import set_inductor_remote_cache_switches

log = logging.getLogger("compilation_bridge.compile")

Tagger = Callable[[bytes, bytes], bytes]  # (domain, data) -> MAC
_DOMAIN = b"cb-inductor-remote-cache-v1"
MAC_BYTES = 32
_wanted: tuple[str, Tagger] | None = None
_installed = False


def use_authenticated_remote_cache(url: str, tag: Tagger) -> None:
    """Ask for the remote caches at `url`, signed with `tag`. Inductor's switches are its environment
    variables, set before torch loads (a config attribute set later does not survive Inductor's config
    snapshots); the backend is installed when the compile package loads torch (`install`)."""
    global _wanted
    _wanted = (url, tag)
    set_inductor_remote_cache_switches()
    if "compilation_bridge.compile" in sys.modules:
        install()


def install() -> None:
    """Point Inductor's FX-graph and AOTAutograd remote caches at the authenticated backend, if asked."""
    global _installed
    if _wanted is None or _installed:
        return
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._inductor import remote_cache

    url, tag = _wanted
    backend_class = _backend_class(remote_cache, url, tag)
    for cache in (remote_cache.RemoteFxGraphCache, remote_cache.RemoteAOTAutogradCache):
        cache.backend_override_cls = backend_class
    inductor_config.fx_graph_remote_cache = True
    functorch_config.enable_remote_autograd_cache = True
    _installed = True
    log.info("Inductor's FX-graph and AOTAutograd remote caches: in the ref store's Redis, authenticated")


def _backend_class(remote_cache: Any, url: str, tag: Tagger) -> Callable[[], Any]:
    import redis

    class AuthenticatedRedisBackend(remote_cache.RemoteCacheBackend):
        """Inductor's Redis backend, with a MAC in front of every value."""

        _client = redis.Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=5.0)
        _refused: set[str] = set()

        def _get(self, key: str) -> bytes | None:
            try:
                value = self._client.get(key)
            except redis.RedisError as exc:
                _unreachable(exc)
                return None
            return self._verified(key, value) if isinstance(value, bytes) else None

        def _put(self, key: str, data: bytes) -> None:
            try:
                self._client.set(key, tag(_DOMAIN, key.encode() + b"\0" + data) + data)
            except redis.RedisError as exc:
                _unreachable(exc)

        def _verified(self, key: str, value: bytes) -> bytes | None:
            mac, data = value[:MAC_BYTES], value[MAC_BYTES:]
            if hmac.compare_digest(mac, tag(_DOMAIN, key.encode() + b"\0" + data)):
                return data
            if key not in self._refused:
                self._refused.add(key)
                log.warning("Inductor remote cache entry %s failed authentication: ignored", key[:80])
            return None

    return AuthenticatedRedisBackend


_reported_unreachable = False


def _unreachable(exc: Exception) -> None:
    """A cache that cannot be reached is a miss; said once, without the URL (it may hold a password)."""
    global _reported_unreachable
    if not _reported_unreachable:
        _reported_unreachable = True
        log.warning("Inductor remote cache unreachable (%s); compiling without it", type(exc).__name__)
