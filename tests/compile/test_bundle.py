"""Bundles: a value captured from one compile and read back equal, loaded by a fresh process without
Dynamo, and every case where one must not be used (another torch version, another config, a corrupt or
planted file)."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from compilation_bridge.compile import bundle_files, compile_model, progress
from compilation_bridge.compile.backend import VllmBackend
from compilation_bridge.compile.bundle import MANIFEST, PAYLOAD, Bundle, Unavailable
from compilation_bridge.vllm_config import CompilationConfig, Range

SCRIPT = """
import json, sys
from compilation_bridge.compile import compile_model
from compilation_bridge.vllm_config import CompilationConfig
config = CompilationConfig(
    mode=3, backend=sys.argv[2], cache_dir=sys.argv[1], compile_ranges_split_points=[8],
    splitting_ops=["silly::attention"],
)
model = compile_model(config, model="single-attention", max_num_tokens=32)
diffs = [model.run(n, repeats=1)["max_abs_diff_vs_eager"] for n in (4, 16)]
print(json.dumps({"diffs": diffs, "report": model.report()}))
"""


def _fresh_process(cache_dir: str, backend: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, cache_dir, backend],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check_fresh_process_loads_bundle(cache_dir: str, backend: str, artifacts: int) -> None:
    cold = _fresh_process(cache_dir, backend)
    assert cold["report"]["warm_start"]["saved"] and not cold["report"]["warm_start"]["used"]
    assert cold["report"]["dynamo_graphs_in_process"] == 1

    loaded = _fresh_process(cache_dir, backend)
    report = loaded["report"]
    assert report["warm_start"]["used"], report["warm_start"]
    # Dynamo ran zero times in the whole process, and nothing was compiled
    assert report["dynamo_graphs_in_process"] == 0
    assert report["counters"]["num_graphs_seen"] == 0
    assert report["counters"]["num_inductor_compiles"] == 0
    assert report["counters"]["num_compiled_artifacts_loaded"] == artifacts
    assert report["num_pieces"] == 3 and report["compiled_ranges"] == [[1, 8], [9, 32]]
    assert max(loaded["diffs"]) < 1e-5  # outputs equal to eager


def test_a_fresh_process_loads_the_eager_bundle_and_traces_nothing(cache_dir: str) -> None:
    _check_fresh_process_loads_bundle(cache_dir, "eager", artifacts=0)


@pytest.mark.slow
def test_a_fresh_process_loads_every_inductor_artifact_and_traces_nothing(cache_dir: str) -> None:
    _check_fresh_process_loads_bundle(cache_dir, "inductor", artifacts=4)


# -- fallbacks (in this process: each compile_model with the same config tries the bundle) ----------


def _config(cache_dir: str, **extra: Any) -> CompilationConfig:
    return CompilationConfig(
        mode=3,
        backend="eager",
        cache_dir=cache_dir,
        compile_ranges_split_points=[8],
        splitting_ops=["silly::attention"],
        **extra,
    )


def _compile_and_run(cache_dir: str, **extra: Any) -> dict[str, Any]:
    model = compile_model(_config(cache_dir, **extra), model="single-attention", max_num_tokens=32)
    diffs = [model.run(n, repeats=1)["max_abs_diff_vs_eager"] for n in (4, 16)]
    assert max(diffs) < 1e-5
    return model.report()


@pytest.fixture
def bundle(cache_dir: str) -> Path:
    """A cache directory holding a complete bundle, and proof that it is used when nothing differs."""
    first = _compile_and_run(cache_dir)
    assert first["warm_start"]["saved"]
    local = Path(first["local_cache_dir"])
    assert (local / MANIFEST).exists() and (local / PAYLOAD).exists()
    second = _compile_and_run(cache_dir)
    assert second["warm_start"]["used"], second["warm_start"]
    return local


def _rewrite_manifest(local: Path, **changes: Any) -> None:
    """An authentic bundle made elsewhere: written through the same function as a real one."""
    manifest = json.loads(bundle_files.read_verified(local / MANIFEST))
    manifest.update(changes)
    bundle_files.write_verified(local / MANIFEST, json.dumps(manifest).encode())


def _fell_back(report: dict[str, Any], reason: str) -> None:
    state = report["warm_start"]
    assert not state["used"] and reason in state["reason"], state
    assert report["counters"]["num_graphs_seen"] == 1  # today's path: Dynamo traced


def test_another_torch_version_falls_back_and_writes_a_new_bundle(bundle: Path, cache_dir: str) -> None:
    _rewrite_manifest(bundle, torch_version="2.12.0")
    report = _compile_and_run(cache_dir)
    _fell_back(report, "bundle made with torch 2.12.0")
    assert report["warm_start"]["saved"]
    assert json.loads(bundle_files.read_verified(bundle / MANIFEST))["torch_version"] != "2.12.0"


def test_another_config_falls_back(bundle: Path, cache_dir: str) -> None:
    _rewrite_manifest(bundle, hashes={"config_hash": "another"})
    _fell_back(_compile_and_run(cache_dir), "another config")
    # a changed config in the same cache directory: its cache, bundle included, is not used at all
    _fell_back(_compile_and_run(cache_dir, compile_sizes=[4]), "the compile cache is off")


def test_kept_guards_fall_back(bundle: Path, cache_dir: str) -> None:
    _rewrite_manifest(bundle, guards="shape guards kept")
    _fell_back(_compile_and_run(cache_dir), "evaluate_guards")


def test_a_corrupt_bundle_falls_back(bundle: Path, cache_dir: str) -> None:
    (bundle / PAYLOAD).write_bytes(b"not a pickle")
    _fell_back(_compile_and_run(cache_dir), "bundle not verified")


def test_a_verified_but_unreadable_bundle_falls_back(bundle: Path, cache_dir: str) -> None:
    digest = bundle_files.write_verified(bundle / PAYLOAD, b"\x80\x05 truncated")
    _rewrite_manifest(bundle, payload_sha256=digest)
    _fell_back(_compile_and_run(cache_dir), "bundle unusable")


class _Planted:
    """What an attacker would plant: unpickling it creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("with_digest", [False, True])
