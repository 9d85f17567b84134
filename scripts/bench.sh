#!/usr/bin/env bash
# Every benchmark in one go (RPC vs a bare grpcio servicer, Erlang port vs gRPC, compile cold vs warm,
# compiled vs eager), printed and written as a page of ratios to docs/figures.md (or $1).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/compilation-bridge ] || { echo "run scripts/test.sh or scripts/run.sh first (creates .venv)" >&2; exit 1; }
.venv/bin/compilation-bridge bench --markdown "${1:-docs/figures.md}"
