"""Python -> Elixir heartbeat (docs/wire.md, Heartbeat): the worker's only protection against being orphaned.

Every interval it sends `Heartbeat{session_id, client_time}` to Snakepit's BridgeServer. Only failed
RPCs count as misses (`session_valid=false` does not, as in the reference). After `max_missed`
consecutive misses a dependent worker asks to stop (and exits 0, like the reference's self-SIGTERM);
an independent one only logs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import grpc

from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.options import HeartbeatConfig

log = logging.getLogger("compilation_bridge.transport.heartbeat")


class HeartbeatClient:
    def __init__(
        self,
        address: str,
        config: HeartbeatConfig,
        session_id: Callable[[], str],  # the worker's own session id ("" until Elixir initializes it)
        on_lost: Callable[[], None],
    ) -> None:
        self._address = address
        self._config = config
        self._session_id = session_id
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="elixir-heartbeat", daemon=True)
        self.missed = 0
        self._registered = ""  # the one session created in Elixir's store (the worker's own)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        config = self._config
        channel = grpc.insecure_channel(self._address)
        stub = pb_grpc.BridgeServiceStub(channel)
        try:
            if self._stop.wait(config.initial_delay_ms / 1000):
                return
            while not self._stop.is_set():
                self._beat(stub)
                if self.missed >= config.max_missed_heartbeats:
                    self._lost()
                    if config.dependent:
                        return
                if self._stop.wait(config.interval_ms / 1000):
                    return
        finally:
            channel.close()

    def _register(self, stub: pb_grpc.BridgeServiceStub, session_id: str) -> None:
        """Create the worker's own session in Elixir's SessionStore once, as the reference's
        InitializeSession proxy does, so that Elixir answers this worker's heartbeats with
        session_valid=true. Best effort. Callers' session ids never reach Elixir from here."""
        if not session_id or session_id == self._registered:
            return
        self._registered = session_id
        try:
            stub.InitializeSession(
                pb.InitializeSessionRequest(session_id=session_id), timeout=self._config.timeout_ms / 1000
            )
        except grpc.RpcError as exc:
            log.debug("InitializeSession %s at %s: %s", session_id, self._address, exc)

    def _beat(self, stub: pb_grpc.BridgeServiceStub) -> None:
        session_id = self._session_id()
        self._register(stub, session_id)
        request = pb.HeartbeatRequest(session_id=session_id)
        request.client_time.FromNanoseconds(time.time_ns())
        try:
            stub.Heartbeat(request, timeout=self._config.timeout_ms / 1000)
        except grpc.RpcError as exc:
            self.missed += 1
            log.warning(
                "heartbeat to %s failed (%d/%d): %s",
                self._address,
                self.missed,
                self._config.max_missed_heartbeats,
                exc.code() if hasattr(exc, "code") else exc,
            )
            return
        self.missed = 0

    def _lost(self) -> None:
        if self._config.dependent:
            log.error("Elixir at %s is gone after %d missed heartbeats: stopping", self._address, self.missed)
            self._on_lost()
        else:
            log.warning("Elixir at %s missed %d heartbeats (independent mode)", self._address, self.missed)
            self.missed = 0
