"""Fixtures for the Erlang-port transport: an in-process server on byte buffers, and a real worker
process started as the Elixir stub starts it (`python -m compilation_bridge port`)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest

from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.testing.session import snakebridge_payload
from compilation_bridge.transport.port import HEADER, PortServer, encode_frame


def frames(data: bytes) -> list[dict[str, Any]]:
    """Split a byte stream of frames into decoded messages (and check that nothing else is in it)."""
    out: list[dict[str, Any]] = []
    while data:
        (size,) = HEADER.unpack(data[: HEADER.size])
        body, data = data[HEADER.size : HEADER.size + size], data[HEADER.size + size :]
        assert len(body) == size, "truncated frame on stdout"
        out.append(msgpack.unpackb(body, raw=False))
    return out


def call_payload(session: str = "S", **fields: Any) -> dict[str, Any]:
    """A SnakeBridge `snakebridge.call` payload for vllm.config (as SnakeBridge's runtime builds it)."""
    return {**snakebridge_payload(session), **fields}


def request(request_id: int, tool: str, payload: Any, session_id: str = "worker-session") -> bytes:
    return encode_frame({"id": request_id, "tool": tool, "payload": payload, "session_id": session_id})


def run_in_process(data: bytes, dispatcher: Dispatcher | None = None, **limits: int) -> tuple[int, list]:
    out = io.BytesIO()
    server = PortServer(dispatcher or Dispatcher(), io.BytesIO(data), out, **limits)
    status = server.serve()
    return status, frames(out.getvalue())


class PortProcess:
    """A worker on pipes, spoken to frame by frame."""

    def __init__(self, *extra: str) -> None:
        env = dict(os.environ, SNAKEPIT_LOG_LEVEL="warning")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "compilation_bridge", "port", *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.ready = self.receive()
        assert self.ready["event"] == "ready", self.ready

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        header = self.proc.stdout.read(HEADER.size)
        assert len(header) == HEADER.size, f"no frame (stderr: {self.stderr_tail()})"
        (size,) = HEADER.unpack(header)
        return msgpack.unpackb(self.proc.stdout.read(size), raw=False)

    def call(self, request_id: int, tool: str, payload: Any) -> dict[str, Any]:
        self.send_raw(request(request_id, tool, payload))
        return self.receive()

    def stderr_tail(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return "(running)"
        return self.proc.stderr.read().decode(errors="replace")[-2000:]

    def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def port_process() -> Iterator[PortProcess]:
    process = PortProcess()
    yield process
    process.close()
