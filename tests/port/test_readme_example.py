"""docs/port.md's example is what the worker speaks: its client runs, its request bytes are
a valid frame, and the worker's reply to them has the bytes shown (up to the random ref id)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import msgpack
from tests.port.conftest import PortProcess

from compilation_bridge.transport.port import HEADER

SECTION = (Path(__file__).resolve().parents[2] / "docs" / "port.md").read_text()  # the port's manual


def code_blocks() -> list[tuple[str, str]]:
    return re.findall(r"^```(\w*)\n(.*?)^```$", SECTION, re.M | re.S)


def hexdump_bytes(dump: str) -> bytes:
    """The bytes of an `offset  hex bytes  text` dump."""
    return bytes.fromhex("".join(line[10:58] for line in dump.splitlines()))


def test_the_python_client_runs() -> None:
    [(_, client)] = [block for block in code_blocks() if block[0] == "python"]
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    env["SNAKEPIT_LOG_LEVEL"] = "warning"
    command = [sys.executable, "-c", client]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"\{'id': 2, 'ok': True, 'result': '[0-9a-f]{64}'\}\n", done.stdout), done.stdout


def test_the_request_bytes_get_the_reply_bytes_shown(port_process: PortProcess) -> None:
    request, reply = (hexdump_bytes(text) for lang, text in code_blocks() if lang == "")
    (size,) = HEADER.unpack(request[: HEADER.size])
    assert size == len(request) - HEADER.size
    shown = msgpack.unpackb(reply[HEADER.size :], raw=False)
    port_process.send_raw(request)
    got = port_process.receive()
    assert got["ok"] is True, got
    assert len(got["result"]["id"]) == len(shown["result"]["id"])
    assert got == {**shown, "result": {**shown["result"], "id": got["result"]["id"]}}