def test_a_planted_payload_is_never_unpickled(
    bundle: Path, cache_dir: str, tmp_path: Path, with_digest: bool
) -> None:
    marker = tmp_path / "unpickled"
    data = pickle.dumps(_Planted(marker))
    pickle.loads(data)  # the payload works: loading it would create the marker
    assert marker.exists()
    marker.unlink()
    if with_digest:  # planted with a valid MAC (an insider): the manifest still names other bytes
        bundle_files.write_verified(bundle / PAYLOAD, data)
        reason = "not the one its manifest names"
    else:
        (bundle / PAYLOAD).write_bytes(data)
        reason = "no valid MAC"
    _fell_back(_compile_and_run(cache_dir), reason)
    assert not marker.exists()


def test_a_manifest_without_its_mac_is_not_read(bundle: Path, cache_dir: str) -> None:
    (bundle / f"{MANIFEST}{bundle_files.DIGEST_SUFFIX}").unlink()
    _fell_back(_compile_and_run(cache_dir), "bundle not verified")


# -- the bundle as a value ----------------------------------------------------------------------------


def test_a_bundle_is_a_value_read_back_equal_and_adopted_by_a_fresh_backend(cache_dir: str) -> None:
    model = compile_model(_config(cache_dir), model="single-attention", max_num_tokens=32)
    for n in (4, 16):
        model.run(n, repeats=1)  # every range compiled: the bundle is written
    assert model.backend is not None
    example_args = model.model.example_inputs(2, model.device)  # type: ignore[operator]
    captured = model.backend.capture_bundle()
    read = Bundle.read(model.backend.bundle_dir(), model.backend.made_for(example_args))
    assert read == captured

    fresh = VllmBackend(model.plan)
    forward = fresh.adopt(read, model.model, started=time.perf_counter())
    assert read == captured  # adopting leaves the value as it was
    assert fresh.summary()["warm_start"]["used"] and fresh.range_for(16) == Range(start=9, end=32)
    with torch.no_grad():
        for n in (4, 16):
            inputs = model.model.example_inputs(n, model.device)  # type: ignore[operator]
            torch.testing.assert_close(forward(*inputs), model.model(*inputs))


def test_a_bundle_is_not_read_for_another_process(bundle: Path, cache_dir: str) -> None:
    model = compile_model(_config(cache_dir), model="single-attention", max_num_tokens=32)
    assert model.backend is not None
    example_args = model.model.example_inputs(2, model.device)  # type: ignore[operator]
    wanted = dataclasses.replace(model.backend.made_for(example_args), compiler="inductor")
    with pytest.raises(Unavailable, match="another compiler"):
        Bundle.read(bundle, wanted)


# -- what a caller is told (the events a streamed compile_model sends) ------------------------------


def _events_of_compile(cache_dir: str, **extra: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    with progress.collect(events.append):
        _compile_and_run(cache_dir, **extra)
    return events


def test_a_warm_start_reports_each_piece_loaded_with_its_ranges(bundle: Path, cache_dir: str) -> None:
    events = _events_of_compile(cache_dir)
    loaded = [e for e in events if e["event"] == "piece_loaded"]
    assert [e["piece"] for e in loaded] == list(range(len(loaded))) and loaded
    assert all(e["ranges"] and e["num_pieces"] == len(loaded) and e["bytes"] >= 0 for e in loaded)
    ends = [e for e in events if e["event"] == "warm_start_end"]
    assert len(ends) == 1 and ends[0]["ok"] and ends[0]["seconds"] >= 0
    assert not any(e["event"] in ("trace_start", "warm_start_declined") for e in events)


def test_a_fallback_tells_the_caller_why(bundle: Path, cache_dir: str) -> None:
    _rewrite_manifest(bundle, torch_version="2.12.0")
    events = _events_of_compile(cache_dir)
    declined = [e for e in events if e["event"] == "warm_start_declined"]
    assert len(declined) == 1 and "bundle made with torch 2.12.0" in declined[0]["reason"], declined
    names = [e["event"] for e in events]
    assert names.index("warm_start_declined") < names.index("trace_start")
