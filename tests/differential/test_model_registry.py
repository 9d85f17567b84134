"""The worker's model registry table (python/compilation_bridge/vllm_config/model_registry.json) is vLLM
0.14.0's: scripts/gen_model_registry.py, run in the oracle environment, writes it from vLLM's registry,
model classes and transformers, and must write exactly the file the package ships."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from diff_harness import REPO, oracle_python, oracle_venv

from compilation_bridge.vllm_config.model_registry import TABLE


def test_the_table_is_what_vllm_answers() -> None:
    if not oracle_python().exists():
        pytest.skip(
            f"vLLM 0.14.0 oracle environment not found at {oracle_venv()}: run scripts/setup_oracle.sh"
        )
    env = dict(os.environ, PYTHONHASHSEED="0", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    script = REPO / "scripts" / "gen_model_registry.py"
    done = subprocess.run(
        [str(oracle_python()), str(script)], capture_output=True, text=True, env=env, timeout=600, check=True
    )
    assert json.loads(done.stdout) == json.loads(TABLE.read_text(encoding="utf-8")), (
        "model_registry.json is stale: regenerate it with scripts/gen_model_registry.py (see its docstring)"
    )
