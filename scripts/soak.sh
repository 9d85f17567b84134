#!/usr/bin/env bash
# The memory soak (docs/soak.md): a real Snakepit pool of two workers serves SOAK_CALLS calls (default
# 100000) from 8 concurrent sessions; each worker's RSS is sampled every 10% and must stay flat after the
# warm-up. Runs through scripts/realclient_test.sh (the same client set-up) (needs .venv; about 4 minutes).
#
# Usage: [SOAK_CALLS=N] [SOAK_ENV="K=V,..."] scripts/soak.sh [mix test arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
# the real-client suite's own set-up and runner, with the soak tag selected
exec bash scripts/realclient_test.sh --only soak "$@"
