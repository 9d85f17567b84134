"""Snakepit's reader of a worker's telemetry stream, as a process of its own (`sidecar`).

Snakepit reads the stream in the BEAM, not in the process that makes the calls, so the observers
benchmark reads it here rather than on a thread of its own process, where every event received would
take the interpreter lock from the calls it times. Opens the stream to the worker on the port given,
enabled as Snakepit enables it, prints `open` once it is, and, when its standard input closes and the
stream has been quiet for `QUIET_S` (the worker sends in batches: the last calls' events are still
on their way), the number of events received.

Usage: python -m compilation_bridge.bench.stream_reader PORT
"""

from __future__ import annotations

import sys

import grpc

from compilation_bridge.bench.sidecar import settled
from compilation_bridge.observability.telemetry_stream import BATCH_S
from compilation_bridge.testing.telemetry_client import TelemetryClient
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc

OPEN = "open"
QUIET_S = 4 * BATCH_S


def main(argv: list[str]) -> int:
    port = int(argv[0])
    with grpc.insecure_channel(f"localhost:{port}") as channel:
        client = TelemetryClient(pb_grpc.BridgeServiceStub(channel))
        print(OPEN, flush=True)
        sys.stdin.read()  # until the benchmark closes it
        print(settled(lambda: len(client.events), QUIET_S), flush=True)
        client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
