"""A worker spawned and supervised exactly as Snakepit 0.13's GRPCWorker does it.

Argv, environment, cwd and ready file (docs/wire.md#launch-arguments, #environment, #ready-file), then
`Ping("connection_test")`, `InitializeSession` and a heartbeat every 2 s; `terminate` signals the process
group and escalates to SIGKILL after 6 s, as Snakepit does. When no Elixir address is given, a fake
Elixir side (`fake_elixir`) is started for the worker to call back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from compilation_bridge.testing.fake_elixir import ElixirBridgeServer
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc

SCRIPT = Path(__file__).resolve().parents[2] / "grpc_server.py"  # in a checkout: python/grpc_server.py
LAUNCHER = "from compilation_bridge.transport.launch import main\nraise SystemExit(main())\n"
SNAKEBRIDGE_ADAPTER = "snakebridge_adapter.SnakeBridgeAdapter"
HEARTBEAT_CONFIG = {
    "enabled": True,
    "interval_ms": 2000,
    "timeout_ms": 10000,
    "max_missed_heartbeats": 3,
    "initial_delay_ms": 0,
    "dependent": True,
}


def launch_script() -> Path:
    """python/grpc_server.py in a checkout; an equivalent script of the same name for an installed package."""
    if SCRIPT.exists():
        return SCRIPT
    script = Path(tempfile.mkdtemp(prefix="compilation_bridge_")) / "grpc_server.py"
    script.write_text(LAUNCHER)
    return script


def run_id() -> str:
    """Snakepit's 7-character base36 run id (5 time characters + 2 counter characters): one per BEAM, so
    one per harness process (`BEAM_RUN_ID`); a test that plays a restarted BEAM makes another."""
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    n, chars = int(time.time() * 1000), []
    for _ in range(7):
        n, r = divmod(n, 36)
        chars.append(alphabet[r])
    return "".join(reversed(chars))


BEAM_RUN_ID = run_id()


def snakepit_env(ready_file: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # Each test worker gets its own ref store unless the test shares one on purpose: quotas count
    # everything a store holds.
    env.setdefault("COMPILATION_BRIDGE_STATE_DIR", os.path.join(os.path.dirname(ready_file), "state"))
    env.update(
        {
            "SNAKEPIT_READY_FILE": ready_file,
            "SNAKEPIT_HEARTBEAT_CONFIG": json.dumps(HEARTBEAT_CONFIG),
            "SNAKEPIT_LOG_LEVEL": env.get("SNAKEPIT_LOG_LEVEL", "error"),
            "SNAKEPIT_PYTHON": sys.executable,
            "SNAKEPIT_PROCESS_GROUP": "1",
            "PYTHONNOUSERSITE": "1",
            "GRPC_POLL_STRATEGY": "poll",
            **{k: "1" for k in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")},
            **{k: "1" for k in ("NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")},
        }
    )
    env.update(extra or {})
    return env


@dataclass
class HeartbeatStats:
    latencies_s: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def host_env(root: Path, ref_store: str) -> dict[str, str]:
    """The environment of a worker on a host of its own under `root` (made 0700): its own state
    folder, user cache and Inductor cache, on the ref store `ref_store` (e.g. a shared Redis)."""
    root.mkdir(mode=0o700, exist_ok=True)
    return {
        "COMPILATION_BRIDGE_REF_STORE": ref_store,
        "COMPILATION_BRIDGE_STATE_DIR": str(root / "state"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "COMPILATION_BRIDGE_ALLOWED_ROOTS": str(root),
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
    }


class WorkerProcess:
    """One worker, spawned and supervised the way Snakepit's GRPCWorker does it."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, session_id: str, log_path: str) -> None:
        self.process = process
        self.port = port
        self.session_id = session_id  # the GRPCWorker's own session ("session_<n>_<µs>")
        self.log_path = log_path
        self.channel = grpc.insecure_channel(f"localhost:{port}")
        self.stub = pb_grpc.BridgeServiceStub(self.channel)
        self.heartbeats = HeartbeatStats()
        self._stop_heartbeats = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        self.ready_after_s = 0.0
        self.elixir: ElixirBridgeServer | None = None  # Snakepit's side, when spawn started one

    @classmethod
    def spawn(
        cls,
        *,
        python: str = sys.executable,
        script: Path | None = None,
        elixir_address: str | None = None,
        extra_args: Sequence[str] = (),
        extra_env: dict[str, str] | None = None,
        heartbeat_interval_s: float | None = 2.0,
        ready_timeout_s: float = 30.0,
        run: str | None = None,
    ) -> WorkerProcess:
        script = script or launch_script()
        elixir = ElixirBridgeServer() if elixir_address is None else None
        elixir_address = elixir.address if elixir is not None else str(elixir_address)
        tmp = tempfile.mkdtemp(prefix="snakepit_")
        ready_file = os.path.join(tmp, f"snakepit_ready_default_worker_1_{time.monotonic_ns()}")
        log_path = os.path.join(tmp, "worker.log")
        argv = [
            python,
            str(script),
            "--adapter",
            SNAKEBRIDGE_ADAPTER,
            *extra_args,
            "--port",
            "0",
            "--elixir-address",
            elixir_address,
            "--snakepit-run-id",
            run or BEAM_RUN_ID,
            "--snakepit-instance-name",
            "test_compilation_bridge_nonode_nohost",
        ]
        started = time.monotonic()
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                argv,
                cwd=str(Path(script).parent),
                env=snakepit_env(ready_file, extra_env),
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        port = wait_ready(process, ready_file, ready_timeout_s)
        worker = cls(
            process, port, f"session_{time.monotonic_ns() % 10000}_{time.time_ns() // 1000}", log_path
        )
        worker.ready_after_s = time.monotonic() - started
        worker.connect()
        if heartbeat_interval_s:
            worker.start_heartbeats(heartbeat_interval_s)
        return worker

    def connect(self) -> None:
        """Snakepit's init_grpc_connection + complete_worker_initialization."""
        delay = 0.05
        for attempt in range(5):
            try:
                self.stub.Ping(pb.PingRequest(message="connection_test"), timeout=5)
                break
            except grpc.RpcError:
                if attempt == 4:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
        request = pb.InitializeSessionRequest(
            session_id=self.session_id,
            metadata={"elixir_node": "nonode@nohost", "initialized_at": time.strftime("%Y-%m-%dT%H:%M:%SZ")},
            config=pb.SessionConfig(enable_caching=True, cache_ttl_seconds=60, enable_telemetry=False),
        )
        self.stub.InitializeSession(request, timeout=5)

    def start_heartbeats(self, interval_s: float) -> None:
        def beat() -> None:
            while not self._stop_heartbeats.wait(interval_s):
                self.heartbeat_once()

        self._heartbeat_thread = threading.Thread(target=beat, name="heartbeat-monitor", daemon=True)
        self._heartbeat_thread.start()

    def heartbeat_once(self, timeout_s: float = 10.0) -> float:
        started = time.perf_counter()
        try:
            response = self.stub.Heartbeat(pb.HeartbeatRequest(session_id=self.session_id), timeout=timeout_s)
        except grpc.RpcError as exc:
            self.heartbeats.failures.append(str(exc.code()))
            return -1.0
        elapsed = time.perf_counter() - started
        if not response.session_valid:
            self.heartbeats.failures.append("session_valid=false")
        self.heartbeats.latencies_s.append(elapsed)
        return elapsed

    def rss_kib(self) -> int:
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def terminate(self, sig: int = signal.SIGTERM, timeout_s: float = 6.0) -> tuple[int, float]:
        """Snakepit's terminate: signal the process group, wait up to 6 s, then SIGKILL."""
        self._stop_heartbeats.set()
        started = time.monotonic()
        if self.process.poll() is None:
            try:
                os.killpg(os.getpgid(self.process.pid), sig)
            except (ProcessLookupError, PermissionError):
                self.process.send_signal(sig)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        elapsed = time.monotonic() - started
        self.channel.close()  # after the exit: in-flight calls must not be cancelled by the client first
        if self.elixir is not None:
            self.elixir.stop()
        return self.process.returncode, elapsed

    def log_text(self) -> str:
        return Path(self.log_path).read_text(errors="replace")


def wait_ready(process: subprocess.Popen[bytes], ready_file: str, timeout_s: float) -> int:
    """The port a process wrote to its ready file (the file is then removed), as Snakepit waits for it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"worker exited with status {process.returncode} before it was ready")
        try:
            text = Path(ready_file).read_text().strip()
        except FileNotFoundError:
            text = ""
        if text.isdigit():
            os.unlink(ready_file)
            return int(text)
        time.sleep(0.005)
    process.kill()
    raise TimeoutError(f"worker not ready after {timeout_s} s")
