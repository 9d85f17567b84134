"""The product side of the differential tests: the same request program, run against
``compilation_bridge.vllm_config`` with the same interpreter and encoding as the oracle server.

In-process by default (``run_product``). Run as a script it serves line-delimited JSON exactly like
``tests/oracle/oracle_server.py`` (``python runner.py cpu|cuda``), for a test process whose
``PYTHONHASHSEED`` is not 0: the order of ``compile_sizes`` after ``post_init_cudagraph_sizes()`` comes
from iterating a ``set`` that may hold a string, so both sides must hash strings alike.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

ORACLE_DIR = Path(__file__).resolve().parent.parent / "oracle"
if str(ORACLE_DIR) not in sys.path:
    sys.path.insert(0, str(ORACLE_DIR))

import program  # noqa: E402  (tests/oracle/program.py: the interpreter both sides share)


def product_api() -> dict[str, Any]:
    """The product's classes under vLLM's names. A name the product lacks is simply absent: a request
    that uses it then fails with ``KeyError`` on the product side only, which shows as a mismatch."""
    import compilation_bridge.vllm_config as product

    return program.api_from_module(product)


def set_product_platform(platform: str) -> None:
    from compilation_bridge.vllm_config.platforms import set_platform

    set_platform(platform)


def run_product(platform: str, req: Any) -> Any:
    """Runs one request (or a list) on `platform` and returns the answer as the oracle would send it:
    through the same JSON encoding, so tuples, dict keys and floats compare alike."""
    set_product_platform(platform)
    api = product_api()
    if isinstance(req, list):
        answer: Any = [program.execute(api, r) for r in req]
    else:
        answer = program.execute(api, req)
    return json.loads(json.dumps(answer, sort_keys=True))


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: runner.py cpu|cuda")
    if os.environ.get("PYTHONHASHSEED") != "0":
        raise SystemExit("runner.py must run with PYTHONHASHSEED=0")
    platform = sys.argv[1]
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if isinstance(req, dict) and req.get("ping"):
            answer: Any = {"pong": platform}
        else:
            try:
                answer = run_product(platform, req)
            except Exception as e:
                answer = {"harness_error": program.err(e), "traceback": traceback.format_exc()}
        out.write(json.dumps(answer, sort_keys=True) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
