"""Operator settings, fixed when the worker starts: platform, writable roots and code allowlist.

Callers never change these; they come from the environment (and the CLI flags that set it) so that a
hostile request cannot widen what the worker may import or where it may write.

- ``COMPILATION_BRIDGE_PLATFORM``: ``cpu`` or ``cuda`` (default: detected from torch, read lazily).
- ``COMPILATION_BRIDGE_ALLOWED_ROOTS``: ``os.pathsep``-separated directories under which cache and debug
  files may be written (default: the user cache folder ``~/.cache/compilation-bridge`` only, created
  0700). Never a shared folder such as the system temporary directory: what lies under a root is trusted
  to have been written by this worker's user, so every root must be private to it
  (`compilation_bridge.safe_files.ensure_private_root`). Default caches (the compile cache, Inductor's)
  go under the first root when the user cache folder is not among them.
- ``COMPILATION_BRIDGE_ALLOWED_CALLABLES``: comma-separated qualified names that config values naming code
  (``inductor_passes`` values, an out-of-tree ``backend``) may resolve to (default: none).
- ``COMPILATION_BRIDGE_ALLOWED_INDUCTOR_OPTIONS``: comma-separated Inductor option names a config's
  ``inductor_compile_config`` may set beyond the built-in tuning knobs (default: none).
- ``COMPILATION_BRIDGE_STATE_DIR``: the worker's private state folder (mode 0700): the embedded ref store
  and the key that signs its entries (default: ``state/`` under the user cache folder).
- ``COMPILATION_BRIDGE_REF_STORE``: where refs are shared between workers: ``sqlite`` (default, in the
  state folder), ``redis://[user:pass@]host:port/db`` (many hosts), or ``off`` (each worker keeps its own).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("compilation_bridge")

# ------------------------------------------------------------------ the one parser of the environment
# Every operator setting of the worker is read through these two (and the typed Settings below), so that
# `TRUE`, `yes` or ` 1 ` mean the same everywhere. README, "Environment variables", lists them all.
TRUE_WORDS = frozenset({"1", "true", "t", "yes", "y", "on"})


def is_true(text: str) -> bool:
    """On for 1, true, yes or on (any case, spaces ignored); off otherwise."""
    return text.strip().lower() in TRUE_WORDS


def env_flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    """An on/off setting of the environment (see `is_true`); off when unset."""
    return is_true((os.environ if env is None else env).get(name, ""))


def env_int(name: str, default: int, *, least: int = 1, env: Mapping[str, str] | None = None) -> int:
    """A whole-number setting of at least `least`; unset gives `default`, a malformed value too (logged)."""
    raw = (os.environ if env is None else env).get(name, "").strip()
    if not raw:
        return default
    try:
        return max(least, int(raw))
    except ValueError:
        log.warning("ignoring %s=%r: not a whole number", name, raw)
        return default


PLATFORM_ENV = "COMPILATION_BRIDGE_PLATFORM"
ALLOWED_ROOTS_ENV = "COMPILATION_BRIDGE_ALLOWED_ROOTS"
ALLOWED_CALLABLES_ENV = "COMPILATION_BRIDGE_ALLOWED_CALLABLES"
ALLOWED_INDUCTOR_OPTIONS_ENV = "COMPILATION_BRIDGE_ALLOWED_INDUCTOR_OPTIONS"
STATE_DIR_ENV = "COMPILATION_BRIDGE_STATE_DIR"
REF_STORE_ENV = "COMPILATION_BRIDGE_REF_STORE"
PLATFORMS = ("cpu", "cuda")


@dataclass(frozen=True)
class Settings:
    platform: str | None
    allowed_roots: tuple[Path, ...]
    allowed_callables: frozenset[str]
    allowed_inductor_options: frozenset[str] = frozenset()
    # False for the default roots, which the worker may create itself; an operator's root must exist.
    roots_from_operator: bool = False

    def is_path_allowed(self, path: str | os.PathLike[str]) -> bool:
        """True when `path` (resolved, symlinks followed) lies under one of the allowed roots."""
        return self.root_of(path) is not None

    def root_of(self, path: str | os.PathLike[str]) -> Path | None:
        """The allowed root that `path` (resolved, symlinks followed) lies under, or None."""
        resolved = Path(path).expanduser().resolve()
        return next((root for root in self.allowed_roots if resolved.is_relative_to(root)), None)

    def cache_home(self) -> Path:
        """Where caches go when a caller names none: the user's cache folder while it is allowed,
        otherwise the first allowed root, so that defaults work under whatever roots the operator sets."""
        home = user_cache_dir()
        if self.is_path_allowed(home) or not self.allowed_roots:
            return home
        return self.allowed_roots[0]


def user_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "compilation-bridge"


def state_dir_setting() -> Path:
    """The private state folder as configured (not created: see protocol/statedir.py)."""
    raw = os.environ.get(STATE_DIR_ENV, "").strip()
    return Path(raw).expanduser() if raw else user_cache_dir() / "state"


def ref_store_setting() -> str:
    """`sqlite` (default), `off`, or a `redis://` / `rediss://` URL."""
    return os.environ.get(REF_STORE_ENV, "").strip() or "sqlite"


def _platform_from_env() -> str | None:
    value = os.environ.get(PLATFORM_ENV, "").strip().lower()
    if not value:
        return None
    if value not in PLATFORMS:
        raise ValueError(f"{PLATFORM_ENV} must be one of {', '.join(PLATFORMS)}, got {value!r}")
    return value


def _roots_from_env() -> tuple[Path, ...]:
    raw = os.environ.get(ALLOWED_ROOTS_ENV)
    # Not the system temporary directory: any local user can create folders there (see module doc).
    roots = raw.split(os.pathsep) if raw else [str(user_cache_dir())]
    return tuple(Path(r).expanduser().resolve() for r in roots if r)


def _names_from_env(variable: str) -> frozenset[str]:
    raw = os.environ.get(variable, "")
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


@functools.cache
def get_settings() -> Settings:
    return Settings(
        _platform_from_env(),
        _roots_from_env(),
        _names_from_env(ALLOWED_CALLABLES_ENV),
        _names_from_env(ALLOWED_INDUCTOR_OPTIONS_ENV),
        roots_from_operator=bool(os.environ.get(ALLOWED_ROOTS_ENV)),
    )


def reload_settings() -> Settings:
    """Re-read the environment (start-up flags set it before serving; tests change it)."""
    get_settings.cache_clear()
    return get_settings()
