"""The worker's lifetime owner: one object builds, starts and stops what a serving worker holds.

A transport (gRPC or the Erlang port) makes a `Worker`, serves its `dispatcher`, and calls `stop` when
told to end: the ref table then writes what waits for its store within the time left (journaling the
rest in the state folder for the next worker) and closes the store. Nothing accepted is lost at SIGTERM.
The observers the operator's settings ask for (OpenTelemetry) start with the worker and stop after it.
"""

from __future__ import annotations

import logging
import threading

from compilation_bridge.observability.readings import Readings
from compilation_bridge.observability.setup import Started, start_observers
from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.refs.limits import resident_bytes
from compilation_bridge.refs.setup import open_ref_table
from compilation_bridge.refs.table import RefTable
from compilation_bridge.settings import application_setting

log = logging.getLogger("compilation_bridge.worker")

FLUSH_TIMEOUT_S = 2.0  # of Snakepit's 6 s between SIGTERM and SIGKILL, what writing pending changes may take
OBSERVERS_STOP_S = 1.0  # then what delivering the last spans and metrics may take


class Worker:
    def __init__(
        self, application: str | None = None, run: str | None = None, refs: RefTable | None = None
    ) -> None:
        self.application = application or application_setting()
        self.refs = refs if refs is not None else open_ref_table(self.application, run)
        self.dispatcher = Dispatcher(refs=self.refs)
        self._stopped = threading.Lock()
        self._observers: list[Started] = []

    def start(self) -> None:
        self.refs.start()
        self._observers = start_observers(Readings(refs_held=self.refs.count, resident_bytes=resident_bytes))

    def stop(self, timeout_s: float = FLUSH_TIMEOUT_S) -> None:
        """Flush and close, once (a second signal while stopping waits for nothing)."""
        if not self._stopped.acquire(blocking=False):
            return
        try:
            self.refs.close(timeout_s)
        except Exception as exc:  # stopping must end the process whatever the store does
            log.error("closing the ref table failed: %s: %s", type(exc).__name__, exc)
        for observer in self._observers:  # after the refs: what callers accepted matters more
            observer.stop(OBSERVERS_STOP_S)
