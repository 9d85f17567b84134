#!/usr/bin/env bash
# The real-client conformance suite (integration/snakepit): Snakepit 0.13, SnakeBridge 0.16 and the `vllm`
# hex package 0.3.0 on Elixir 1.18 drive this checkout's worker through both README recipes.
#
# Where an offline source kit of the client is present ($REALCLIENT_KIT, or else a `realclient/` folder
# holding `setup.sh` beside this checkout or one folder down from its parent), it builds Elixir 1.18.4,
# Hex and every pinned dependency from it into .realclient/ (about two minutes the first time, then
# seconds). Otherwise it fetches the packages from hex as any user would, with
# the `mix` on PATH (Elixir 1.18 or later). Needs .venv and .oracle-venv (scripts/test.sh builds both).
#
# Usage: scripts/realclient_test.sh [mix test arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${REALCLIENT_KIT:-}
if [ -z "$kit" ]; then
  for candidate in ../realclient ../*/realclient; do
    if [ -f "$candidate/setup.sh" ]; then kit=$candidate; break; fi
  done
fi
if [ -n "$kit" ] && [ -f "$kit/setup.sh" ]; then
  echo "realclient: Elixir 1.18.4 and the pinned client sources from the offline kit in $kit" >&2
  eval "$(bash "$kit/setup.sh" "$PWD/.realclient")"
else
  echo "realclient: no offline kit; fetching vllm 0.3.0 and its dependencies from hex" >&2
  (cd integration/snakepit && mix local.hex --force --if-missing && mix deps.get)
fi
export LANG="${LANG:-C.UTF-8}" LC_ALL="${LC_ALL:-C.UTF-8}"
cd integration/snakepit
MIX_ENV=test mix format --check-formatted
MIX_ENV=test mix deps.compile >/dev/null 2>&1 || MIX_ENV=test mix deps.compile  # quiet unless it fails
MIX_ENV=test mix test "$@"
