#!/usr/bin/env bash
# The project's whole test run, from nothing: venv, package, oracle, lint, tests, the Elixir suites.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "test: $*" >&2; }
bash scripts/setup_venv.sh test,otel   # otel: the OpenTelemetry tests run, not skip
step "the vLLM 0.14.0 oracle environment (.oracle-venv) for the differential tests"
bash scripts/setup_oracle.sh
step "lint: ruff; types: mypy"
.venv/bin/ruff check python tests integration
.venv/bin/ruff format --check python tests integration
.venv/bin/mypy   # settings in pyproject.toml
step "redis-server for the ref store's Redis tests (Debian's package, when missing)"
bash scripts/redis_for_tests.sh
step "the Python suite"
PYTHONHASHSEED=0 .venv/bin/python -m pytest -q "$@"   # a fixed string hash: see tests/differential
step "the Elixir stub's suite (elixir_stub/)"
bash scripts/elixir_test.sh
step "the real-client suite (integration/snakepit/)"
bash scripts/realclient_test.sh
