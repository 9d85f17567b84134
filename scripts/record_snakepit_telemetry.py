#!/usr/bin/env python3
"""Records what Snakepit's own Python server sends on StreamTelemetry, as the fixture this worker's
telemetry stream is tested against (tests/observability/recordings/snakepit_telemetry.json).

It starts Snakepit's `priv/python/grpc_server.py` with its showcase adapter, as Snakepit would (a ready
file, `--elixir-address` pointing at a fake of Elixir's BridgeServer, which that server pings before it
serves and tells about sessions and tools), opens StreamTelemetry as Snakepit's GrpcStream does, and runs
phases: each sends controls, calls the showcase's tools (`telemetry_demo` emits through Snakepit's
`telemetry.emit` and `telemetry.span`; `error_demo` fails), and keeps the events up to a fence (a call
made with every control reset, whose events close the phase). Volatile values (timestamps, durations,
correlation ids) are replaced by their kind.

Usage, from the repository root, with the project importable and Snakepit's Python requirements
(grpcio, protobuf; its showcase adapter also imports psutil) in the interpreter or on PYTHONPATH:

    PYTHONPATH=python python scripts/record_snakepit_telemetry.py <snakepit source folder> [--out FILE]

where the folder is Snakepit 0.13's package source, the one holding mix.exs and priv/python (for example
the deps/snakepit folder of a Mix project that uses Snakepit). It takes about fifteen seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc

from compilation_bridge.testing.fake_elixir import ElixirBridgeServer
from compilation_bridge.testing.telemetry_client import (
    Events,
    TelemetryClient,
    event_filter,
    event_name,
    sampling,
    toggle,
)
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc

OUT = Path(__file__).resolve().parents[1] / "tests/observability/recordings/snakepit_telemetry.json"
ADAPTER = "snakepit_bridge.adapters.showcase.ShowcaseAdapter"
CORRELATION_HEADER = "x-snakepit-correlation-id"
READY_S = 60.0
# Snakepit's server acknowledges no control: a control is read by a task of its own, apart from the
# calls. The only way to know one is in force before the next call is to give it time to arrive.
SETTLE_S = 0.5
RESET = [toggle(True), sampling(1.0), event_filter()]
BUFFER_CALLS = 260  # telemetry_demo emits 4 events: 1040, past the reference's buffer of 1024


class ElixirSide(ElixirBridgeServer):
    """Elixir's BridgeServer as far as Snakepit's server needs it: it also registers adapter tools."""

    def RegisterTools(
        self, request: pb.RegisterToolsRequest, context: grpc.ServicerContext
    ) -> pb.RegisterToolsResponse:
        names = {tool.name: f"elixir-{tool.name}" for tool in request.tools}
        return pb.RegisterToolsResponse(success=True, tool_ids=names)


class Recorder:
    """Snakepit's server, a channel to it, and the phases recorded so far."""

    def __init__(self, stub: pb_grpc.BridgeServiceStub) -> None:
        self.stub = stub
        self.phases: list[dict[str, Any]] = []
        self.stream: TelemetryClient | None = None
        self._fences = 0
        self._seen = 0  # events of the open stream that earlier phases took

    def call(self, tool: str, correlation: str | None, **arguments: Any) -> dict[str, Any]:
        parameters = {
            key: {
                "type_url": f"type.googleapis.com/snakepit.{_kind(value)}",
                "value": json.dumps(value).encode(),
            }
            for key, value in arguments.items()
        }
        request = pb.ExecuteToolRequest(session_id="record", tool_name=tool, parameters=parameters)
        metadata = [(CORRELATION_HEADER, correlation)] if correlation else None
        response = self.stub.ExecuteTool(request, metadata=metadata, timeout=30)
        return {"tool": tool, "arguments": arguments, "correlation": correlation, "success": response.success}

    def demo(
        self, correlation: str | None, operation: str = "compute", delay_ms: int = 0
    ) -> Callable[[], list[Any]]:
        """One call of the showcase's telemetry_demo, made when the phase calls it."""
        return lambda: [self.call("telemetry_demo", correlation, operation=operation, delay_ms=delay_ms)]

    def open(self, timeout: float | None = None) -> TelemetryClient:
        """A new stream, the previous one closed first (two open streams would share the events)."""
        if self.stream is not None:
            self.stream.close()
        self.stream = TelemetryClient(self.stub, timeout=timeout)
        self._seen = 0
        return self.stream

    def phase(self, name: str, controls: list[pb.TelemetryControl], calls: Callable[[], list[Any]]) -> None:
        """Sends `controls`, makes `calls`, resets the controls and records the events up to the fence."""
        assert self.stream is not None
        for control in controls:
            self.stream.send(control)
        if controls:
            time.sleep(SETTLE_S)
        made = calls()
        events = self.fence(controls != [])
        self.phases.append(
            {"phase": name, "controls": [_control(c) for c in controls], "calls": made, "events": events}
        )

    def fence(self, reset: bool) -> list[dict[str, Any]]:
        """The events before a fresh call's own, once all of them arrived."""
        assert self.stream is not None
        if reset:
            for control in RESET:
                self.stream.send(control)
            time.sleep(SETTLE_S)
        self._fences += 1
        fence = f"fence-{self._fences}"
        self.call("telemetry_demo", fence, operation=fence, delay_ms=0)
        events = self.stream.wait_for(lambda got: _fence_done(got[self._seen :], fence))
        mine = events[self._seen :]
        first = next(i for i, e in enumerate(mine) if e.correlation_id == fence)
        self._seen += len(mine)
        return [_shape(event) for event in mine[:first]]


