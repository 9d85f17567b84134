"""The port worker as a real process: stdout carries frames only, bad input never loops or crashes."""

from __future__ import annotations

import signal
import struct
import subprocess
import sys

from tests.port.conftest import HEADER, PortProcess, call_payload, frames

from compilation_bridge.transport.port import EXIT_BAD_STREAM


def test_ready_then_a_call_then_eof_exits_zero(port_process: PortProcess) -> None:
    assert port_process.ready["frame_version"] == 1 and port_process.ready["pid"] == port_process.proc.pid
    payload = call_payload(
        "S", call_type="class", function="__init__", args=[None, None, None], **{"class": "CompilationConfig"}
    )
    reply = port_process.call(1, "snakebridge.call", payload)
    assert reply["ok"] is True and reply["result"]["type_name"] == "CompilationConfig"
    assert port_process.close() == 0


def test_garbage_gets_an_error_reply_and_the_worker_keeps_serving(port_process: PortProcess) -> None:
    port_process.send_raw(HEADER.pack(3) + b"\xc1\xc1\xc1")
    reply = port_process.receive()
    assert reply["id"] is None and reply["error"]["type"] == "FrameError"
    release = {"protocol_version": 1, "min_supported_version": 1, "session_id": "nobody"}
    assert port_process.call(2, "snakebridge.release_session", release) == {"id": 2, "ok": True, "result": 0}


def test_an_oversized_frame_ends_the_worker_with_status_3() -> None:
    process = PortProcess("--max-frame-bytes", "4096")
    process.send_raw(struct.pack(">I", 1 << 30))
    fatal = process.receive()
    assert fatal["event"] == "fatal" and "frame too large" in fatal["error"]["message"]
    assert process.proc.wait(timeout=10) == EXIT_BAD_STREAM


def test_sigterm_exits_zero(port_process: PortProcess) -> None:
    port_process.proc.send_signal(signal.SIGTERM)
    assert port_process.proc.wait(timeout=10) == 0


STRAY_OUTPUT = """
import os, sys
from compilation_bridge.transport.port import claim_stdio, encode_frame
inp, out = claim_stdio()
print("python-level noise")
os.write(1, b"fd-level noise\\n")
sys.stdout.flush()
out.write(encode_frame({"event": "ready"}))
out.flush()
"""


def test_stray_prints_go_to_stderr_not_into_the_frame_stream() -> None:
    done = subprocess.run([sys.executable, "-c", STRAY_OUTPUT], capture_output=True, timeout=30, check=True)
    assert frames(done.stdout) == [{"event": "ready"}]
    assert b"python-level noise" in done.stderr and b"fd-level noise" in done.stderr
