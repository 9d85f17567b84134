"""ModelConfig's config as the attributes of transformers' object, and its hash over that object's JSON
(vllm_config/hf_config_json.py), on what the differential tests do not serve: configs a caller writes
(vLLM's own config classes, unknown model types, remote code, configs transformers refuses), which fall
back to the dict and never fail the worker, and a config changed after construction, which the cache
must not hide."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compilation_bridge.refs import state
from compilation_bridge.settings import MODEL_ROOTS_ENV
from compilation_bridge.vllm_config import ModelConfig, ParallelConfig
from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors
from compilation_bridge.vllm_config.hf_config_json import hf_config_dict, hf_config_jsons
from compilation_bridge.vllm_config.model import _HASH_IGNORED_FACTORS

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "max_position_embeddings": 256,
    "torch_dtype": "bfloat16",
}


def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: dict[str, Any]) -> str:
    (tmp_path / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv(MODEL_ROOTS_ENV, str(tmp_path))
    return str(tmp_path)


def dict_hash(config: ModelConfig) -> str:
    """The hash with the configs hashed as the dicts they are here (the fallback)."""
    return hash_factors(get_hash_factors(config, _HASH_IGNORED_FACTORS))


def test_the_hash_holds_transformers_json_of_the_config(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ModelConfig(model=folder(tmp_path, monkeypatch, LLAMA))
    jsons = config._hf_config_jsons()
    assert jsons is not None
    built = json.loads(jsons[0])
    # The class's defaults, vLLM's RoPE patch, `dtype` for `torch_dtype`, the transformers release.
    assert built["rms_norm_eps"] == 1e-06 and built["head_dim"] == 16
    assert built["rope_parameters"] == {"rope_type": "default", "rope_theta": 10000.0}
    assert built["dtype"] == "bfloat16" and "torch_dtype" not in built
    assert built["transformers_version"] == "4.57.6"
    assert jsons[1] == jsons[0]  # a text-only model's text config is its config


@pytest.mark.parametrize(
    "config",
    [
        {**LLAMA, "model_type": "chatglm"},  # a config class vLLM defines itself, not ported
        {**LLAMA, "model_type": "no_such_type"},
        {**LLAMA, "model_type": "__import__('os')"},
        {**LLAMA, "num_attention_heads": 0},  # LlamaConfig divides by it
    ],
    ids=repr,
)
def test_a_config_that_cannot_be_built_is_hashed_as_its_dict(config: dict[str, Any]) -> None:
    assert hf_config_jsons(config, "m", {}, config, config) is None


def test_remote_code_is_never_run(tmp_path: Path) -> None:
    (tmp_path / "evil_config.py").write_text("raise SystemExit('remote code ran')\n")
    config = {**LLAMA, "auto_map": {"AutoConfig": "evil_config.EvilConfig"}}
    jsons = hf_config_jsons(config, str(tmp_path), {}, config, config)
    assert jsons is not None and json.loads(jsons[0])["auto_map"] == config["auto_map"]
    assert "evil_config" not in sys.modules


def test_a_config_never_makes_transformers_load_another_one(tmp_path: Path) -> None:
    """LightGlue's config class loads its keypoint detector's config by the `_name_or_path` and with the
    `trust_remote_code` a caller's config gives, XCodec its semantic model's by name, EdgeTAM its default
    backbone's from the hub: none is loaded (no code runs, no other folder is read, the hub is not
    asked), and the config falls back to its dict."""
    evil = tmp_path / "evil"
    evil.mkdir()
    evil_config = {"model_type": "evil", "auto_map": {"AutoConfig": "code.C"}}
    (evil / "config.json").write_text(json.dumps(evil_config))
    (evil / "code.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w')\n")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "config.json").write_text(json.dumps({"model_type": "hubert", "secret_value": 4242}))
    detector = {"model_type": "not_a_type", "_name_or_path": str(evil)}
    configs = [
        {"model_type": "lightglue", "trust_remote_code": True, "keypoint_detector_config": detector},
        {"model_type": "xcodec", "semantic_model_config": {"_name_or_path": str(secret)}},
        {"model_type": "edgetam"},
    ]
    for config in configs:
        assert hf_config_dict(config, "m", {}) is None
        assert hf_config_jsons(config, "m", {}, config, config) is None
    assert not (tmp_path / "ran").exists()


def test_a_vllm_config_type_the_worker_serves_falls_back(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ModelConfig(model=folder(tmp_path, monkeypatch, {**LLAMA, "model_type": "chatglm"}))
    assert config._hf_config_jsons() is None
    assert config.compute_hash() == dict_hash(config)


def test_a_change_after_construction_changes_the_hash(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ModelConfig(model=folder(tmp_path, monkeypatch, LLAMA))
    before = config.compute_hash()
    config.hf_text_config["sliding_window"] = 32
    assert config.compute_hash() != before
    assert '"sliding_window": 32' in config._hf_config_jsons()[0]  # type: ignore[index]
    del config.hf_text_config["sliding_window"]
    assert config.compute_hash() == before


def test_a_config_assigned_afterwards_is_hashed_as_its_dict(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ModelConfig(model=folder(tmp_path, monkeypatch, LLAMA))
    config.hf_config = config.hf_text_config = dict(config.hf_config)
    assert config._hf_config_jsons() is None
    assert config.compute_hash() == dict_hash(config)


def test_the_config_holds_the_class_defaults_a_config_json_leaves_out(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    minimal = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "num_hidden_layers": 2}
    config = ModelConfig(model=folder(tmp_path, monkeypatch, minimal))
    assert config.hf_config["hidden_size"] == 4096 and config.hf_config["sliding_window"] == 4096
    assert config.get_sliding_window() == 4096 and config.get_head_size() == 128
    assert config.get_num_layers_by_block_type(ParallelConfig()) == 2


def test_a_class_alias_is_read_as_transformers_reads_it(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpt2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_head": 4, "n_embd": 64}
    config = ModelConfig(model=folder(tmp_path, monkeypatch, gpt2), hf_overrides={"n_layer": 3})
    assert config.get_total_num_attention_heads() == 4 and config.get_hidden_size() == 64
    assert config.get_total_num_hidden_layers() == 3  # `config.update` sets n_layer; the alias follows
    text = {"model_type": "gpt2", "n_head": 2, "n_embd": 32, "n_layer": 1}
    nested = hf_config_dict({"model_type": "llava", "text_config": text}, "m", {})
    assert nested is not None and nested["text_config"]["num_attention_heads"] == 2


def test_a_config_that_cannot_be_built_is_read_as_its_dict(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ModelConfig(model=folder(tmp_path, monkeypatch, {**LLAMA, "model_type": "chatglm"}))
    assert config.hf_config == {**LLAMA, "model_type": "chatglm"}


def test_each_caller_gets_a_config_of_its_own(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The built dict is cached: a change to one config must not reach the next one built alike."""
    first = ModelConfig(model=folder(tmp_path, monkeypatch, LLAMA))
    first.hf_config["hidden_size"] = 8
    first.hf_config["rope_parameters"]["rope_theta"] = 1.0
    second = ModelConfig(model=folder(tmp_path, monkeypatch, LLAMA))
    assert second.hf_config["hidden_size"] == 64
    assert second.hf_config["rope_parameters"]["rope_theta"] == 10000.0


