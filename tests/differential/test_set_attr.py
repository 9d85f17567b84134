"""set_attr against vLLM 0.14.0: every dataclass field vLLM lets a caller assign is assignable here too,
except the fields the security model keeps for the worker (`WORKER_OWNED_FIELDS`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from diff_harness import REPO

from compilation_bridge.surface.catalog import default_surface
from compilation_bridge.surface.registry import WORKER_OWNED_FIELDS

# Each class with the constructor keywords it needs on a CPU machine.
CLASSES: dict[str, dict[str, Any]] = {
    "CompilationConfig": {},
    "PassConfig": {},
    "SchedulerConfig": {"max_model_len": 2048, "is_encoder_decoder": False},
    "ParallelConfig": {},
    "DeviceConfig": {"device": "cpu"},
}

# For each class: its public dataclass fields, and which of them vLLM accepts back through setattr.
ORACLE_PROGRAM = """
import dataclasses, json, sys
import vllm.config as vc
out = {}
for name, kwargs in json.loads(sys.argv[1]).items():
    obj = getattr(vc, name)(**kwargs)
    accepted = []
    for f in dataclasses.fields(obj):
        if f.name.startswith("_"):
            continue
        try:
            setattr(obj, f.name, getattr(obj, f.name))
            accepted.append(f.name)
        except Exception as exc:
            accepted.append(f"{f.name}: {type(exc).__name__}")
    out[name] = sorted(accepted)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def assignable_in_vllm() -> dict[str, list[str]]:
    python = Path(os.environ.get("ORACLE_VENV") or REPO / ".oracle-venv") / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no vLLM 0.14.0 oracle at {python}: bash scripts/setup_oracle.sh builds it")
    env = {**os.environ, "PYTHONHASHSEED": "0", "VLLM_TARGET_DEVICE": "cpu"}
    done = subprocess.run(
        [str(python), "-c", ORACLE_PROGRAM, json.dumps(CLASSES)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("class_name", CLASSES)
def test_every_field_vllm_assigns_is_assignable_here(
    class_name: str, assignable_in_vllm: dict[str, list[str]]
) -> None:
    import compilation_bridge.vllm_config as product

    surface = default_surface()
    surface.load_module("vllm.config")  # exposes the config types
    obj: Any = getattr(product, class_name)(**CLASSES[class_name])
    vllm_fields = assignable_in_vllm[class_name]
    assert all(":" not in name for name in vllm_fields), vllm_fields  # vLLM took every field back
    for name in vllm_fields:
        if name in WORKER_OWNED_FIELDS:
            with pytest.raises(PermissionError, match="not a field that can be set"):
                surface.set_attr(obj, name, getattr(obj, name))
        else:
            surface.set_attr(obj, name, getattr(obj, name))
    fields = {f for f in vllm_fields if f not in WORKER_OWNED_FIELDS}
    assert surface.exposure(obj).field_names() == fields
