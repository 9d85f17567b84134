#!/usr/bin/env bash
# The memory soak (docs/soak.md): a real Snakepit pool of two workers serves SOAK_CALLS calls (default
# 100000) from 8 concurrent sessions; each worker's RSS is sampled every 10% and must stay flat after the
# warm-up. Sets up the real client as scripts/realclient_test.sh does (needs .venv; about 4 minutes).
#
# Usage: [SOAK_CALLS=N] [SOAK_ENV="K=V,..."] scripts/soak.sh [mix test arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${REALCLIENT_KIT:-}
if [ -z "$kit" ]; then
  for candidate in ../realclient ../*/realclient; do
    if [ -f "$candidate/setup.sh" ]; then kit=$candidate; break; fi
  done
fi
if [ -n "$kit" ] && [ -f "$kit/setup.sh" ]; then
  eval "$(bash "$kit/setup.sh" "$PWD/.realclient")"
else
  (cd integration/snakepit && mix local.hex --force --if-missing && mix deps.get)
fi
export LANG="${LANG:-C.UTF-8}" LC_ALL="${LC_ALL:-C.UTF-8}"
cd integration/snakepit
MIX_ENV=test mix deps.compile >/dev/null 2>&1 || MIX_ENV=test mix deps.compile  # quiet unless it fails
MIX_ENV=test mix test --only soak "$@"
