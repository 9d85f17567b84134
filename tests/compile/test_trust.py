"""No trust in shared folders: private roots, no symlink out of a root, authenticated cache entries."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from compilation_bridge.compile import PathNotAllowedError, compile_model
from compilation_bridge.compile.authenticated import (
    is_sealed,
    key_path,
    mac_path,
    read_authenticated,
    seal,
    write_authenticated,
)
from compilation_bridge.compile.bundle import MANIFEST, PAYLOAD
from compilation_bridge.compile.files import UnsafeRootError, atomic_write_text, check_allowed
from compilation_bridge.safe_files import read_bytes
from compilation_bridge.settings import ALLOWED_ROOTS_ENV, get_settings, reload_settings
from compilation_bridge.vllm_config import CompilationConfig
from compilation_bridge.vllm_config.model import MODEL_ROOTS_ENV, ModelConfig


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """One private operator root, `tmp_path/root`, plus Inductor's test cache."""
    folder = tmp_path / "root"
    folder.mkdir(mode=0o700)
    inductor = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    monkeypatch.setenv(ALLOWED_ROOTS_ENV, os.pathsep.join([str(folder), inductor]))
    reload_settings()
    yield folder


def _eager(cache_dir: Path, **kw: object) -> CompilationConfig:
    return CompilationConfig(mode=3, backend="eager", cache_dir=str(cache_dir), **kw)


# -- 1. roots private to the worker's user ---------------------------------------------------------


def test_the_shared_temporary_directory_is_no_default_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOWED_ROOTS_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    settings = reload_settings()
    home = tmp_path / "xdg" / "compilation-bridge"
    assert settings.allowed_roots == (home,)
    planted = Path(tempfile.gettempdir()) / f"planted-{os.getpid()}"
    with pytest.raises(PathNotAllowedError, match="outside the directories"):
        compile_model(_eager(planted), model="single-attention", max_num_tokens=8)
    assert not planted.exists()
    # The default root is created on first use, private to the user.
    assert check_allowed(home / "c", "cache_dir") == home / "c"
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert settings.cache_home() == home


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777])
def test_a_root_others_can_write_is_refused(root: Path, mode: int) -> None:
    root.chmod(mode)
    with pytest.raises(UnsafeRootError, match=rf"'{root}' is writable by other users.*chmod 700 {root}"):
        compile_model(_eager(root / "c"), model="single-attention", max_num_tokens=8)
    assert not (root / "c").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_a_root_another_user_owns_is_refused(root: Path) -> None:
    os.chown(root, 65534, -1)
    with pytest.raises(UnsafeRootError, match=r"owned by uid 65534, not by the worker's user"):
        check_allowed(root / "c", "cache_dir")


def test_a_missing_operator_root_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "not-yet"
    monkeypatch.setenv(ALLOWED_ROOTS_ENV, str(missing))
    reload_settings()
    with pytest.raises(UnsafeRootError, match=rf"'{missing}' .* does not exist; .*mkdir -m 700 {missing}"):
        check_allowed(missing / "c", "cache_dir")
    assert not missing.exists()


def test_a_root_in_a_folder_others_can_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "root").mkdir(mode=0o700)
    monkeypatch.setenv(ALLOWED_ROOTS_ENV, str(shared / "root"))
    reload_settings()
    shared.chmod(0o777)  # anyone could rename the root away and put their own in its place
    with pytest.raises(UnsafeRootError, match=rf"lies in '{shared}', which another user owns or may write"):
        check_allowed(shared / "root" / "c", "cache_dir")
    shared.chmod(0o1777)  # sticky, as /tmp: others cannot rename what they do not own
    check_allowed(shared / "root" / "c", "cache_dir")


# -- 2. no symlink out of a root ------------------------------------------------------------------


def test_a_symlink_below_cache_dir_is_not_followed(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "c").mkdir()
    (root / "c" / "rank_0_0").symlink_to(outside)
    with pytest.raises(PathNotAllowedError, match=r"'rank_0_0' is a symbolic link"):
        compile_model(_eager(root / "c"), model="single-attention", max_num_tokens=8)
    assert list(outside.iterdir()) == []


def test_a_symlink_below_the_debug_dump_path_is_not_followed(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "dump").mkdir()
    (root / "dump" / "rank_0_dp_0").symlink_to(outside)
    config = _eager(root / "c", debug_dump_path=root / "dump")
    with pytest.raises(PathNotAllowedError, match=r"outside the directories|symbolic link"):
        compile_model(config, model="single-attention", max_num_tokens=8)
    assert list(outside.iterdir()) == []


