"""The launch script Snakepit spawns: `python grpc_server.py --adapter ... --port 0 --elixir-address ...`.

Snakepit finds (and cleans up) its workers by this file name and `--snakepit-run-id` on the command
line, so keep both; the worker itself is `compilation_bridge.transport`.
"""

import os
import sys

# Run from a checkout, Snakepit starts this script with cwd = this folder, which is then also
# sys.path[0]: the package beside it is importable without installation.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compilation_bridge.transport.launch import main

if __name__ == "__main__":
    raise SystemExit(main())
