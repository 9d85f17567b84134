#!/usr/bin/env bash
# Builds the vLLM 0.14.0 reference environment used only by the differential tests (about 2 minutes).
# The product never imports vLLM; this venv lives beside the project and is never installed into it.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${ORACLE_VENV:-.oracle-venv}
pins=tests/oracle/requirements.txt
# True when every `name==version` line of the pins is installed at that version (no index consulted), so
# an environment built before a pin was added gets only what it lacks.
pinned() {
  "$venv/bin/python" - "$pins" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version

for line in open(sys.argv[1]):
    name, _, want = line.split("#")[0].strip().partition("==")
    try:
        if name and version(name).split("+")[0] != want:  # torch reports 2.13.0+cpu
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import vllm.config" 2>/dev/null; then
  if pinned; then
    echo "oracle: $venv ready"
    exit 0
  fi
  "$venv/bin/pip" install -q -r "$pins"
  pinned
  echo "oracle: $venv brought up to $pins"
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install -q -r "$pins"
"$venv/bin/pip" install -q --no-deps vllm==0.14.0
"$venv/bin/python" -c "import vllm.config" >/dev/null 2>&1
echo "oracle: $venv built"