def test_the_worker_imports_no_transformers() -> None:
    code = "import sys, compilation_bridge.worker; print('transformers' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# A fresh process hashing the bundled tiny Llama: the hash, whether torch got imported, USE_TORCH afterwards.
HASH_IN_A_FRESH_PROCESS = """
import os, sys
if sys.argv[1] == "transformers-first":
    import transformers.models.auto.configuration_auto  # with torch, as vLLM's process has it
from compilation_bridge.vllm_config import ModelConfig, ParallelConfig
from compilation_bridge.vllm_config.platforms import set_platform
set_platform("cpu")
config = ModelConfig(model="tiny-llama")
print(config.compute_hash(), "torch" in sys.modules, os.environ.get("USE_TORCH"))
"""


def test_a_model_hash_loads_transformers_without_torch_and_hashes_alike() -> None:
    """The first model hash of a worker loads transformers with torch support off (importing torch took
    seconds), leaves the environment as it was, and hashes as transformers with torch does."""

    def run(mode: str) -> list[str]:
        command = [sys.executable, "-c", HASH_IN_A_FRESH_PROCESS, mode]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "None of PyTorch" not in done.stderr
        return done.stdout.split()

    alone, after_transformers = run("alone"), run("transformers-first")
    assert alone[1:] == ["False", "None"]
    assert after_transformers[1] == "True"
    assert alone[0] == after_transformers[0]


