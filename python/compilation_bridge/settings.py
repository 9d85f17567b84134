"""Operator settings, the one owner of the worker's environment: platform, roots, allowlists, limits.

Callers never change these; they come from the environment (and the CLI flags that choose them) so that a
hostile request cannot widen what the worker may import or where it may write. Every variable is named
here by a constant (``*_ENV``) and read here, through one set of parsers: a switch is on for 1, true, yes
or on (`is_true`); a number that does not parse is an error naming the variable (`SettingError`), never
its default. Both doors (`grpc_server.py`, `compilation-bridge serve`) and the port check every number
and the platform (`check_environment`) before they start, and exit 2 with that one line.

What each variable means and defaults to is in `settings_catalog.VARIABLES`, the source of
docs/settings.md's table (tests/test_settings.py checks that every variable named here is there).

``--platform`` is a choice made through this module (`choose`), read as if ``COMPILATION_BRIDGE_PLATFORM``
held it; the environment is never written, except Inductor's own variables (``TORCHINDUCTOR_CACHE_DIR``
and its remote-cache switches), which Inductor reads only from there, by `set_inductor_variables`, and
the variables a library reads only while it is imported, held for that import alone (`import_environment`). No
other module of the package reads the environment, except the vLLM variables read where and as vLLM
reads them (`vllm_config`) (tests/test_settings.py checks).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

log = logging.getLogger("compilation_bridge")
_N = TypeVar("_N", int, float)

# ------------------------------------------------------------------ the one parser of the environment
# Every operator setting of the worker is read here, through these parsers (and the typed Settings and
# accessors below), so that `TRUE`, `yes` or ` 1 ` mean the same everywhere.
TRUE_WORDS = frozenset({"1", "true", "t", "yes", "y", "on"})
FALSE_WORDS = frozenset({"0", "false", "f", "no", "n", "off"})  # what a strict on/off flag also accepts


def is_true(text: str) -> bool:
    """On for 1, true, yes or on (any case, spaces ignored); off otherwise."""
    return text.strip().lower() in TRUE_WORDS


def env_flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    """An on/off setting of the environment (see `is_true`); off when unset."""
    return is_true(_read(name, env))


class SettingError(ValueError):
    """A variable that holds no value of its kind: the worker refuses to start rather than guess."""


def env_int(name: str, default: int, *, least: int = 1, env: Mapping[str, str] | None = None) -> int:
    """A whole-number setting of at least `least`; unset or blank gives `default`, a malformed value raises
    SettingError naming the variable (a typo must not silently become the default)."""
    value = _env_number(name, int, "a whole number", env)
    return default if value is None else max(least, value)


def env_float(
    name: str, default: float, *, least: float = 0.0, env: Mapping[str, str] | None = None
) -> float:
    """A number setting of at least `least`; unset or blank gives `default`, a malformed value raises."""
    value = _env_number(name, float, "a number", env)
    return default if value is None else max(least, value)


def _env_number(name: str, kind: Callable[[str], _N], what: str, env: Mapping[str, str] | None) -> _N | None:
    """The variable as `kind`, or None when unset or blank; SettingError when malformed."""
    raw = _read(name, env).strip()
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError:
        raise SettingError(f"{name}={raw!r} is not {what}") from None


def _read(name: str, env: Mapping[str, str] | None = None) -> str:
    """A variable's text: a start-up flag's choice (`choose`) first, then `env` or the environment."""
    if env is None and name in _chosen:
        return _chosen[name]
    return (os.environ if env is None else env).get(name, "")


# Values that start-up flags chose for variables (`--platform`): read as if the variable held them, so the
# environment is never written.
_chosen: dict[str, str] = {}


def choose(name: str, value: str) -> None:
    """A start-up flag's value for variable `name`, over the environment, for the rest of the process."""
    _chosen[name] = value
    reload_settings()


