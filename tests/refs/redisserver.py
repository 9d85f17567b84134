"""A real `redis-server` on a loopback port, started and stopped by the tests themselves."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass

USER, PASSWORD = "bridge", "s3cret-for-tests"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class RedisServer:
    process: subprocess.Popen[bytes] | None
    port: int
    folder: str

    @property
    def url(self) -> str:
        return f"redis://{USER}:{PASSWORD}@127.0.0.1:{self.port}/0"

    @classmethod
    def start(cls, port: int | None = None) -> RedisServer:
        server = cls(None, port or free_port(), tempfile.mkdtemp(prefix="redis_"))
        server.resume()
        return server

    def resume(self) -> None:
        """(Re)start on the same port: the store 'comes back'."""
        argv = [
            shutil.which("redis-server") or "redis-server",
            "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.folder,
            "--save", "", "--appendonly", "yes", "--appendfsync", "always",  # survives a restart
            "--user", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all", "--requirepass", PASSWORD + "-default",
        ]  # fmt: skip
        # (Not "--user default off": Redis 7.0 then refuses its own AOF transactions on restart.)
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


def available() -> bool:
    return shutil.which("redis-server") is not None
