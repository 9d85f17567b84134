#!/usr/bin/env bash
# The Elixir stub's tests: ExUnit against real Python workers (elixir_stub/, zero hex dependencies).
# Installs Elixir and Erlang from Debian when `mix` is missing; hex is never needed (no `mix deps.get`).
# Workers run $COMPILATION_BRIDGE_PYTHON (default: this project's .venv) -m compilation_bridge port.
#
# Usage: scripts/elixir_test.sh [mix test arguments]      (after scripts/test.sh has built .venv)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v mix >/dev/null 2>&1; then
  echo "elixir_test: installing Elixir and Erlang from Debian" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -q elixir erlang-dev || { $sudo apt-get update -q && $sudo apt-get install -y -q elixir erlang-dev; }
fi

export COMPILATION_BRIDGE_PYTHON="${COMPILATION_BRIDGE_PYTHON:-$PWD/.venv/bin/python}"
export LANG="${LANG:-C.UTF-8}" LC_ALL="${LC_ALL:-C.UTF-8}"   # Elixir reads the reference pages as UTF-8
cd elixir_stub
MIX_ENV=test mix format --check-formatted
MIX_ENV=test mix test "$@"
