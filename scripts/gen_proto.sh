#!/usr/bin/env bash
# Generates the Python protobuf/gRPC modules for proto/snakepit_bridge.proto into
# python/compilation_bridge/transport/generated/ (committed, so `pip install .` needs no protoc).
# tests/transport/test_generated_proto.py runs this into a temporary folder and fails when the
# committed files differ, so edit the .proto and re-run this script; never edit the output.
#
# Usage: scripts/gen_proto.sh [OUTPUT_DIR]     (needs grpcio-tools: pip install -e '.[test]')
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
OUT="${1:-python/compilation_bridge/transport/generated}"
mkdir -p "$OUT"
"$PYTHON" -m grpc_tools.protoc -Iproto --python_out="$OUT" --pyi_out="$OUT" --grpc_python_out="$OUT" \
  proto/snakepit_bridge.proto
# protoc writes a top-level import; the modules live inside a package, so make it relative.
sed -i 's/^import snakepit_bridge_pb2 as snakepit__bridge__pb2$/from . import snakepit_bridge_pb2 as snakepit__bridge__pb2/' \
  "$OUT/snakepit_bridge_pb2_grpc.py"
cat > "$OUT/__init__.py" <<'PY'
"""Generated from proto/snakepit_bridge.proto by scripts/gen_proto.sh; do not edit."""
PY