PLATFORM_ENV = "COMPILATION_BRIDGE_PLATFORM"
ALLOWED_ROOTS_ENV = "COMPILATION_BRIDGE_ALLOWED_ROOTS"
ALLOWED_CALLABLES_ENV = "COMPILATION_BRIDGE_ALLOWED_CALLABLES"
ALLOWED_INDUCTOR_OPTIONS_ENV = "COMPILATION_BRIDGE_ALLOWED_INDUCTOR_OPTIONS"
STATE_DIR_ENV = "COMPILATION_BRIDGE_STATE_DIR"
REF_STORE_ENV = "COMPILATION_BRIDGE_REF_STORE"
MODEL_ROOTS_ENV = "COMPILATION_BRIDGE_MODEL_ROOTS"
MAX_MODEL_BYTES_ENV = "COMPILATION_BRIDGE_MAX_MODEL_BYTES"
MAX_RUN_ELEMENTS_ENV = "COMPILATION_BRIDGE_MAX_RUN_ELEMENTS"
MAX_RUN_BYTES_ENV = "COMPILATION_BRIDGE_MAX_RUN_BYTES"
DISABLE_COMPILE_CACHE_ENV = "COMPILATION_BRIDGE_DISABLE_COMPILE_CACHE"
INDUCTOR_MAX_AUTOTUNE_ENV = "COMPILATION_BRIDGE_INDUCTOR_MAX_AUTOTUNE"
LOG_LEVEL_ENV = "SNAKEPIT_LOG_LEVEL"
LOG_FORMAT_ENV = "COMPILATION_BRIDGE_LOG_FORMAT"
REF_TTL_ENV = "SNAKEBRIDGE_REF_TTL_SECONDS"
REF_MAX_ENV = "SNAKEBRIDGE_REF_MAX"
MAX_TOTAL_REFS_ENV = "COMPILATION_BRIDGE_MAX_TOTAL_REFS"
MAX_SESSIONS_ENV = "COMPILATION_BRIDGE_MAX_SESSIONS"
MAX_RSS_MB_ENV = "COMPILATION_BRIDGE_MAX_RSS_MB"
REF_LEASE_ENV = "COMPILATION_BRIDGE_REF_LEASE_SECONDS"
MAX_REF_BYTES_ENV = "COMPILATION_BRIDGE_MAX_REF_BYTES"
MAX_SESSION_BYTES_ENV = "COMPILATION_BRIDGE_MAX_SESSION_BYTES"
MAX_STORE_BYTES_ENV = "COMPILATION_BRIDGE_MAX_STORE_BYTES"
APPLICATION_ENV = "COMPILATION_BRIDGE_APPLICATION"
INDUCTOR_REMOTE_CACHE_ENV = "COMPILATION_BRIDGE_INDUCTOR_REMOTE_CACHE"
ALLOWED_PEER_UIDS_ENV = "COMPILATION_BRIDGE_ALLOWED_PEER_UIDS"
TEST_HOOKS_ENV = "COMPILATION_BRIDGE_TEST_HOOKS"
PRELOAD_COMPILE_ENV = "COMPILATION_BRIDGE_PRELOAD_COMPILE"
ATOM_CLASS_ENV = "SNAKEBRIDGE_ATOM_CLASS"
LEGACY_PROTOCOL_ENV = "SNAKEBRIDGE_ALLOW_LEGACY_PROTOCOL"
# Start-up options (transport/options.py)
HOST_ENV = "COMPILATION_BRIDGE_HOST"
MAX_REQUEST_BYTES_ENV = "COMPILATION_BRIDGE_MAX_REQUEST_BYTES"
MAX_CONCURRENT_CALLS_ENV = "COMPILATION_BRIDGE_MAX_CONCURRENT_CALLS"
MAX_SESSION_CALLS_ENV = "COMPILATION_BRIDGE_MAX_SESSION_CALLS"
REFLECTION_ENV = "COMPILATION_BRIDGE_REFLECTION"
MAX_REFLECTION_STREAMS_ENV = "COMPILATION_BRIDGE_MAX_REFLECTION_STREAMS"
STREAM_IDLE_SECONDS_ENV = "COMPILATION_BRIDGE_STREAM_IDLE_SECONDS"
READY_FILE_ENV = "SNAKEPIT_READY_FILE"
HEARTBEAT_CONFIG_ENV = "SNAKEPIT_HEARTBEAT_CONFIG"
GRPC_ADDRESS_ENV = "SNAKEPIT_GRPC_ADDRESS"
ELIXIR_ADDRESS_ENV = "SNAKEPIT_ELIXIR_ADDRESS"
PROCESS_GROUP_ENV = "SNAKEPIT_PROCESS_GROUP"
XDG_CACHE_HOME_ENV = "XDG_CACHE_HOME"
# OpenTelemetry (observability/otel_export.py): the names Snakepit's own Python server reads.
OTEL_ENDPOINT_ENV = "SNAKEPIT_OTEL_ENDPOINT"
OTEL_CONSOLE_ENV = "SNAKEPIT_OTEL_CONSOLE"
SERVICE_NAME_ENV = "SNAKEPIT_SERVICE_NAME"
INSTANCE_ID_ENV = "SNAKEPIT_INSTANCE_ID"
DEFAULT_SERVICE_NAME = "snakepit.python.bridge"  # Snakepit's, so dashboards built for its workers match
PLATFORMS = ("cpu", "cuda")
LOG_LEVELS = ("debug", "info", "warning", "error", "none")
DEFAULT_MAX_MODEL_BYTES = 1 << 30
DEFAULT_MAX_RUN_ELEMENTS = 1 << 24
DEFAULT_MAX_RUN_BYTES = 1 << 30
# Settings that change compiled code: the compile cache's key hashes their values as written.
COMPILED_CODE_ENVS = (INDUCTOR_MAX_AUTOTUNE_ENV, PLATFORM_ENV)


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
    return Path(os.environ.get(XDG_CACHE_HOME_ENV) or Path.home() / ".cache") / "compilation-bridge"


