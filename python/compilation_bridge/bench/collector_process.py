"""An OTLP/HTTP collector on loopback as a process of its own (`sidecar`), as an operator runs one:
prints its endpoint once it serves, and, when its standard input closes and no span has come for
`QUIET_S` (a worker's span export process may still be delivering the last ones after the worker has
stopped), the number of spans received.

Usage: python -m compilation_bridge.bench.collector_process
"""

from __future__ import annotations

import sys

from compilation_bridge.bench.sidecar import settled
from compilation_bridge.testing.otlp_collector import Collector

QUIET_S = 0.5
MAX_WAIT_S = 30.0


def main() -> int:
    collector = Collector()
    try:
        print(collector.endpoint, flush=True)
        sys.stdin.read()  # until the benchmark closes it, its workers having delivered their last spans
        print(settled(lambda: len(collector.spans()), QUIET_S, MAX_WAIT_S), flush=True)
    finally:
        collector.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
