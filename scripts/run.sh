#!/usr/bin/env bash
# The main job: install the worker, start it exactly as Snakepit does (argv, environment, ready file,
# Ping "connection_test", InitializeSession), make SnakeBridge's calls of a small session, print what
# came back, and stop the worker with SIGTERM as Snakepit would.
#
# Usage: bash scripts/run.sh          (Python 3.11; creates .venv on first use)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_venv.sh
echo "run: starting a worker as Snakepit does, then a demo session" >&2
.venv/bin/python - <<'PY'
import json

from compilation_bridge.testing.session import CallError, SnakeBridgeSession
from compilation_bridge.testing.worker_process import WorkerProcess

worker = WorkerProcess.spawn()  # python/grpc_server.py --adapter ... --port 0 --elixir-address ...
print(f"worker pid {worker.process.pid} ready on localhost:{worker.port} after {worker.ready_after_s * 1000:.0f} ms")
session = SnakeBridgeSession(worker.stub, worker.session_id)


def show(what, value):
    print(f"  {what:<58} -> {json.dumps(value)}")


try:
    # Vllm.Config.CompilationConfig.new(nil, 3, nil, compile_ranges_split_points: [256])
    cc = session.call_class("vllm.config", "CompilationConfig", [None, 3, None], compile_ranges_split_points=[256])
    show("CompilationConfig.new(nil, 3, nil, compile_ranges_split_points: [256])", cc)
    show("mode(cc)", session.get_attr(cc, "mode"))
    show("backend(cc)", session.get_attr(cc, "backend"))
    show("splitting_ops(cc)", session.get_attr(cc, "splitting_ops"))
    show("compute_hash(cc)", session.call_method(cc, "compute_hash"))
    show("is_attention_compiled_piecewise(cc)", session.call_method(cc, "is_attention_compiled_piecewise"))
    ranges = session.call_method(cc, "get_compile_ranges")
    show("get_compile_ranges(cc) |> Enum.map(&inspect/1)", [session.call_method(r, "__repr__") for r in ranges])
    try:
        session.call_class("vllm.config", "CompilationConfig", [None, None, None], mode=3)
    except CallError as exc:
        show("CompilationConfig.new(nil, nil, nil, mode: 3)", {"error": exc.error["type"]})
    show("SnakeBridge.release_ref(cc)", session.release_ref(cc))
    show("release_session", session.release_session())
finally:
    code, seconds = worker.terminate()
    print(f"worker stopped with SIGTERM: exit status {code} after {seconds * 1000:.0f} ms")
PY
# The command line is installed into .venv only: say how to reach it (nothing else puts it on PATH).
cat <<'NEXT'

next: the `compilation-bridge` command is in .venv. Put it on this shell's PATH with
  . .venv/bin/activate
or call it by its path:
  .venv/bin/compilation-bridge --help
  .venv/bin/compilation-bridge inspect --config '{"mode": 3}' --platform cpu
  .venv/bin/compilation-bridge compile --config '{"mode": 3}' --tokens 1,16,64
NEXT