def test_a_symlinked_cache_file_is_neither_written_through_nor_read(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("outside the roots")
    link = root / "vllm_compile_cache.py"
    link.symlink_to(secret)
    with pytest.raises(PathNotAllowedError, match="symbolic link"):
        read_bytes(link)
    assert read_authenticated(link) is None
    atomic_write_text(link, "{}\n")  # replaces the link itself
    assert secret.read_text() == "outside the roots"
    assert not link.is_symlink() and link.read_text() == "{}\n"


def _model_folder(parent: Path, config_target: Path) -> Path:
    folder = parent / "model"
    folder.mkdir()
    (folder / "config.json").symlink_to(config_target)
    return folder


def test_a_symlinked_config_json_out_of_the_model_roots_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models, outside = tmp_path / "models", tmp_path / "outside"
    models.mkdir()
    outside.mkdir()
    (outside / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 4242,
                "num_attention_heads": 2,
            }
        )
    )
    monkeypatch.setenv(MODEL_ROOTS_ENV, str(models))
    monkeypatch.setenv(ALLOWED_ROOTS_ENV, str(tmp_path / "elsewhere"))
    reload_settings()
    folder = _model_folder(models, outside / "config.json")
    with pytest.raises(ValidationError, match=r"config\.json is not readable here"):
        ModelConfig(model=str(folder))


def test_a_symlinked_config_json_inside_the_model_roots_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Hugging Face cache links snapshots/<rev>/config.json to blobs/<hash>.
    models = tmp_path / "models"
    (models / "blobs").mkdir(parents=True)
    (models / "blobs" / "abc").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 4242,
                "num_attention_heads": 2,
            }
        )
    )
    monkeypatch.setenv(MODEL_ROOTS_ENV, str(models))
    reload_settings()
    folder = _model_folder(models, models / "blobs" / "abc")
    assert ModelConfig(model=str(folder)).get_hidden_size() == 4242


# -- 3. authenticated cache entries ---------------------------------------------------------------


def test_the_key_is_private_and_made_once(root: Path) -> None:
    write_authenticated(root / "entry", b"data")
    key = key_path()
    assert key.is_relative_to(get_settings().cache_home())
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert len(key.read_bytes()) == 32
    before = key.read_bytes()
    write_authenticated(root / "other", b"more")
    assert key.read_bytes() == before


def test_only_what_this_worker_wrote_reads_back(root: Path) -> None:
    entry = root / "entry"
    write_authenticated(entry, b"payload")
    assert read_authenticated(entry) == b"payload"
    assert read_authenticated(root / "absent") is None
    entry.write_bytes(b"payload!")  # changed since
    assert read_authenticated(entry) is None
    (root / "planted").write_bytes(b"payload")  # no MAC at all
    assert read_authenticated(root / "planted") is None
    # a valid MAC of another entry does not vouch for this one
    write_authenticated(root / "a", b"same")
    (root / "b").write_bytes(b"same")
    mac_path(root / "b").write_bytes(mac_path(root / "a").read_bytes())
    assert read_authenticated(root / "b") is None


def test_a_sealed_tree_is_checked_file_by_file(root: Path, tmp_path: Path) -> None:
    tree = root / "artifact"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "code.py").write_text("x = 1\n")
    seal(tree)
    assert is_sealed(tree)
    (tree / "sub" / "code.py").write_text("import os\n")
    assert not is_sealed(tree)
    (tree / "sub" / "code.py").write_text("x = 1\n")
    assert is_sealed(tree)
    (tree / "extra.py").write_text("")
    assert not is_sealed(tree)
    (tree / "extra.py").unlink()
    (tree / "link").symlink_to(tmp_path)
    assert not is_sealed(tree)


def test_an_unauthenticated_cache_key_factors_file_is_not_trusted(root: Path) -> None:
    first = compile_model(_eager(root / "a"), model="single-attention", max_num_tokens=8)
    assert first.report()["cache_status"] == "new"
    legit = Path(first.report()["local_cache_dir"])
    planted = root / "b" / "rank_0_0" / "backbone"
    planted.mkdir(parents=True)
    name = "cache_key_factors.json"
    (planted / name).write_bytes((legit / name).read_bytes())  # copied without its MAC
    again = compile_model(_eager(root / "b"), model="single-attention", max_num_tokens=8)
    assert again.report()["cache_status"] == "new"
    assert read_authenticated(planted / "cache_key_factors.json") is not None  # rewritten, ours now
    assert again.run(4)["max_abs_diff_vs_eager"] == 0.0
    assert (
        compile_model(_eager(root / "b"), model="single-attention", max_num_tokens=8).report()["cache_status"]
        == "reused"
    )


# -- 3, with Inductor: a planted or tampered artifact is never unpickled ---------------------------


