#!/usr/bin/env bash
# The real-client conformance suite (integration/snakepit): Snakepit 0.13, SnakeBridge 0.16 and the `vllm`
# hex package 0.3.0 on Elixir 1.18 drive this checkout's worker through both README recipes.
#
# With an offline source kit of the client, it builds Elixir 1.18.4, Hex and every pinned dependency from
# it into .realclient/ (about two minutes the first time, then seconds). The kit is looked for in exactly
# one place: $REALCLIENT_KIT when set, otherwise a `shared/realclient` folder beside this checkout
# (docs/worker.md, "The real-client suite"); nothing else is searched, so no stray folder's script is
# ever run. Without a kit it fetches the packages from hex as any user would, with
# the `mix` on PATH (Elixir 1.18 or later and Hex). Needs .venv and .oracle-venv with every pin of
# tests/oracle/requirements.txt (scripts/test.sh builds both; scripts/setup_oracle.sh brings an older
# .oracle-venv up to the pins): the two-pool test runs
# Snakepit's own Python server on the oracle's interpreter, which needs its grpcio and protobuf.
#
# Usage: scripts/realclient_test.sh [mix test arguments]
#        scripts/realclient_test.sh --prepare   (build and compile everything, run no test)
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${REALCLIENT_KIT:-../shared/realclient}
if [ -f "$kit/setup.sh" ]; then
  echo "realclient: Elixir 1.18.4 and the pinned client sources from the offline kit in $kit" >&2
  eval "$(bash "$kit/setup.sh" "$PWD/.realclient")"   # prints the environment of what it built
elif [ -n "${REALCLIENT_KIT:-}" ]; then
  echo "realclient: REALCLIENT_KIT=$kit holds no setup.sh (an offline kit is a folder with setup.sh)" >&2
  exit 2
else
  echo "realclient: no offline kit in $kit; fetching vllm 0.3.0 and its dependencies from hex" >&2
  (cd integration/snakepit && mix local.hex --force --if-missing && mix deps.get)
fi
export LANG="${LANG:-C.UTF-8}" LC_ALL="${LC_ALL:-C.UTF-8}"
cd integration/snakepit
MIX_ENV=test mix format --check-formatted
MIX_ENV=test mix deps.compile >/dev/null 2>&1 || MIX_ENV=test mix deps.compile  # quiet unless it fails
if [ "${1:-}" = "--prepare" ]; then
  MIX_ENV=test mix compile
  exit 0
fi
# Snakepit names its ready files predictably in the temporary folder and reads one that is already there:
# each run gets a folder of its own, so no file an earlier run left can hand a worker a stale port.
TMPDIR=$(mktemp -d)
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
MIX_ENV=test mix test "$@"
