"""Bad input: precise errors, nothing written outside the allowed roots, the process keeps working."""

from __future__ import annotations

from pathlib import Path

import pytest

from compilation_bridge.compile import InductorCompileError, PathNotAllowedError, compile_model
from compilation_bridge.settings import ALLOWED_INDUCTOR_OPTIONS_ENV, reload_settings
from compilation_bridge.vllm_config import CompilationConfig


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def test_unknown_model() -> None:
    with pytest.raises(ValueError, match=r"unknown model 'gpt-17'; known models: toy-llama, "):
        compile_model(CompilationConfig(mode=3, backend="eager"), model="gpt-17")


def test_unknown_model_option(cache_dir: str) -> None:
    with pytest.raises(TypeError, match="unknown option for model 'toy-llama'"):
        compile_model(CompilationConfig(mode=3, backend="eager", cache_dir=cache_dir), hidden=3)


def test_cache_dir_outside_the_allowed_roots(allowed_roots: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    config = CompilationConfig(mode=3, backend="eager", cache_dir=str(outside))
    with pytest.raises(PathNotAllowedError, match=r"cache_dir '.*outside' is outside the directories"):
        compile_model(config, model="single-attention", max_num_tokens=8)
    assert not outside.exists()
    inside = CompilationConfig(mode=3, backend="eager", cache_dir=str(allowed_roots / "c"))
    model = compile_model(inside, model="single-attention", max_num_tokens=8)
    assert model.run(2)["max_abs_diff_vs_eager"] == 0.0
    assert _files(tmp_path) - _files(allowed_roots) == set()


def test_debug_dump_path_outside_the_allowed_roots(allowed_roots: Path, tmp_path: Path) -> None:
    config = CompilationConfig(
        mode=3, backend="eager", cache_dir=str(allowed_roots / "c"), debug_dump_path=tmp_path / "dump"
    )
    with pytest.raises(PathNotAllowedError, match="debug_dump_path"):
        compile_model(config, model="single-attention", max_num_tokens=8)
    assert not (tmp_path / "dump").exists()
    assert not (allowed_roots / "c").exists()


def test_debug_dump_path_is_honoured(cache_dir: str, tmp_path: Path) -> None:
    config = CompilationConfig(
        mode=3, backend="eager", cache_dir=cache_dir, debug_dump_path=tmp_path / "dump"
    )
    compile_model(config, model="single-attention", max_num_tokens=8)
    dump = tmp_path / "dump" / "rank_0_dp_0"
    assert {p.name for p in dump.iterdir()} == {"before_split.py", "after_split.py"}


def test_backend_not_on_the_allowlist() -> None:
    with pytest.raises(Exception, match="allowlist"):
        compile_model(CompilationConfig(mode=2, backend="os.system"), model="single-attention")


def test_token_counts_outside_max_are_refused_in_whole_graph_modes(cache_dir: str) -> None:
    model = compile_model(
        CompilationConfig(mode=2, backend="eager"), model="single-attention", max_num_tokens=8
    )
    with pytest.raises(ValueError, match="num_tokens must be between 1 and max_num_tokens=8"):
        model.run(9)
    with pytest.raises(TypeError, match="num_tokens must be an int"):
        model.run("3")  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_failing_inductor_compile_leaves_no_cache_entry(
    cache_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The operator lets an option through that Inductor itself rejects.
    monkeypatch.setenv(ALLOWED_INDUCTOR_OPTIONS_ENV, "no_such_inductor_option")
    reload_settings()
    config = CompilationConfig(
        mode=3,
        backend="inductor",
        cache_dir=cache_dir,
        splitting_ops=["silly::attention"],
        inductor_compile_config={"no_such_inductor_option": True},
    )
    model = compile_model(config, model="single-attention", max_num_tokens=8)
    with pytest.raises(
        InductorCompileError, match=r"inductor_standalone failed to compile piece 0 for compile range"
    ):
        model.run(4)
    local = Path(model.report()["local_cache_dir"])
    assert not (local / "vllm_compile_cache.py").exists()
    assert not list(local.glob("artifact_*"))
    # the process keeps working: another config compiles and runs
    good = CompilationConfig(
        mode=3, backend="inductor", cache_dir=cache_dir + "2", splitting_ops=["silly::attention"]
    )
    assert (
        compile_model(good, model="single-attention", max_num_tokens=8).run(4)["max_abs_diff_vs_eager"] == 0
    )


@pytest.mark.parametrize(
    "options,message",
    [
        ({"cpp.cxx": ["/bin/sh", "-c", "true"]}, r"'cpp.cxx'\] is not an allowed Inductor option"),
        ({"debug_dir": "/etc"}, r"'debug_dir'\] is not an allowed Inductor option"),
        ({"max_autotune": "yes"}, r"'max_autotune'\] must be a boolean, a number or null"),
        ({"post_grad_custom_post_pass": 1}, r"custom passes come only from inductor_passes"),
    ],
)
def test_inductor_options_that_name_files_commands_or_code_are_refused(
    cache_dir: str, options: dict[str, object], message: str
) -> None:
    config = CompilationConfig(
        mode=3, backend="inductor", cache_dir=cache_dir, inductor_compile_config=options
    )
    with pytest.raises(ValueError, match=message):
        compile_model(config, model="single-attention", max_num_tokens=8)


def test_bounded_work(cache_dir: str) -> None:
    config = CompilationConfig(mode=3, backend="eager", cache_dir=cache_dir)
    model = compile_model(config, model="single-attention", max_num_tokens=1 << 20)
    with pytest.raises(ValueError, match="num_tokens must be at most 65536"):
        model.run(1 << 17)
    with pytest.raises(ValueError, match="max_num_tokens must be between 1 and 16777216"):
        compile_model(config, model="single-attention", max_num_tokens=1 << 25)
    with pytest.raises(ValueError, match="num_layers must be between 1 and 64"):
        compile_model(config, model="toy-llama", num_layers=10_000)


def test_max_num_tokens_of_one(cache_dir: str) -> None:
    config = CompilationConfig(mode=3, backend="eager", cache_dir=cache_dir)
    model = compile_model(config, model="toy-llama", max_num_tokens=1, num_layers=1, hidden_size=16)
    assert model.report()["compile_ranges"] == [[1, 1]]
    assert model.run(1)["max_abs_diff_vs_eager"] == 0.0