class _Payload:
    """Unpickling this creates the marker file: what an attacker's artifact would run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def _evil_artifact(genuine: bytes, marker: Path) -> bytes:
    """A well-formed binary artifact whose every cache entry unpickles into `_Payload`."""
    from torch._inductor.codecache import torch_key
    from torch.compiler._cache import (
        CacheArtifactManager,
        _serialize_single_cache,
    )
    from torch.utils._appending_byte_serializer import AppendingByteSerializer, BytesReader, BytesWriter

    reader = BytesReader(genuine)
    header, _, key = reader.read_bytes(), reader.read_bytes(), reader.read_str()
    artifacts = CacheArtifactManager.deserialize(reader.read_bytes())
    assert artifacts
    for entries in artifacts.values():
        entries[:] = [dataclasses.replace(a, content=pickle.dumps(_Payload(marker))) for a in entries]
    serializer = AppendingByteSerializer(serialize_fn=_serialize_single_cache)
    serializer.extend(artifacts.items())
    writer = BytesWriter()
    writer.write_bytes(header)
    writer.write_bytes(torch_key())
    writer.write_str(key)
    writer.write_bytes(serializer.to_bytes())
    return writer.to_bytes()


def _inductor(cache_dir: Path, save_format: str = "binary") -> CompilationConfig:
    return CompilationConfig(
        mode=3,
        backend="inductor",
        cache_dir=str(cache_dir),
        splitting_ops=["silly::attention"],
        compile_cache_save_format=save_format,
    )


ARTIFACT = "artifact_compile_range_1_8_subgraph_0"


@pytest.mark.slow
def test_a_planted_cache_is_never_unpickled(root: Path, tmp_path: Path) -> None:
    legit = compile_model(_inductor(root / "legit"), model="single-attention", max_num_tokens=8)
    legit.run(4)
    source = Path(legit.report()["local_cache_dir"])
    marker = tmp_path / "pwned"
    # Another user's plant: the right factors, an index and artifacts, but no MACs of this worker.
    planted = root / "planted" / "rank_0_0" / "backbone"
    planted.mkdir(parents=True)
    for path in source.iterdir():
        if path.is_file() and not path.name.endswith(".mac"):
            (planted / path.name).write_bytes(path.read_bytes())
    for artifact in planted.glob("artifact_*"):
        artifact.write_bytes(_evil_artifact(artifact.read_bytes(), marker))

    model = compile_model(_inductor(root / "planted"), model="single-attention", max_num_tokens=8)
    assert model.run(4)["max_abs_diff_vs_eager"] < 1e-5
    assert not marker.exists()
    counters = model.report()["counters"]
    assert counters["num_compiled_artifacts_loaded"] == 0
    assert counters["num_inductor_compiles"] == 2


@pytest.mark.slow
def test_a_tampered_artifact_is_compiled_again_not_loaded(root: Path, tmp_path: Path) -> None:
    first = compile_model(_inductor(root / "c"), model="single-attention", max_num_tokens=8)
    first.run(4)
    local = Path(first.report()["local_cache_dir"])
    assert {p.name for p in local.glob("*.mac")} >= {
        "cache_key_factors.json.mac",
        "computation_graph.py.mac",
        "vllm_compile_cache.py.mac",
        f"{ARTIFACT}.mac",
    }
    marker = tmp_path / "pwned"
    artifact = local / ARTIFACT
    artifact.write_bytes(_evil_artifact(artifact.read_bytes(), marker))  # index and MAC left as they were
    # The bundle holds its own authenticated copy of every artifact and would load that;
    # without it the next start takes the per-piece path, which must refuse the tampered file.
    for name in (MANIFEST, PAYLOAD):
        (local / name).unlink()

    again = compile_model(_inductor(root / "c"), model="single-attention", max_num_tokens=8)
    assert again.run(4)["max_abs_diff_vs_eager"] < 1e-5
    assert not marker.exists()
    counters = again.report()["counters"]
    assert counters["num_compiled_artifacts_loaded"] == 1  # the untouched piece
    assert counters["num_inductor_compiles"] == 1
    # recompiled and sealed again: a third start loads both
    third = compile_model(_inductor(root / "c"), model="single-attention", max_num_tokens=8)
    third.run(4)
    assert third.report()["counters"]["num_compiled_artifacts_loaded"] == 2
    assert third.report()["counters"]["num_inductor_compiles"] == 0


@pytest.mark.slow
def test_unpacked_artifacts_are_authenticated_as_a_tree(root: Path) -> None:
    first = compile_model(_inductor(root / "c", "unpacked"), model="single-attention", max_num_tokens=8)
    first.run(4)
    local = Path(first.report()["local_cache_dir"])
    assert (local / ARTIFACT).is_dir() and is_sealed(local / ARTIFACT)

    warm = compile_model(_inductor(root / "c", "unpacked"), model="single-attention", max_num_tokens=8)
    assert warm.run(4)["max_abs_diff_vs_eager"] < 1e-5
    assert warm.report()["counters"]["num_compiled_artifacts_loaded"] == 2
    assert warm.report()["counters"]["num_inductor_compiles"] == 0

    code = next(p for p in (local / ARTIFACT).rglob("*.py"))
    code.write_text(code.read_text() + "\nraise SystemExit('planted code ran')\n")
    again = compile_model(_inductor(root / "c", "unpacked"), model="single-attention", max_num_tokens=8)
    assert again.run(4)["max_abs_diff_vs_eager"] < 1e-5
    assert again.report()["counters"]["num_compiled_artifacts_loaded"] == 1
    assert again.report()["counters"]["num_inductor_compiles"] == 1
