"""Process lifecycle of the gRPC worker: bind, serve, signal readiness, stop on SIGTERM/SIGINT.

Order (docs/wire.md#ready-file): setsid (if asked) -> bind -> start -> ready file -> serve. Tool work
runs on the gRPC server's threads, behind a cap that leaves threads free for Ping/Heartbeat. On
SIGTERM or SIGINT the server stops accepting calls, gives those in flight `DRAIN_S` to finish, and the
`Worker` writes what waits for the ref store (or journals it); the process then exits 0 well within
Snakepit's 6 s, even if a tool (a long compile) is still running: Python cannot interrupt that thread,
so the process ends with os._exit.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc

from compilation_bridge.observability import hub
from compilation_bridge.observability.telemetry_stream import TelemetryStream
from compilation_bridge.observability.tool_telemetry import ToolTelemetry
from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.settings import application_setting, preload_compile_wanted
from compilation_bridge.surface.catalog import warm_up
from compilation_bridge.transport.correlation import CorrelationInterceptor
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.heartbeat import HeartbeatClient
from compilation_bridge.transport.options import ServeOptions
from compilation_bridge.transport.peers import peer_interceptors
from compilation_bridge.transport.readyfile import withdraw_ready_file, write_ready_file
from compilation_bridge.transport.reflection import add_reflection
from compilation_bridge.transport.servicer import MAX_TELEMETRY_STREAMS, BridgeServicer
from compilation_bridge.worker import Worker

log = logging.getLogger("compilation_bridge.transport")

SERVICE_NAME = "snakepit.bridge.BridgeService"
SERVICE_NAMES = (SERVICE_NAME, "grpc.health.v1.Health")  # what reflection lists, when enabled
STOP_GRACE_S = 0.5
DRAIN_S = 2.0  # at SIGTERM, how long calls in flight may take to finish before they are cancelled
# Threads beyond the tool cap and the long-lived streams' caps, always free for Ping, Heartbeat and the
# session RPCs (all short): no number of open streams or running tools can take them.
SPARE_THREADS = 8
# What grpc binds for "localhost" (both, when the host has IPv6).
LOOPBACK_ADDRESSES = ("127.0.0.1", "::1")
# New servers tried when the port the kernel picked on one loopback address is another's on the next.
BIND_ATTEMPTS = 8


@dataclass
class RunningServer:
    server: grpc.Server
    port: int
    servicer: BridgeServicer

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        self.server.stop(grace).wait(grace + 0.5)


def build_server(
    options: ServeOptions, dispatcher: Dispatcher | None = None, telemetry: TelemetryStream | None = None
) -> RunningServer:
    """Create, bind and start the server (no signals, no ready file: the caller owns the process).
    StreamTelemetry sends what reaches `telemetry` (a stream of its own when none is given); no observer
    is registered here, so a server built in a test observes nothing unless the test asks."""
    dispatcher = dispatcher or Dispatcher()
    transport_limit = options.max_request_bytes + 1024 * 1024  # the servicer reports the precise error
    response_limit = 64 * 1024 * 1024
    servicer = BridgeServicer(
        dispatcher,
        options.max_request_bytes,
        response_limit,
        options.max_concurrent_calls,
        options.max_session_calls,
        telemetry,
    )
    # Every RPC that can last (tools, streaming tools, telemetry, reflection) is capped on its own; the
    # pool holds all those caps plus the spare threads, so the control path never waits for a thread.
    reflection_streams = options.max_reflection_streams if options.reflection else 0
    threads = options.max_concurrent_calls + MAX_TELEMETRY_STREAMS + reflection_streams + SPARE_THREADS

    def new_server() -> grpc.Server:
        server = grpc.server(
            ThreadPoolExecutor(max_workers=threads, thread_name_prefix="bridge"),
            # Every RPC (health and reflection included) answers only the worker's own user (peers.py);
            # then each tool call's log lines carry its correlation id (correlation.py).
            interceptors=[*peer_interceptors(options.host), CorrelationInterceptor()],
            options=[
                ("grpc.max_receive_message_length", transport_limit),
                ("grpc.max_send_message_length", response_limit),
                ("grpc.so_reuseport", 0),
            ],
        )
        pb_grpc.add_BridgeServiceServicer_to_server(servicer, server)
        _add_health(server)
        if options.reflection:
            add_reflection(server, SERVICE_NAMES, options.max_reflection_streams, options.stream_idle_s)
        return server

    server, port = bind_server(new_server, options.host, options.port)
    server.start()
    return RunningServer(server, port, servicer)


def bind_server(new_server: Callable[[], grpc.Server], host: str, port: int) -> tuple[grpc.Server, int]:
    """A server from `new_server()` bound to `host:port`, and its port. Port 0 on localhost is the kernel's
    pick on the first loopback address, which another process may hold on the next: then a new server
    tries again (grpc cannot unbind a port), and the last failure is the error."""
    attempts = BIND_ATTEMPTS if host == "localhost" and port == 0 else 1
    for attempt in range(1, attempts + 1):
        server = new_server()
        try:
            return server, _bind(server, host, port)
        except OSError:
            server.stop(None)
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _bind(server: grpc.Server, host: str, port: int) -> int:
    """Bind `host:port` and return the port; raise OSError naming the address that could not be bound."""
    if host != "localhost":
        return _add_port(server, host, port)
    # grpc serves "localhost:N" on whichever loopback addresses it could bind and only logs the rest:
    # with 127.0.0.1:N taken it would serve on ::1 alone while IPv4 clients reach the other process.
    # So bind each loopback address this host has, one by one, and fail if any is taken; port 0 is
    # whatever the first one got.
    addresses = _loopback_addresses()
    if not addresses:
        raise OSError("cannot listen on localhost: this host has no loopback address")
    first, *others = addresses
    port = _add_port(server, first, port)
    for address in others:
        _add_port(server, address, port)
    return port


def _add_port(server: grpc.Server, host: str, port: int) -> int:
    try:
        bound = server.add_insecure_port(f"{_host_for_bind(host)}:{port}")
    except RuntimeError:  # recent grpcio raises where older releases returned 0
        bound = 0
    if bound == 0:
        error = _bind_error(host, port)
        reason = error.strerror if error is not None and error.strerror else "grpc could not bind it"
        raise OSError(f"cannot listen on {_host_for_bind(host)}:{port}: {reason}")
    return bound


def _loopback_addresses() -> list[str]:
    """The loopback addresses this host has (a container may have no IPv6 at all)."""
    return [address for address in LOOPBACK_ADDRESSES if _bind_error(address, 0) is None]


def _bind_error(host: str, port: int) -> OSError | None:
    """Why binding host:port fails now, or None (a probe, to explain grpc's bare failure)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as grpc: TIME_WAIT is no conflict
            probe.bind((host, port))
    except OSError as e:
        return e
    return None


def _host_for_bind(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _add_health(server: grpc.Server) -> None:
    # Watch streams do not hold a thread: grpc_health answers them from callbacks (its non-blocking mode).
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    health_servicer = health.HealthServicer()
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    assert pb.DESCRIPTOR.services_by_name["BridgeService"].full_name == SERVICE_NAME


def serve(options: ServeOptions) -> int:
    """Run the worker until SIGTERM/SIGINT (or, in dependent mode, until Elixir is gone). Never returns
    normally once serving: the process exits with os._exit (see module docstring)."""
    if options.process_group:
        _setsid()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        worker = Worker(application_setting(options.instance_name), options.run_id)
        dispatcher = worker.dispatcher
        running = build_server(options, dispatcher)
        # Every gRPC worker sends Snakepit's tool events, as Snakepit's own server lets its tools do;
        # those of the calls before Elixir opens the stream wait for it.
        hub.add(ToolTelemetry(running.servicer.telemetry))
    except Exception as exc:
        log.error("cannot start: %s", exc)
        return 1
    worker.start()
    if options.ready_file and not _ready(options.ready_file, running.port):
        running.stop(0)
        worker.stop()
        return 1
    log.info("serving on %s:%d (pid %d, run id %s)", options.host, running.port, os.getpid(), options.run_id)
    heartbeat = _start_heartbeat(options, running.servicer, stop)
    # After readiness, so Snakepit's start-up is not held up by imports the first call would pay for.
    warm = functools.partial(warm_up, dispatcher.surface, compile_stack=preload_compile_wanted())
    threading.Thread(target=warm, name="warm-up", daemon=True).start()
    while not stop.wait(0.05):
        pass
    log.info("stopping")
    if heartbeat is not None:
        heartbeat.stop()
    running.stop(DRAIN_S)  # new calls are refused at once; those in flight get DRAIN_S to finish
    worker.stop()  # then what they accepted is written (or journaled) and the store closed
    if options.ready_file:
        withdraw_ready_file(options.ready_file, running.port)
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)


def _ready(path: str, port: int) -> bool:
    """Write the ready file; a path that cannot be written is one error line, not a traceback."""
    try:
        write_ready_file(path, port)
    except OSError as exc:
        log.error("cannot start: cannot write the ready file %s: %s", path, exc.strerror or exc)
        return False
    return True


def _setsid() -> None:
    # Fails only when already a process group leader (e.g. started by a shell with job control).
    with contextlib.suppress(OSError):
        os.setsid()


def _start_heartbeat(
    options: ServeOptions, servicer: BridgeServicer, stop: threading.Event
) -> HeartbeatClient | None:
    if not options.elixir_address or not options.heartbeat.enabled:
        return None
    client = HeartbeatClient(
        options.elixir_address, options.heartbeat, lambda: servicer.worker_session_id, stop.set
    )
    client.start()
    return client
