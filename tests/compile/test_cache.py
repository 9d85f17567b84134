"""The disk cache: reuse by a fresh process, partial warm-ups, the disable switch, nothing half-written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compilation_bridge.compile import CompiledModel, compile_model
from compilation_bridge.vllm_config import CompilationConfig

SCRIPT = """
import json, sys
from compilation_bridge.compile import compile_model
from compilation_bridge.vllm_config import CompilationConfig
config = CompilationConfig(
    mode=3, backend="inductor", cache_dir=sys.argv[1], compile_ranges_split_points=[8],
    splitting_ops=["silly::attention"],
)
model = compile_model(config, model="single-attention", max_num_tokens=32)
diffs = [model.run(int(n))["max_abs_diff_vs_eager"] for n in sys.argv[2].split(",")]
report = model.report()
print(json.dumps({"diffs": diffs, "report": report, "config_local": config.local_cache_dir}))
"""


def _fresh_process(cache_dir: str, tokens: str, **env: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, cache_dir, tokens],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_fresh_process_loads_everything_and_compiles_nothing(cache_dir: str) -> None:
    cold = _fresh_process(cache_dir, "4,16")
    counters = cold["report"]["counters"]
    assert counters["num_inductor_compiles"] == 4 and counters["num_compiled_artifacts_saved"] == 4
    local = Path(cold["report"]["local_cache_dir"])
    assert local == Path(cache_dir).resolve() / "rank_0_0" / "backbone"
    assert cold["config_local"] == str(local)
    names = {p.name for p in local.iterdir()}
    assert {"cache_key_factors.json", "computation_graph.py", "vllm_compile_cache.py"} <= names
    assert {f"artifact_compile_range_{r}_subgraph_{i}" for r in ("1_8", "9_32") for i in (0, 1)} <= names
    assert not [n for n in names if n.endswith(".tmp")]

    warm = _fresh_process(cache_dir, "4,16")
    counters = warm["report"]["counters"]
    assert counters["num_inductor_compiles"] == 0
    assert counters["num_compiled_artifacts_loaded"] == 4
    assert counters["num_backend_compilations"] == 4  # as vLLM, loads count as backend compilations
    assert warm["report"]["cache_status"] == "reused"
    assert max(warm["diffs"]) < 1e-3


def _inductor_model(cache_dir: str) -> CompiledModel:
    config = CompilationConfig(
        mode=3,
        backend="inductor",
        cache_dir=cache_dir,
        compile_ranges_split_points=[8],
        splitting_ops=["silly::attention"],
    )
    return compile_model(config, model="single-attention", max_num_tokens=32)


@pytest.mark.slow
def test_a_partial_warm_up_is_reused(cache_dir: str) -> None:
    _inductor_model(cache_dir).run(4)  # warms up range (1, 8) only
    again = _inductor_model(cache_dir)
    again.run(4)
    again.run(16)
    # (1, 8) loads, (9, 32) compiles; vLLM 0.14 would have written no index and recompiled both
    counters = again.report()["counters"]
    assert counters["num_compiled_artifacts_loaded"] == 2
    assert counters["num_inductor_compiles"] == 2


@pytest.mark.slow
def test_disable_compile_cache_switch(cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPILATION_BRIDGE_DISABLE_COMPILE_CACHE", "1")
    config = CompilationConfig(
        mode=3, backend="inductor", cache_dir=cache_dir, splitting_ops=["silly::attention"]
    )
    model = compile_model(config, model="single-attention", max_num_tokens=8)
    assert model.run(4)["max_abs_diff_vs_eager"] == 0.0
    report = model.report()
    assert report["counters"]["num_inductor_compiles"] == 2
    assert report["counters"]["num_cache_entries_updated"] == 0
    assert report["counters"]["num_compiled_artifacts_saved"] == 0
    assert not (Path(report["local_cache_dir"]) / "vllm_compile_cache.py").exists()
    assert report["cache_enabled"] is False


def _eager_config(cache_dir: str) -> CompilationConfig:
    return CompilationConfig(mode=3, backend="eager", cache_dir=cache_dir)


def test_a_cache_made_for_another_model_is_not_trusted(cache_dir: str) -> None:
    compile_model(_eager_config(cache_dir), model="single-attention", max_num_tokens=16)
    other = compile_model(_eager_config(cache_dir), model="simple-piecewise", max_num_tokens=16)
    report = other.report()
    assert report["cache_status"].startswith("mismatch")
    assert report["cache_enabled"] is False
    assert other.run(3)["max_abs_diff_vs_eager"] == 0.0


def test_an_unreadable_index_is_ignored(cache_dir: str) -> None:
    first = compile_model(_eager_config(cache_dir), model="single-attention", max_num_tokens=16)
    index = Path(first.report()["local_cache_dir"]) / "vllm_compile_cache.py"
    index.write_text("{ ((1, 16), 0, 'inductor_standalone'): ('x', '/etc/passwd'), ")  # truncated
    again = compile_model(_eager_config(cache_dir), model="single-attention", max_num_tokens=16)
    assert again.run(4)["max_abs_diff_vs_eager"] == 0.0


def test_compile_time_and_local_cache_dir_are_written_to_the_config(cache_dir: str) -> None:
    config = _eager_config(cache_dir)
    model = compile_model(config, model="single-attention", max_num_tokens=16)
    after_trace = config.compilation_time
    assert after_trace > 0
    model.run(4)
    assert config.compilation_time > after_trace
    assert config.local_cache_dir == model.report()["local_cache_dir"]
    assert config.cache_dir == cache_dir  # not rewritten: one config may compile several models


def test_default_cache_dir_is_under_the_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from compilation_bridge.settings import reload_settings

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("COMPILATION_BRIDGE_ALLOWED_ROOTS", raising=False)
    reload_settings()
    try:
        model = compile_model(
            CompilationConfig(mode=3, backend="eager"), model="single-attention", max_num_tokens=8
        )
        local = Path(model.report()["local_cache_dir"])
        base = tmp_path / "xdg" / "compilation-bridge" / "torch_compile_cache"
        assert local.parent.parent.parent == base and len(local.parent.parent.name) == 10
        assert local.parts[-2:] == ("rank_0_0", "backbone")
    finally:
        monkeypatch.undo()
        reload_settings()


def test_compiling_one_config_again_finds_the_same_cache(cache_dir: str) -> None:
    config = _eager_config(cache_dir)
    first = compile_model(config, model="toy-llama", max_num_tokens=8, num_layers=1, hidden_size=16)
    again = compile_model(config, model="toy-llama", max_num_tokens=8, num_layers=1, hidden_size=16)
    assert config.enabled_custom_ops["rms_norm"] == 6  # the counters accumulate, as in vLLM
    assert first.report()["cache_status"] == "new"
    assert again.report()["cache_status"] == "reused"
    assert again.report()["local_cache_dir"] == first.report()["local_cache_dir"]


@pytest.mark.slow
def test_a_vllm_config_finds_its_cache_in_a_fresh_process(cache_dir: str) -> None:
    script = (
        "import sys\n"
        "from compilation_bridge.compile import compile_model\n"
        "from compilation_bridge.vllm_config import CompilationConfig, VllmConfig\n"
        "compilation = CompilationConfig(mode=3, backend='eager', cache_dir=sys.argv[1])\n"
        "config = VllmConfig(compilation_config=compilation)\n"
        "config.compilation_config.mode = 3\n"
        "print(compile_model(config, model='single-attention').report()['cache_status'])\n"
    )
    statuses = [
        subprocess.run(
            [sys.executable, "-c", script, cache_dir], capture_output=True, text=True, check=True, timeout=300
        ).stdout.split()[-1]
        for _ in range(2)
    ]
    assert statuses == ["new", "reused"]


@pytest.mark.slow
def test_a_corrupt_artifact_is_compiled_again(cache_dir: str) -> None:
    first = _inductor_model(cache_dir)
    first.run(4)
    local = Path(first.report()["local_cache_dir"])
    artifact = local / "artifact_compile_range_1_8_subgraph_0"
    artifact.write_bytes(artifact.read_bytes()[:100])  # as if cut short (never by this code)
    again = _inductor_model(cache_dir)
    assert again.run(4)["max_abs_diff_vs_eager"] == 0.0
    counters = again.report()["counters"]
    assert counters["num_compiled_artifacts_loaded"] == 1
    assert counters["num_inductor_compiles"] == 1


def test_defaults_follow_the_operators_roots(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # One allowed root that holds neither the user cache folder nor Inductor's default: the compile cache
    # and Inductor's cache both go under it, and an Inductor compile works with no cache_dir given.
    from compilation_bridge.settings import reload_settings

    root = tmp_path / "only-root"
    root.mkdir(mode=0o700)  # an operator's root must exist (the worker creates only its default)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("COMPILATION_BRIDGE_ALLOWED_ROOTS", str(root))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    reload_settings()
    try:
        model = compile_model(CompilationConfig(mode=3), model="single-attention", max_num_tokens=8)
        assert model.run(4)["max_abs_diff_vs_eager"] < 1e-5
        assert Path(model.report()["local_cache_dir"]).is_relative_to(root / "torch_compile_cache")
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(root / "inductor")
        assert any((root / "inductor").iterdir())
        assert not (tmp_path / "xdg").exists()
    finally:
        monkeypatch.undo()
        reload_settings()
