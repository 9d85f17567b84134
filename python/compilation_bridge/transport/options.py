"""Start-up options: Snakepit's command line (docs/wire.md#launch-arguments), ours, and the environment.

Snakepit passes `--adapter --port --elixir-address --snakepit-run-id --snakepit-instance-name
[--snakepit-instance-token]` and, depending on the profile, `--max-workers`, `--thread-safety-check` and
user extras: unknown flags are tolerated (parse_known_args), and `--adapter` is never imported.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from compilation_bridge import settings
from compilation_bridge.settings import FALSE_WORDS, TRUE_WORDS, env_flag, env_int

log = logging.getLogger("compilation_bridge.transport")

DEFAULT_HOST = "localhost"  # grpc binds 127.0.0.1 and ::1 on one port: Snakepit dials localhost over IPv4
MAX_PORT = 65535
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_CONCURRENT_CALLS = 8
DEFAULT_MAX_SESSION_CALLS = 4  # half the worker's calls: one greedy session leaves the others room
DEFAULT_MAX_REFLECTION_STREAMS = 2
DEFAULT_STREAM_IDLE_S = 30.0


@dataclass(frozen=True)
class HeartbeatConfig:
    """Python -> Elixir heartbeat (docs/wire.md#heartbeat): if dependent, repeated misses stop the worker."""

    enabled: bool = True
    interval_ms: int = 2000
    timeout_ms: int = 10000
    max_missed_heartbeats: int = 3
    initial_delay_ms: int = 0
    dependent: bool = True


@dataclass(frozen=True)
class ServeOptions:
    port: int = 0
    host: str = DEFAULT_HOST
    elixir_address: str | None = None
    adapter: str | None = None
    run_id: str | None = None
    instance_name: str | None = None
    platform: str | None = None
    ready_file: str | None = None
    process_group: bool = False
    health_check: bool = False
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_concurrent_calls: int = DEFAULT_MAX_CONCURRENT_CALLS
    max_session_calls: int = DEFAULT_MAX_SESSION_CALLS
    reflection: bool = False
    max_reflection_streams: int = DEFAULT_MAX_REFLECTION_STREAMS
    stream_idle_s: float = DEFAULT_STREAM_IDLE_S
    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)
    ignored: tuple[str, ...] = ()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--adapter", help="accepted for Snakepit compatibility; never imported")
    parser.add_argument("--port", type=_port_number, default=0, help="port to bind (0: the OS picks one)")
    parser.add_argument(
        "--host",
        default=None,
        help="address to bind (default: localhost, i.e. loopback only; env COMPILATION_BRIDGE_HOST)",
    )
    parser.add_argument("--elixir-address", help="host:port of Snakepit's BridgeServer (heartbeats)")
    parser.add_argument("--snakepit-run-id", "--run-id", dest="run_id")
    parser.add_argument("--snakepit-instance-name", dest="instance_name")
    parser.add_argument("--snakepit-instance-token", dest="instance_token")
    parser.add_argument("--platform", choices=("cpu", "cuda"), help="sets COMPILATION_BRIDGE_PLATFORM")
    parser.add_argument(
        "--ready-file",
        type=_ready_file,
        help="where to write the bound port (default: $SNAKEPIT_READY_FILE); its folder must exist",
    )
    parser.add_argument("--health-check", action="store_true", help="check the worker can start; exit 0/1")
    parser.add_argument("--heartbeat-enabled", dest="hb_enabled", type=_on_or_off, default=None)
    parser.add_argument("--heartbeat-interval-ms", dest="hb_interval_ms", type=int, default=None)
    parser.add_argument("--heartbeat-timeout-ms", dest="hb_timeout_ms", type=int, default=None)
    parser.add_argument("--heartbeat-max-missed", dest="hb_max_missed", type=int, default=None)
    parser.add_argument("--heartbeat-initial-delay-ms", dest="hb_initial_delay_ms", type=int, default=None)
    parser.add_argument("--heartbeat-dependent", dest="hb_dependent", action="store_const", const=True)
    parser.add_argument("--heartbeat-independent", dest="hb_dependent", action="store_const", const=False)


def _port_number(text: str) -> int:
    # The OS would take 99999 modulo 65536 and serve somewhere nobody asked for.
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to {MAX_PORT}, got {text!r}")
    return port


def _ready_file(text: str) -> str:
    # Checked at parsing: the file is written only once the worker serves, too late for a usage error.
    folder = os.path.dirname(os.path.abspath(os.path.expanduser(text))) if text else ""
    if not text or os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"expected a file name, got {text!r}")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"the folder {folder!r} does not exist (create it first)")
    return text