def _fence_done(events: Events, fence: str) -> bool:
    return any(e.correlation_id == fence and event_name(e) == "tool.execution.stop" for e in events)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    return {int: "integer", float: "float", str: "string"}.get(type(value), "map")


def _value_kind(value: pb.TelemetryValue) -> str:
    return {"int_value": "int", "float_value": "float", "string_value": "string"}.get(
        str(value.WhichOneof("value")), "unset"
    )


def _correlation(value: str) -> str:
    """What the event carried: the call's own header, nothing, or an id the server made up."""
    if not value:
        return "<empty>"
    if value.startswith(("call-", "fence-", "before-", "closed-")):
        return value
    return "<generated uuid4 hex>" if re.fullmatch(r"[0-9a-f]{32}", value) else "<generated>"


def _shape(event: pb.TelemetryEvent) -> dict[str, Any]:
    return {
        "event": event_name(event),
        "event_parts": list(event.event_parts),
        "measurements": {key: _value_kind(event.measurements[key]) for key in sorted(event.measurements)},
        "metadata": {key: event.metadata[key] for key in sorted(event.metadata)},
        "timestamp_ns": "int" if event.timestamp_ns > 0 else "unset",
        "correlation_id": _correlation(event.correlation_id),
    }


def _control(control: pb.TelemetryControl) -> dict[str, Any]:
    which = control.WhichOneof("control")
    if which == "toggle":
        return {"toggle": control.toggle.enabled}
    if which == "sampling":
        return {"sampling": control.sampling.sampling_rate, "patterns": list(control.sampling.event_patterns)}
    return {"allow": list(control.filter.allow), "deny": list(control.filter.deny)}


