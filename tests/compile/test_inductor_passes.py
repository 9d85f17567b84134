"""An allowlisted post-grad pass runs once per Inductor compile (vLLM's test_compile_ranges checker)."""

from __future__ import annotations

import importlib
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from compilation_bridge.compile import compilation_counter, compile_model
from compilation_bridge.settings import reload_settings
from compilation_bridge.vllm_config import CompilationConfig

# The pass's uuid is a hash of its source; a fresh nonce in the body keeps Inductor's own on-disk cache
# (which, rightly, skips passes it has already applied to the same graph) from hiding the calls.
PASS_SOURCE = """
calls = []


def check_pass(graph):
    calls.append(len(graph.nodes))  # {nonce}
"""


@pytest.fixture
def pass_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    # vLLM resolves inductor_passes only as attributes of top-level modules, so the pass lives in one.
    (tmp_path / "bridge_check_pass.py").write_text(PASS_SOURCE.format(nonce=uuid.uuid4()))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("COMPILATION_BRIDGE_ALLOWED_CALLABLES", "bridge_check_pass.check_pass")
    reload_settings()
    yield importlib.import_module("bridge_check_pass")
    sys.modules.pop("bridge_check_pass", None)
    monkeypatch.undo()
    reload_settings()


@pytest.mark.slow
def test_post_grad_pass_runs_for_every_range_and_size(pass_module: ModuleType, cache_dir: str) -> None:
    config = CompilationConfig(
        mode=3,
        backend="inductor",
        cache_dir=cache_dir,
        compile_ranges_split_points=[8, 32],
        compile_sizes=[16, 64, 128],
        inductor_passes={"post_grad_custom_post_pass": "bridge_check_pass.check_pass"},
    )
    model = compile_model(config, model="single-attention", max_num_tokens=8192)
    with compilation_counter.expect(num_backend_compilations=5, num_inductor_compiles=5):
        for n in [1, 4, 16, 24, 48, 64, 8192]:
            assert model.run(n)["max_abs_diff_vs_eager"] == 0.0
    assert len(pass_module.calls) == 5
    assert model.report()["num_artifacts_saved"] == 5


def test_a_pass_not_on_the_allowlist_is_refused() -> None:
    with pytest.raises(ValueError, match="not on the operator's allowlist"):
        CompilationConfig(mode=3, inductor_passes={"post_grad_custom_post_pass": "os.getcwd"})