def _on_or_off(text: str) -> bool:
    # Not `is_true`: there, `maybe` is quietly off; a flag a person typed is refused instead.
    word = text.strip().lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise argparse.ArgumentTypeError(f"expected true or false (also 1/0, yes/no, on/off), got {text!r}")


def beyond_loopback(host: str) -> bool:
    """Whether binding `host` may let other machines reach the worker (a name is not known to be loopback)."""
    bare = host.strip().strip("[]").lower()
    if bare == DEFAULT_HOST:
        return False
    try:
        return not ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return True


def parse(argv: Sequence[str], env: dict[str, str] | None = None) -> ServeOptions:
    parser = argparse.ArgumentParser(prog="grpc_server.py", add_help=True)
    add_arguments(parser)
    args, unknown = parser.parse_known_args(list(argv))
    return from_namespace(args, unknown, env)


def from_namespace(
    args: argparse.Namespace, unknown: Sequence[str] = (), env: dict[str, str] | None = None
) -> ServeOptions:
    env = dict(os.environ) if env is None else env
    return ServeOptions(
        port=args.port,
        host=args.host or env.get(settings.HOST_ENV) or DEFAULT_HOST,
        elixir_address=args.elixir_address
        or env.get(settings.GRPC_ADDRESS_ENV)
        or env.get(settings.ELIXIR_ADDRESS_ENV),
        adapter=args.adapter,
        run_id=args.run_id,
        instance_name=args.instance_name,
        platform=args.platform,
        ready_file=args.ready_file or env.get(settings.READY_FILE_ENV),
        process_group=env_flag(settings.PROCESS_GROUP_ENV, env),
        health_check=args.health_check,
        max_request_bytes=env_int(settings.MAX_REQUEST_BYTES_ENV, DEFAULT_MAX_REQUEST_BYTES, env=env),
        max_concurrent_calls=env_int(
            settings.MAX_CONCURRENT_CALLS_ENV, DEFAULT_MAX_CONCURRENT_CALLS, env=env
        ),
        max_session_calls=env_int(settings.MAX_SESSION_CALLS_ENV, DEFAULT_MAX_SESSION_CALLS, env=env),
        reflection=env_flag(settings.REFLECTION_ENV, env),
        max_reflection_streams=env_int(
            settings.MAX_REFLECTION_STREAMS_ENV, DEFAULT_MAX_REFLECTION_STREAMS, env=env
        ),
        stream_idle_s=float(env_int(settings.STREAM_IDLE_SECONDS_ENV, int(DEFAULT_STREAM_IDLE_S), env=env)),
        heartbeat=_heartbeat_config(args, env),
        ignored=tuple(unknown),
    )


def _heartbeat_config(args: argparse.Namespace, env: dict[str, str]) -> HeartbeatConfig:
    # CLI flags first, then the env JSON on top (the reference merges CLI values *under* the env).
    values: dict[str, object] = {}
    for key, attr in (
        ("enabled", "hb_enabled"),
        ("interval_ms", "hb_interval_ms"),
        ("timeout_ms", "hb_timeout_ms"),
        ("max_missed_heartbeats", "hb_max_missed"),
        ("initial_delay_ms", "hb_initial_delay_ms"),
        ("dependent", "hb_dependent"),
    ):
        if getattr(args, attr, None) is not None:
            values[key] = getattr(args, attr)
    raw = env.get(settings.HEARTBEAT_CONFIG_ENV)
    if raw:
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
            log.warning("ignoring %s: not JSON", settings.HEARTBEAT_CONFIG_ENV)
        if isinstance(parsed, dict):
            values.update({k: v for k, v in parsed.items() if k in HeartbeatConfig.__dataclass_fields__})
    defaults = HeartbeatConfig()

    def number(key: str, least: int) -> int:
        value = values.get(key, getattr(defaults, key))
        if not isinstance(value, int | float | str):
            raise TypeError(f"{key} must be a number")
        return max(least, int(value))

    try:
        return HeartbeatConfig(
            enabled=bool(values.get("enabled", defaults.enabled)),
            interval_ms=number("interval_ms", 10),
            timeout_ms=number("timeout_ms", 10),
            max_missed_heartbeats=number("max_missed_heartbeats", 1),
            initial_delay_ms=number("initial_delay_ms", 0),
            dependent=bool(values.get("dependent", defaults.dependent)),
        )
    except (TypeError, ValueError):
        log.warning("ignoring malformed heartbeat settings %r", values)
        return defaults
