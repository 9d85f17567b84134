"""The Erlang-port transport: SnakeBridge tool calls over stdin/stdout, one request at a time.

Frame format (both directions): a 4-byte big-endian unsigned length, then that many bytes of one
msgpack map (Erlang's `{:packet, 4}` port option produces and consumes exactly this).

- request  `{"id": int, "tool": str, "payload": map, "session_id": str (optional)}` -- `tool` and
  `payload` are what the gRPC path receives (same tool names, same SnakeBridge payload); `session_id` is
  the caller's worker-level session (Snakepit's `ExecuteToolRequest.session_id`), used only when the
  payload has none.
- reply    `{"id": int, "ok": true, "result": value}` or `{"id": int, "ok": false, "error": map}`; the
  error map is the JSON error payload of the gRPC path (`type`, `message`, `stacktrace`, `traceback`,
  `context`).
- stream   for tool `snakebridge.stream`: zero or more `{"id": int, "chunk": value}` frames, then the reply
  (`result` = the number of chunks).
- events   `{"event": "ready", "pid": int, "frame_version": 1, "max_frame_bytes": int}` once at start;
  `{"event": "fatal", "error": map}` just before exiting on a frame that cannot be skipped.

stdout carries frames only: fd 1 is moved to a private descriptor at start and the process's own fd 1
(and `sys.stdout`) point at stderr, so a stray print (ours, torch's, a C library's) lands in the log.
A frame that decodes badly gets an error reply and the loop continues (its length told us where it
ends); a length over the limit or a truncated frame cannot be resynchronised, so the worker reports it
and exits cleanly instead of reading garbage. There is no heartbeat: the port closing is the signal.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import struct
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import msgpack

from compilation_bridge.protocol.answer import encode_answer
from compilation_bridge.protocol.dispatch import STREAM_TOOL, Dispatcher, Reply
from compilation_bridge.protocol.errors import fallback_payload
from compilation_bridge.settings import preload_compile_wanted
from compilation_bridge.surface.catalog import warm_up
from compilation_bridge.worker import Worker

log = logging.getLogger("compilation_bridge.transport.port")

HEADER = struct.Struct(">I")
FRAME_VERSION = 1
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_REPLY_BYTES = 64 * 1024 * 1024
# Exit statuses the Elixir side can tell apart from a crash.
EXIT_OK = 0
EXIT_BAD_STREAM = 3


class FrameError(ValueError):
    """The input is not a valid frame; `fatal` when the stream cannot be resynchronised after it."""

    def __init__(self, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


class ClosedError(EOFError):
    """stdin closed at a frame boundary: the owner is gone, exit normally."""


@dataclass(frozen=True)
class Request:
    id: int | None
    tool: str
    payload: Any
    session_id: str


# ------------------------------------------------------------------------------------------ framing
def read_exact(stream: BinaryIO, size: int) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(stream: BinaryIO, max_bytes: int) -> bytes:
    header = read_exact(stream, HEADER.size)
    if not header:
        raise ClosedError()
    if len(header) < HEADER.size:
        raise FrameError("truncated frame header", fatal=True)
    (size,) = HEADER.unpack(header)
    if size > max_bytes:
        raise FrameError(f"frame too large: {size} bytes (limit {max_bytes})", fatal=True)
    body = read_exact(stream, size)
    if len(body) < size:
        raise FrameError(f"truncated frame: {len(body)} of {size} bytes", fatal=True)
    return body


def encode_frame(message: dict[str, Any]) -> bytes:
    return framed(encode_body(message))


def encode_body(message: dict[str, Any]) -> bytes:
    return msgpack.packb(message, use_bin_type=True)


def framed(body: bytes) -> bytes:
    return HEADER.pack(len(body)) + body


def decode_message(body: bytes) -> dict[str, Any]:
    try:
        message = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise FrameError(f"frame is not valid msgpack: {type(exc).__name__}: {exc}") from None
    if not isinstance(message, dict):
        raise FrameError(f"frame must be a msgpack map, not {type(message).__name__}")
    return message


def parse_request(message: dict[str, Any], default_session: str) -> Request:
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int):
        raise FrameError("frame needs an integer id")
    tool = message.get("tool")
    if not isinstance(tool, str):
        raise FrameError("frame needs a string tool")
    session = message.get("session_id") or default_session
    if not isinstance(session, str):
        raise FrameError("frame session_id must be a string")
    return Request(request_id, tool, message.get("payload"), session)


# ------------------------------------------------------------------------------------------ serving
class PortServer:
    """Reads request frames from `inp`, answers each through `dispatcher` on `out`, one at a time."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        inp: BinaryIO,
        out: BinaryIO,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        self.dispatcher = dispatcher
        self.inp = inp
        self.out = out
        self.max_frame_bytes = max_frame_bytes
        self.max_reply_bytes = max_reply_bytes
        self.default_session = f"port_{os.getpid()}"

    def send(self, message: dict[str, Any]) -> None:
        self.out.write(encode_frame(message))
        self.out.flush()

    def serve(self) -> int:
        """Serve until stdin closes (exit 0) or the input cannot be resynchronised (exit 3)."""
        self.warm_up()
        self.send(
            {
                "event": "ready",
                "pid": os.getpid(),
                "frame_version": FRAME_VERSION,
                "max_frame_bytes": self.max_frame_bytes,
            }
        )
        while True:
            try:
                body = read_frame(self.inp, self.max_frame_bytes)
            except ClosedError:
                return EXIT_OK
            except FrameError as exc:
                log.error("port input unreadable, exiting: %s", exc)
                self.send({"event": "fatal", "error": self._error(exc, "", None)})
                return EXIT_BAD_STREAM
            self.handle(body)

    def warm_up(self) -> None:
        """The configuration model before readiness is announced, so no call pays for it; with
        COMPILATION_BRIDGE_PRELOAD_COMPILE (as for the gRPC worker) the compile stack after, on a thread."""
        warm_up(self.dispatcher.surface)
        if preload_compile_wanted():
            warm = functools.partial(warm_up, self.dispatcher.surface, config_model=False, compile_stack=True)
            threading.Thread(target=warm, name="warm-up", daemon=True).start()

    def handle(self, body: bytes) -> None:
        message: dict[str, Any] = {}
        try:
            message = decode_message(body)
            request = parse_request(message, self.default_session)
        except FrameError as exc:
            request_id = message.get("id")
            request_id = (
                request_id if isinstance(request_id, int) and not isinstance(request_id, bool) else None
            )
            self.send({"id": request_id, "ok": False, "error": self._error(exc, "", None)})
            return
        try:
            self._answer(request)
        except OSError:
            raise  # stdout is gone: nobody can read a reply
        except Exception as exc:  # a failure while answering is still answered, and the loop goes on
            self.send({"id": request.id, "ok": False, "error": fallback_payload(exc)})

    def _answer(self, request: Request) -> None:
        if request.tool == STREAM_TOOL:
            self._stream(request)
        else:
            self._reply(request, self.dispatcher.execute(request.tool, request.payload, request.session_id))

    def _reply(self, request: Request, reply: Reply) -> None:
        self.out.write(self._packed(reply, request, lambda result: {"ok": True, "result": result}))
        self.out.flush()

    def _packed(self, reply: Reply, request: Request, success: Callable[[Any], dict[str, Any]]) -> bytes:
        """The frame of `reply` (`success` shapes a result's message), or of the error that says why
        its result cannot travel (too big, not msgpack)."""
        answer = encode_answer(
            reply,
            encode_result=lambda result: encode_body({"id": request.id, **success(result)}),
            encode_error=lambda error: encode_body({"id": request.id, "ok": False, "error": error}),
            max_bytes=self.max_reply_bytes,
            explain=lambda exc: self.dispatcher.error_reply(
                exc, request.tool, request.payload, request.session_id or self.default_session
            ),
        )
        return framed(answer.data)

    def _stream(self, request: Request) -> None:
        count = 0
        try:
            for item in self.dispatcher.stream(request.tool, request.payload, request.session_id):
                frame = self._packed(Reply(True, item), request, lambda chunk: {"chunk": chunk})
                self.out.write(frame)
                self.out.flush()
                count += 1
        except Exception as exc:
            error = self._error(exc, request.tool, request.payload, request.session_id)
            self.send({"id": request.id, "ok": False, "error": error})
            return
        self.send({"id": request.id, "ok": True, "result": count})

    def _error(self, exc: BaseException, tool: str, payload: Any, session: str | None = None) -> Any:
        reply = self.dispatcher.error_reply(exc, tool, payload, session or self.default_session)
        return reply.error


