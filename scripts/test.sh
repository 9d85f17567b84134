#!/usr/bin/env bash
# The project's whole test run, from nothing: venv, package, oracle, lint, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q torch==2.13.0            # the CPU wheel; an unpinned torch may pull a CUDA build
.venv/bin/pip install -q -e '.[test]'
bash scripts/setup_oracle.sh
.venv/bin/ruff check python tests
.venv/bin/ruff format --check python tests
PYTHONHASHSEED=0 .venv/bin/python -m pytest -q "$@"   # a fixed string hash: see tests/differential
bash scripts/elixir_test.sh
bash scripts/realclient_test.sh