def state_dir_setting() -> Path:
    """The private state folder as configured (not created: see refs/keys.py)."""
    raw = os.environ.get(STATE_DIR_ENV, "").strip()
    return Path(raw).expanduser() if raw else user_cache_dir() / "state"


def ref_store_setting() -> str:
    """`sqlite` (default), `off`, or a `redis://` / `rediss://` URL."""
    return os.environ.get(REF_STORE_ENV, "").strip() or "sqlite"


def application_setting(instance_name: str | None = None) -> str:
    """The application a worker serves: Snakepit's instance name, else the operator's, else `default`."""
    return (instance_name or "").strip() or os.environ.get(APPLICATION_ENV, "").strip() or "default"


def inductor_remote_cache_wanted() -> bool:
    return env_flag(INDUCTOR_REMOTE_CACHE_ENV)


INDUCTOR_REMOTE_CACHE_SWITCHES = (
    "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE",
    "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE",
)


INDUCTOR_CACHE_DIR_ENV = "TORCHINDUCTOR_CACHE_DIR"


def set_inductor_remote_cache_switches() -> None:
    """Inductor's remote-cache switches on (an operator's own values win), before torch reads them at
    its import."""
    set_inductor_variables(dict.fromkeys(INDUCTOR_REMOTE_CACHE_SWITCHES, "1"), replace=False)


def inductor_cache_dir_setting() -> str | None:
    """TORCHINDUCTOR_CACHE_DIR as it is now (Inductor writes its default there on first use)."""
    return os.environ.get(INDUCTOR_CACHE_DIR_ENV) or None


