#!/usr/bin/env bash
# Builds the vLLM 0.14.0 reference environment used only by the differential tests (about 2 minutes).
# The product never imports vLLM; this venv lives beside the project and is never installed into it.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${ORACLE_VENV:-.oracle-venv}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import vllm.config" 2>/dev/null; then
  echo "oracle: $venv ready"
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install -q -r tests/oracle/requirements.txt
"$venv/bin/pip" install -q --no-deps vllm==0.14.0
"$venv/bin/python" -c "import vllm.config" >/dev/null 2>&1
echo "oracle: $venv built"