@contextmanager
def snakepit_server(source: Path, elixir: str) -> Iterator[int]:
    """Snakepit's grpc_server.py, started as Snakepit starts it; yields its port."""
    python_dir = source / "priv" / "python"
    with tempfile.TemporaryDirectory() as folder:
        ready = Path(folder) / "ready"
        path = os.pathsep.join(filter(None, [str(python_dir), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path, "SNAKEPIT_READY_FILE": str(ready)}
        command = [sys.executable, "grpc_server.py", "--adapter", ADAPTER, "--port", "0"]
        command += ["--elixir-address", elixir, "--snakepit-run-id", "record-telemetry"]
        # Its OpenTelemetry spans go to stdout and its logs to stderr: neither is part of the recording.
        quiet = subprocess.DEVNULL
        process = subprocess.Popen(command, cwd=python_dir, env=env, stdout=quiet, stderr=quiet)
        try:
            yield _await_ready(ready, process)
        finally:
            process.terminate()
            process.wait(10)


def _await_ready(ready: Path, process: subprocess.Popen[bytes]) -> int:
    # Snakepit itself polls the ready file (every 50 ms); nothing else announces readiness.
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(
                f"Snakepit's server exited with {process.returncode}: are its requirements here?"
            )
        if ready.exists() and ready.read_text().strip():
            return int(ready.read_text())
        time.sleep(0.05)
    raise SystemExit("Snakepit's server did not become ready")


# (phase, controls, correlation id of the telemetry_demo call, its operation, its delay_ms)
DEMO_PHASES: list[tuple[str, list[pb.TelemetryControl], str | None, str, int]] = [
    ("a tool that succeeds", [], "call-ok", "compute", 0),
    ("a tool that raises inside its span", [], "call-raises", "raises", -1),  # time.sleep(-0.001)
    ("no correlation id in the request", [], None, "compute", 0),
    ("toggle off", [toggle(False)], "call-off", "compute", 0),
    ("deny tool.execution.*", [event_filter(deny=["tool.execution.*"])], "call-deny", "compute", 0),
    ("allow tool.execution.stop", [event_filter(allow=["tool.execution.stop"])], "call-allow", "compute", 0),
    (
        "allow and deny the same name: deny wins",
        [event_filter(allow=["tool.execution.stop"], deny=["tool.execution.stop"])],
        "call-both",
        "compute",
        0,
    ),
    (
        "allow tool.* and deny tool.result_size",
        [event_filter(allow=["tool.*"], deny=["tool.result_size"])],
        "call-mixed",
        "compute",
        0,
    ),
    ("sampling 0", [sampling(0.0)], "call-s0", "compute", 0),
    ("sampling 2.0 is clamped to 1", [sampling(2.0)], "call-s2", "compute", 0),
    ("sampling -1 is clamped to 0", [sampling(-1.0)], "call-sneg", "compute", 0),
    (
        "sampling 0 for python.*: the rate is for every event",
        [sampling(0.0, ["python.*"])],
        "call-sp",
        "x",
        0,
    ),
]


def record(recorder: Recorder) -> None:
    before = [recorder.call("telemetry_demo", "before-1", operation="before", delay_ms=0)]
    recorder.open()
    events = recorder.fence(False)
    recorder.phases.append(
        {"phase": "emitted before the stream opened", "controls": [], "calls": before, "events": events}
    )
    for name, controls, correlation, operation, delay_ms in DEMO_PHASES:
        recorder.phase(name, controls, recorder.demo(correlation, operation, delay_ms))

    def error_demo() -> list[Any]:
        return [recorder.call("error_demo", "call-error", error_type="value")]

    recorder.phase("a tool that fails without telemetry of its own", [], error_demo)
    _closed_stream(recorder)
    _buffer_bound(recorder)


def _closed_stream(recorder: Recorder) -> None:
    """The stream Snakepit 0.13 opens ends at its 5 s open timeout: what then becomes of events."""
    stream = recorder.open(timeout=1.0)
    code = stream.wait_ended(30)
    made = [recorder.call("telemetry_demo", "closed-1", operation="after the deadline", delay_ms=0)]
    recorder.open()
    recorder.phases.append(
        {
            "phase": "emitted after a stream opened with a 1 s deadline ended",
            "stream_ended_with": code.name,
            "controls": [],
            "calls": made,
            "events": recorder.fence(False),
        }
    )


def _buffer_bound(recorder: Recorder) -> None:
    """Events emitted while no stream is open are kept up to a bound, the newest dropped beyond it."""
    assert recorder.stream is not None
    recorder.stream.close()
    recorder.stream = None
    for index in range(BUFFER_CALLS):
        recorder.call("telemetry_demo", f"closed-{index + 2}", operation="buffer", delay_ms=0)
    # The fence must not meet a full buffer: wait until the stream has taken the buffered events over.
    recorder.open().wait_for(lambda got: len(got) > 0)
    events = recorder.fence(False)
    recorder.phases.append(
        {
            "phase": "many events while no stream is open",
            "calls": len(range(BUFFER_CALLS)),
            "events_emitted": 4 * BUFFER_CALLS,
            "events_delivered": len(events),
            "first_delivered": events[0]["correlation_id"],
            "last_delivered": events[-1]["correlation_id"],
        }
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("snakepit", type=Path, help="Snakepit's source folder (holds mix.exs, priv/python)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if not (args.snakepit / "priv" / "python" / "grpc_server.py").is_file():
        parser.error(f"{args.snakepit} is not Snakepit's source: it has no priv/python/grpc_server.py")
    version = re.search(r'@version "([^"]+)"', (args.snakepit / "mix.exs").read_text())
    elixir = ElixirSide()
    try:
        with (
            snakepit_server(args.snakepit, elixir.address) as port,
            grpc.insecure_channel(f"localhost:{port}") as channel,
        ):
            recorder = Recorder(pb_grpc.BridgeServiceStub(channel))
            recorder.stub.Ping(pb.PingRequest(message="connection_test"), timeout=10)
            record(recorder)
            if recorder.stream is not None:
                recorder.stream.close()
    finally:
        elixir.stop()
    recording = {
        "source": "Snakepit's priv/python/grpc_server.py with " + ADAPTER,
        "snakepit_version": version.group(1) if version else "unknown",
        "recorded_by": "scripts/record_snakepit_telemetry.py",
        "phases": recorder.phases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(recording, indent=1) + "\n")
    print(f"wrote {args.out}: {len(recorder.phases)} phases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
