#!/usr/bin/env bash
# Installs redis-server for the ref store tests (they start and stop their own, on a loopback port),
# only when it is missing. Debian's package; the tests skip the Redis cases when it cannot be installed.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y --no-install-recommends redis-server >/dev/null || {
    apt-get update >/dev/null && apt-get install -y --no-install-recommends redis-server >/dev/null
  }
else
  echo "redis-server is missing: install it (Debian: apt-get install redis-server) to run the Redis tests" >&2
fi
