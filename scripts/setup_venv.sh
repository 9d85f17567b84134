#!/usr/bin/env bash
# Creates (or updates) .venv: torch 2.13.0's CPU build, then this package with the given extras.
# One line per step on stderr; pip itself stays quiet.
#
# The CPU build comes from PyTorch's CPU wheel index ($TORCH_CPU_INDEX) where that is reachable, or from a
# local wheel the machine's pip configuration provides. Otherwise pip falls back to the default index, which
# on Linux x86_64 serves the CUDA build (it runs on CPU too, but it is several GB): the script says which
# build it got.
#
# Usage: scripts/setup_venv.sh [EXTRAS]          (EXTRAS: e.g. "test" or "test,otel"; PYTHON picks the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-}
python=${PYTHON:-python3}
cpu_index=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
step() { echo "setup: $*" >&2; }

if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $("$python" --version 2>&1)"
  "$python" -m venv .venv
fi
if .venv/bin/python -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)" \
     "$cpu_index/" >/dev/null 2>&1; then
  step "installing torch 2.13.0, CPU build, from $cpu_index"
  index=(--extra-index-url "$cpu_index")
else
  step "installing torch 2.13.0 from pip's configured sources ($cpu_index is not reachable)"
  index=()
fi
.venv/bin/pip install -q "${index[@]}" torch==2.13.0
step "installing compilation-bridge${extras:+[$extras]} and its dependencies"
.venv/bin/pip install -q -e ".${extras:+[$extras]}"
build=$(.venv/bin/python -c 'import torch; print(torch.__version__, "CUDA" if torch.version.cuda else "CPU")')
case "$build" in
  *CPU) step "ready: torch $build build" ;;
  *) step "ready, but with torch $build build: no CPU build was available, so pip took the default one" ;;
esac
