#!/usr/bin/env bash
# The real-client suite under load: runs scripts/realclient_test.sh RUNS times (default 20) while
# stress-ng keeps every core busy (STRESS_CPUS workers, default twice the cores), and prints how many
# runs passed and how long each took. A failed run's log is kept in .stress/.
#
# Usage: scripts/stress_realclient.sh [mix test arguments]    (needs stress-ng: apt-get install stress-ng)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-20}
cpus=${STRESS_CPUS:-$(($(nproc) * 2))}
if ! command -v stress-ng >/dev/null; then
  echo "stress: needs stress-ng (Debian: apt-get install -y stress-ng)" >&2
  exit 2
fi
mkdir -p .stress
# Build the client before the load starts: the kit compiles Elixir itself at low priority, which a loaded
# machine starves; what is measured is the suite under load, not the build.
bash scripts/realclient_test.sh --prepare >.stress/prepare.log 2>&1 || { cat .stress/prepare.log >&2; exit 1; }
stress-ng --cpu "$cpus" --timeout 0 --quiet &
load=$!
trap 'kill "$load" 2>/dev/null; wait "$load" 2>/dev/null || true' EXIT

passed=0
for i in $(seq 1 "$runs"); do
  log=".stress/run-$i.log"
  start=$(date +%s)
  if bash scripts/realclient_test.sh "$@" >"$log" 2>&1; then
    passed=$((passed + 1))
    verdict=passed
    rm -f "$log"
  else
    verdict="FAILED (log: $log)"
  fi
  echo "stress: run $i/$runs $verdict in $(($(date +%s) - start)) s, stress-ng --cpu $cpus"
done
echo "stress: $passed of $runs runs passed under stress-ng --cpu $cpus on $(nproc) cores"
[ "$passed" -eq "$runs" ]