def test_a_config_from_the_ref_store_hashes_the_same(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker rebuilds the config from its stored state: the loaded dicts stay the same objects."""
    config = ModelConfig(model=folder(tmp_path, monkeypatch, LLAMA))
    config.hf_config["sliding_window"] = 16
    restored = state.decode(state.encode(config))
    assert restored._hf_config_jsons() is not None
    assert restored.compute_hash() == config.compute_hash()


@pytest.mark.parametrize(
    "config, name, model_type",
    [
        # AutoConfig's heuristic: a Mistral config with per-layer attention types is a Ministral one.
        ({**LLAMA, "model_type": "mistral", "layer_types": ["full_attention"] * 2}, "m", "ministral"),
        # Without a model type AutoConfig takes the longest one the model's name holds.
        ({k: v for k, v in LLAMA.items() if k != "model_type"}, "models/tiny-mixtral-x", "mixtral"),
    ],
)
def test_the_class_is_picked_as_auto_config_picks_it(
    config: dict[str, Any], name: str, model_type: str
) -> None:
    jsons = hf_config_jsons(config, name, {}, config, config)
    assert jsons is not None and json.loads(jsons[0])["model_type"] == model_type


QWEN2 = {**LLAMA, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}  # a layer_types list


@pytest.mark.parametrize(
    "config, hf_overrides, refused",
    [
        ({**QWEN2, "num_hidden_layers": 10**9}, {}, "config.json.num_hidden_layers"),
        # an override that brings it down does not help: transformers loads the file's count first
        ({**QWEN2, "num_hidden_layers": 10**9}, {"num_hidden_layers": 2}, "config.json.num_hidden_layers"),
        (QWEN2, {"num_hidden_layers": 2**16 + 1}, "hf_config.num_hidden_layers"),
        (QWEN2, {"text_config": {"num_layers": 2**20}}, "hf_overrides.text_config.num_layers"),
        ({**QWEN2, "block_configs": [{"num_blocks": 2**17}]}, {}, r"block_configs\[0\].num_blocks"),
        # an `id2label` entry a label: a million took seconds to build
        ({**LLAMA, "num_labels": 10**9}, {}, "config.json.num_labels"),
        (LLAMA, {"num_labels": 2**17}, "hf_config.num_labels"),
    ],
)
def test_a_layer_count_that_would_build_a_list_that_long_is_refused(
    cpu: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    config: dict[str, Any],
    hf_overrides: dict[str, Any],
    refused: str,
) -> None:
    """transformers builds a list a layer long (Qwen2's `layer_types`) and a label name a label as it
    loads a config: a count in the billions would hold the worker, so the config is refused, naming the
    count and the cap."""
    with pytest.raises(ValueError, match=rf"{refused} must be at most 65536 \(2\*\*16\)"):
        ModelConfig(model=folder(tmp_path, monkeypatch, config), hf_overrides=hf_overrides)


def test_a_layer_count_set_after_construction_is_refused_when_hashed(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ModelConfig(model=folder(tmp_path, monkeypatch, QWEN2))
    config.hf_overrides = {"num_hidden_layers": 10**9}
    with pytest.raises(ValueError, match=r"hf_overrides\.num_hidden_layers must be at most 65536"):
        config.compute_hash()
    config.hf_overrides = {}
    assert config.compute_hash() == ModelConfig(model=folder(tmp_path, monkeypatch, QWEN2)).compute_hash()


def test_the_cache_of_built_jsons_is_bounded_in_bytes(
    cpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each entry holds a caller's whole config as JSON: the cache keeps at most its byte budget of them,
    the newest, and answers from it as before."""
    from compilation_bridge.vllm_config import hf_config_json

    cache = hf_config_json._BuiltCache(entries=64, max_bytes=20_000)
    monkeypatch.setattr(hf_config_json, "_CACHE", cache)
    padded = [{**LLAMA, "padding": "x" * 4000, "num_hidden_layers": n} for n in range(1, 9)]
    built = [hf_config_jsons(config, "m", {}, config, config) for config in padded]
    assert all(result is not None for result in built)
    assert cache.held_bytes <= 20_000
    assert 1 < len(cache) < len(padded)
    assert hf_config_jsons(padded[-1], "m", {}, padded[-1], padded[-1]) == built[-1]


def test_transformers_own_warnings_about_a_callers_config_are_not_logged(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """transformers warns about an odd RoPE factor as it loads: one line a call, which a caller could repeat
    to fill the worker's log."""
    config = {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": 0.5}}
    assert hf_config_jsons(config, "m", {}, config, config) is not None
    assert "rope_scaling" not in capfd.readouterr().err


# Keys transformers' config classes act on as they load (lists a layer long, RoPE validation, dtypes,
# sub-configs, aliases), given values of every JSON kind, large ones included.
FUZZED_KEYS = [
    "model_type",
    "num_labels",
    "num_hidden_layers",
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "layer_types",
    "sliding_window",
    "max_window_layers",
    "rope_scaling",
    "rope_theta",
    "rope_parameters",
    "torch_dtype",
    "text_config",
    "quantization_config",
    "attribute_map",
    "__class__",
    "__dict__",
    "auto_map",
    "transformers_version",
]
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True)
    | st.sampled_from(["llama", "qwen2", "gemma3", "mistral", "bfloat16", "float16", "linear", "default"])
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(FUZZED_KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(changes=st.dictionaries(st.sampled_from(FUZZED_KEYS), JSON_VALUES, max_size=6))
def test_any_config_builds_falls_back_or_is_refused_and_never_holds_the_worker(
    changes: dict[str, Any],
) -> None:
    """Whatever a caller's config holds, the transformers JSON and dict are built, or None (the dict is used),
    or the layer cap refuses it with a ValueError; nothing else escapes and nothing takes long."""
    config = {**LLAMA, **changes}
    started = time.monotonic()
    try:
        result = hf_config_jsons(config, "m", {}, config, config)
        values = hf_config_dict(config, "m", {})
    except ValueError as e:
        assert "must be at most 65536" in str(e)
    else:
        assert result is None or all(isinstance(text, str) for text in result)
        assert values is None or isinstance(values, dict)
    assert time.monotonic() - started < 30
