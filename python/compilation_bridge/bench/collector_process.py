"""An OTLP/HTTP collector on loopback as a process of its own (`sidecar`), as an operator runs one:
prints its endpoint once it serves, and, when its standard input closes, the number of spans received.

Usage: python -m compilation_bridge.bench.collector_process
"""

from __future__ import annotations

import sys

from compilation_bridge.testing.otlp_collector import Collector


def main() -> int:
    collector = Collector()
    try:
        print(collector.endpoint, flush=True)
        sys.stdin.read()  # until the benchmark closes it, its workers having delivered their last spans
        print(len(collector.spans()), flush=True)
    finally:
        collector.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