def set_inductor_variables(values: Mapping[str, str], *, replace: bool) -> None:
    """The one place the worker writes its environment: Inductor's own variables, which Inductor reads
    only from there (its remote-cache switches at import, its cache folder at every cache access).
    Without `replace`, a value already set (the operator's) wins."""
    for name, value in values.items():
        if not name.startswith("TORCHINDUCTOR_"):
            raise ValueError(f"{name} is not one of Inductor's variables")
        if replace:
            os.environ[name] = value
        else:
            os.environ.setdefault(name, value)


@contextlib.contextmanager
def import_environment(values: Mapping[str, str]) -> Iterator[None]:
    """`values` in the environment while a library that reads them only at its import is imported
    (transformers' USE_TORCH, ...); the environment is as it was afterwards."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def allowed_peer_uids_setting() -> frozenset[int] | None:
    """The uids, besides the worker's own, whose processes may call it; None for `any` (no check)."""
    uids = set()
    for item in os.environ.get(ALLOWED_PEER_UIDS_ENV, "").split(","):
        item = item.strip()
        if item.lower() == "any":
            return None
        if item.isdigit():
            uids.add(int(item))
        elif item:
            log.warning("ignoring %r in %s: not a uid", item, ALLOWED_PEER_UIDS_ENV)
    return frozenset(uids)


def model_roots_setting() -> tuple[Path, ...]:
    """The operator's extra model folders, resolved (symlinks followed); none by default."""
    return _resolved_paths(os.environ.get(MODEL_ROOTS_ENV, ""))


@functools.lru_cache(maxsize=16)
def _resolved_paths(text: str) -> tuple[Path, ...]:
    """An `os.pathsep`-separated list of folders, each resolved (`~` expanded, symlinks followed); once
    per value of the setting (every model file read checks its path against these roots)."""
    return tuple(Path(p).expanduser().resolve() for p in text.split(os.pathsep) if p)


def _above_zero(name: str, default: int) -> int:
    # 0 or less would be no budget at all: like a malformed value (logged by env_int), it leaves the default.
    value = env_int(name, 0, least=0)
    return value if value > 0 else default


def max_model_bytes() -> int:
    """The budget for a reference model's float32 parameters, in bytes."""
    return _above_zero(MAX_MODEL_BYTES_ENV, DEFAULT_MAX_MODEL_BYTES)


def max_run_elements() -> int:
    """The budget for one run's tokens times hidden size."""
    return _above_zero(MAX_RUN_ELEMENTS_ENV, DEFAULT_MAX_RUN_ELEMENTS)


def max_run_bytes() -> int:
    """The budget for one run's estimated peak allocation, in bytes (`compile.budgets.check_run_bytes`)."""
    return _above_zero(MAX_RUN_BYTES_ENV, DEFAULT_MAX_RUN_BYTES)


def compile_cache_disabled() -> bool:
    """This project's switch off the compile cache (vLLM's own is `vllm_config.env.disable_compile_cache`)."""
    return env_flag(DISABLE_COMPILE_CACHE_ENV)


def inductor_max_autotune() -> bool:
    """Whether exact-size compiles autotune, as vLLM's do (off: on CPU it costs minutes per piece)."""
    return env_flag(INDUCTOR_MAX_AUTOTUNE_ENV)


def compiled_code_env() -> dict[str, str | None]:
    """The raw values of the settings that change compiled code (unset: None), for the cache key."""
    return {name: _read(name) or None for name in COMPILED_CODE_ENVS}


def conformance_hooks_enabled() -> bool:
    """COMPILATION_BRIDGE_TEST_HOOKS: the conformance suite's long-running calls (never in production)."""
    return env_flag(TEST_HOOKS_ENV)


def preload_compile_wanted() -> bool:
    """COMPILATION_BRIDGE_PRELOAD_COMPILE: load torch, Dynamo and Inductor at start (hundreds of MiB)."""
    return env_flag(PRELOAD_COMPILE_ENV)


def atom_class_enabled() -> bool:
    """SNAKEBRIDGE_ATOM_CLASS: Elixir atoms arrive as an `Atom` type instead of `str`."""
    return env_flag(ATOM_CLASS_ENV)