# ------------------------------------------------------------------------------------------ process
def claim_stdio() -> tuple[BinaryIO, BinaryIO]:
    """Private handles on the original stdin/stdout; fds 0 and 1 then point at /dev/null and stderr,
    so nothing but this transport can read requests or write into the frame stream."""
    inp = os.fdopen(os.dup(0), "rb", buffering=0)
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return inp, out


def _stop_on_sigterm(worker: Worker) -> None:
    def stop(signum: int, _frame: Any) -> None:
        # A long compile cannot be interrupted from Python; SIGTERM still ends the process at once, after
        # the worker wrote what waits for its store. On a thread of its own: the signal may arrive while
        # the main thread holds the ref table's lock.
        def stop_and_exit() -> None:
            worker.stop()
            logging.shutdown()
            os._exit(EXIT_OK)

        threading.Thread(target=stop_and_exit, name="stop", daemon=True).start()

    signal.signal(signal.SIGTERM, stop)


def run_port(max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, worker: Worker | None = None) -> int:
    inp, out = claim_stdio()
    # Ctrl-C in an interactive shell reaches the whole process group; the BEAM owns our lifetime.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker = worker or Worker()
    _stop_on_sigterm(worker)
    worker.start()
    server = PortServer(worker.dispatcher, inp, out, max_frame_bytes)
    try:
        return server.serve()
    except BrokenPipeError:
        return EXIT_OK  # the owner closed our stdout: nobody is listening any more
    finally:
        worker.stop()
