"""Call spans built and exported in a process of their own.

OpenTelemetry's Python SDK spends tens of microseconds of CPU on each call span (building it, encoding
it as OTLP protobuf, sending it), and in the worker's process that work takes the interpreter lock from
the calls being answered. So the recorder (`otel_recorder`) sends each batch of sampled calls, as plain
records (`otel_spans`), down a pipe to a child process, which builds their spans and exports them as
the worker would have: the worker's cost per call is packing its record.

The pipe carries msgpack objects: first a hello (the worker's resource and instrumentation scope, so that
the spans say they come from the worker), then lists of records. The child reads what to export to from
the settings it inherits with the environment, writes one line on its stdout once it is ready (a pipe of
the worker's, never the worker's own stdout: a port worker's frames travel there) and prints console spans
on stderr, which it shares with the worker. It ignores SIGTERM and SIGINT, which reach it with the
worker's process group, and ends when its stdin closes (the worker stopping, or dying), having exported
what it was sent.

The child is started on the recorder's thread with the first batch, not at start-up, where Snakepit waits
for the worker. A child that cannot start, or dies, is logged once, and from then on the worker builds the
spans itself (`otel_recorder.BuiltHere`), as before, so that nothing but what the child held is lost.
"""

from __future__ import annotations

import contextlib
import logging
import select
import signal
import subprocess
import sys
from typing import IO, Any

import msgpack

from compilation_bridge.observability import hub
from compilation_bridge.observability.otel_recorder import CallSpans
from compilation_bridge.observability.otel_spans import call_span, from_record, to_record

log = logging.getLogger("compilation_bridge.observability")

# -P: `-m` would put the working directory first on the child's path, and any package there (a
# `msgpack/` in the folder the worker was started from) would be imported in its place.
COMMAND = [sys.executable, "-P", "-m", __name__]
READY = b"ready\n"
START_TIMEOUT_S = 60.0  # importing OpenTelemetry on a busy machine
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a batch of MAX_BATCH calls is far less


class ShippedSpans:
    """Sends calls to the span export process (a `CallSpans`), else to `fallback`."""

    def __init__(self, hello: dict[str, Any], fallback: CallSpans) -> None:
        self._hello = hello
        self._fallback = fallback
        self.process: subprocess.Popen[bytes] | None = None  # once started
        self.failed = False

    def send(self, calls: list[hub.Call]) -> None:
        if not self.failed:
            try:
                self._write(msgpack.packb([to_record(call) for call in calls]))
                return
            except Exception as exc:
                self._give_up(exc)
        self._fallback.send(calls)

    def close(self, timeout_s: float) -> None:
        """Closes the child's stdin and waits up to `timeout_s` for it to export what it holds. One that
        takes longer (a slow collector) is left to finish: it ends by itself, within OpenTelemetry's
        export timeouts, even after the worker has gone."""
        process = self.process
        if process is None:
            return
        try:
            _pipe(process.stdin).close()
            process.wait(timeout_s)
        except OSError:
            pass  # it had died: `send` said so
        except subprocess.TimeoutExpired:
            log.info("the span export process is still delivering the last spans")
        finally:
            _pipe(process.stdout).close()

    def _write(self, message: bytes) -> None:
        if self.process is None:
            self.process = self._start()
        stdin = _pipe(self.process.stdin)
        stdin.write(message)
        stdin.flush()

    def _start(self) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            stdin, stdout = _pipe(process.stdin), _pipe(process.stdout)
            stdin.write(msgpack.packb(self._hello))
            stdin.flush()
            if not select.select([stdout], [], [], START_TIMEOUT_S)[0] or stdout.readline() != READY:
                raise RuntimeError(f"it did not say it was ready within {START_TIMEOUT_S:.0f} s")
        except Exception:
            process.kill()
            process.wait()
            raise
        log.info("OpenTelemetry: call spans built and exported by process %d", process.pid)
        return process

    def _give_up(self, exc: Exception) -> None:
        self.failed = True
        log.warning(
            "the span export process failed (%s: %s): call spans are built in the worker from now on",
            type(exc).__name__,
            exc,
        )
        if self.process is not None:
            self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(START_TIMEOUT_S)  # reaped: no zombie for the worker's lifetime


def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
    assert stream is not None, "started with pipes"
    return stream


def main() -> int:
    """The child: spans of the records on stdin, exported as the settings say, until stdin closes."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SynchronousMultiSpanProcessor
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    from compilation_bridge.observability.otel_exporters import span_exporters
    from compilation_bridge.settings import otel_settings

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)  # the worker's process group gets them; stdin's end ends it
    logging.basicConfig(level=logging.WARNING, format="span export process: %(levelname)s %(message)s")
    # Unbuffered: a buffered stream waits for a whole read_size of bytes before handing any over.
    stdin = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # noqa: SIM115 (the process's)
    messages = msgpack.Unpacker(stdin, max_buffer_size=MAX_MESSAGE_BYTES)
    hello = next(messages, None)
    wanted = otel_settings()
    if not isinstance(hello, dict) or wanted is None:
        return 1
    resource = Resource(hello["resource"], hello["schema_url"] or None)
    scope = InstrumentationScope(*hello["scope"])
    processors = SynchronousMultiSpanProcessor()
    for exporter in span_exporters(wanted, sys.stderr):
        processors.add_span_processor(BatchSpanProcessor(exporter))
    sys.stdout.buffer.write(READY)
    sys.stdout.flush()
    try:
        for records in messages:
            for record in records if isinstance(records, list) else ():
                try:
                    processors.on_end(call_span(from_record(record), resource, scope))
                except (TypeError, ValueError) as exc:  # not the worker's: nobody else writes here
                    logging.warning("a record that is not a call (%s)", exc)
    finally:
        processors.shutdown()  # exports what is queued
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