def legacy_protocol_allowed() -> bool:
    """SNAKEBRIDGE_ALLOW_LEGACY_PROTOCOL: accept payloads without SnakeBridge's protocol version."""
    return env_flag(LEGACY_PROTOCOL_ENV)


def log_level_setting(default: str) -> str:
    """SNAKEPIT_LOG_LEVEL in lower case (surrounding spaces dropped), or `default` when unset or empty."""
    return (os.environ.get(LOG_LEVEL_ENV) or default).strip().lower()


def log_format_setting() -> str:
    """`json` when COMPILATION_BRIDGE_LOG_FORMAT says so (any case), otherwise `text`."""
    return "json" if os.environ.get(LOG_FORMAT_ENV, "").strip().lower() == "json" else "text"


@dataclass(frozen=True)
class OtelSettings:
    endpoint: str  # an OTLP/HTTP URL; empty: no export over the network
    console: bool  # spans and metrics also printed to stderr
    service_name: str
    instance_id: str  # empty: a fresh one per process


def otel_settings() -> OtelSettings | None:
    """What OpenTelemetry exports, or None when neither an endpoint nor the console asks for it (then
    nothing of OpenTelemetry is imported)."""
    endpoint = _read(OTEL_ENDPOINT_ENV).strip()
    console = env_flag(OTEL_CONSOLE_ENV)
    if not endpoint and not console:
        return None
    service = _read(SERVICE_NAME_ENV).strip() or DEFAULT_SERVICE_NAME
    return OtelSettings(endpoint, console, service, _read(INSTANCE_ID_ENV).strip())


def _platform_from_env() -> str | None:
    value = _read(PLATFORM_ENV).strip().lower()
    if not value:
        return None
    if value not in PLATFORMS:
        raise SettingError(f"{PLATFORM_ENV} must be one of {', '.join(PLATFORMS)}, got {value!r}")
    return value


def _roots_from_env() -> tuple[Path, ...]:
    # Not the system temporary directory: any local user can create folders there (see module doc).
    return _resolved_paths(os.environ.get(ALLOWED_ROOTS_ENV) or str(user_cache_dir()))


def _names_from_env(variable: str) -> frozenset[str]:
    raw = os.environ.get(variable, "")
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


# Every variable that holds a number, with its kind: `check_environment` reads them all at start-up.
WHOLE_NUMBER_ENVS = (
    MAX_MODEL_BYTES_ENV,
    MAX_RUN_ELEMENTS_ENV,
    MAX_RUN_BYTES_ENV,
    REF_MAX_ENV,
    MAX_TOTAL_REFS_ENV,
    MAX_SESSIONS_ENV,
    MAX_RSS_MB_ENV,
    MAX_REF_BYTES_ENV,
    MAX_SESSION_BYTES_ENV,
    MAX_STORE_BYTES_ENV,
    MAX_REQUEST_BYTES_ENV,
    MAX_CONCURRENT_CALLS_ENV,
    MAX_SESSION_CALLS_ENV,
    MAX_REFLECTION_STREAMS_ENV,
    STREAM_IDLE_SECONDS_ENV,
)
NUMBER_ENVS = (REF_TTL_ENV, REF_LEASE_ENV)


def check_environment(env: Mapping[str, str] | None = None) -> None:
    """Raise SettingError naming every variable that holds a value of the wrong kind (numbers, the
    platform), so that a worker refuses to start instead of serving with a default nobody chose."""
    problems = []
    for names, kind, what in ((WHOLE_NUMBER_ENVS, int, "a whole number"), (NUMBER_ENVS, float, "a number")):
        for name in names:
            try:
                _env_number(name, kind, what, env)
            except SettingError as exc:
                problems.append(str(exc))
    try:
        if env is None:
            _platform_from_env()
    except SettingError as exc:
        problems.append(str(exc))
    if problems:
        raise SettingError("; ".join(problems))


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
