"""The files of a model folder that vLLM 0.14.0's `ModelConfig` reads (vllm/transformers_utils/config.py),
read from local folders only and only under the roots the worker allows.

A folder is one bundled with the package (`tiny-llama`) or lies under the operator's allowed roots or
`COMPILATION_BRIDGE_MODEL_ROOTS`, so a caller cannot probe the file system through it; every file is
opened without following a symlink out of those roots (`compilation_bridge.safe_files`). Never the hub,
never weights: `config.json`, and where vLLM looks for them `generation_config.json`, the
sentence-transformers files (`modules.json`, its pooling and dense layers' `config.json`,
`sentence_*_config.json`) and `tokenizer_config.json`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from compilation_bridge.safe_files import PathNotAllowedError, read_bytes
from compilation_bridge.settings import MODEL_ROOTS_ENV, get_settings, model_roots_setting
from compilation_bridge.vllm_config.hf_config_json import hf_config_dict

BUNDLED_MODELS = Path(__file__).parent / "models"
MAX_CONFIG_BYTES = 1 << 20
SENTENCE_TRANSFORMER_CONFIG_FILES = (
    "sentence_bert_config.json",
    "sentence_roberta_config.json",
    "sentence_distilbert_config.json",
    "sentence_camembert_config.json",
    "sentence_albert_config.json",
    "sentence_xlm-roberta_config.json",
    "sentence_xlnet_config.json",
)
SEQ_POOLING_TYPES = ("CLS", "LAST", "MEAN")
TOK_POOLING_TYPES = ("ALL", "STEP")


@functools.cache
def _bundled_root() -> Path:
    return BUNDLED_MODELS.resolve()


def readable_roots() -> list[Path]:
    return [_bundled_root(), *get_settings().allowed_roots, *model_roots_setting()]


def _folder(model: str) -> Path:
    bundled = BUNDLED_MODELS / model
    folder = bundled if "/" not in model and bundled.is_dir() else Path(model).expanduser()
    return folder.resolve()


def _under_roots(folder: Path) -> bool:
    return any(folder.is_relative_to(root) for root in readable_roots())


def is_readable_folder(model: str) -> bool:
    return _under_roots(_folder(model))


def resolve_model_dir(model: str) -> Path:
    folder = _folder(model)
    if not _under_roots(folder):
        raise ValueError(
            f"model {model!r} is not a bundled model and not under an allowed root "
            f"(set {MODEL_ROOTS_ENV}); only local folders with a config.json are read, never the hub"
        )
    if not (folder / "config.json").is_file():
        raise ValueError(f"model {model!r}: no config.json in that folder (the hub is never consulted)")
    return folder


def _read(path: Path, model: str) -> bytes | None:
    """A file's bytes, None when it does not exist; a link out of the roots is refused."""
    if not path.is_file():
        return None
    try:
        # Resolved and re-checked against the roots as it is opened: a file that is a symlink out of them
        # (planted after the folder was checked) is refused, not read.
        return read_bytes(path, max_bytes=MAX_CONFIG_BYTES, roots=readable_roots(), follow=True)
    except PathNotAllowedError as e:
        raise ValueError(f"model {model!r}: {path.name} is not readable here: {e}") from e
    except ValueError as e:
        raise ValueError(f"model {model!r}: {path.name} is larger than {MAX_CONFIG_BYTES} bytes") from e


def load_hf_config(model: str) -> dict[str, Any]:
    raw = _read(resolve_model_dir(model) / "config.json", model)
    if raw is None:
        raise ValueError(f"model {model!r}: no config.json in that folder (the hub is never consulted)")
    config = json.loads(raw)
    if not isinstance(config, dict):
        raise ValueError(f"model {model!r}: config.json must hold a JSON object")
    return config


def read_json(model: str, name: str) -> Any:
    """`name` (a path relative to the model folder) as JSON; None when the folder is not one this worker
    reads, the file is missing or is no JSON (where vLLM, too, finds nothing)."""
    folder = _folder(model)
    if not _under_roots(folder):
        return None
    path = folder / name
    # Most files asked for are absent (vLLM looks for several): that is answered before resolving a path.
    if not path.is_file() or not path.resolve().is_relative_to(folder):
        return None
    raw = _read(path, model)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def get_pooling_config(model: str) -> dict[str, Any] | None:
    """vLLM's `get_pooling_config`: the pooling types and normalisation of a sentence-transformers model."""
    modules_dict = read_json(model, "modules.json")
    if modules_dict is None:
        return None
    pooling = next(
        (item for item in modules_dict if item["type"] == "sentence_transformers.models.Pooling"), None
    )
    normalize = bool(
        next(
            (item for item in modules_dict if item["type"] == "sentence_transformers.models.Normalize"),
            False,
        )
    )
    if pooling:
        pooling_dict = read_json(model, "{}/config.json".format(pooling["path"])) or {}
        config: dict[str, Any] = {"use_activation": normalize}
        for key, val in pooling_dict.items():
            if val is True:
                pooling_type = parse_pooling_type(key)
                if pooling_type in SEQ_POOLING_TYPES:
                    config["seq_pooling_type"] = pooling_type
                elif pooling_type in TOK_POOLING_TYPES:
                    config["tok_pooling_type"] = pooling_type
        return config
    return None


def parse_pooling_type(pooling_name: str) -> str:
    if "pooling_mode_" in pooling_name:
        pooling_name = pooling_name.replace("pooling_mode_", "")
    if "_" in pooling_name:
        pooling_name = pooling_name.split("_", 1)[0]
    if "lasttoken" in pooling_name:
        pooling_name = "last"
    return pooling_name.upper()


def get_sentence_transformer_tokenizer_config(model: str) -> dict[str, Any] | None:
    """vLLM's `get_sentence_transformer_tokenizer_config`, for a local folder."""
    encoder_dict = None
    for config_file in SENTENCE_TRANSFORMER_CONFIG_FILES:
        encoder_dict = read_json(model, config_file)
        if encoder_dict:
            break
    if not encoder_dict:
        return None
    if all(k in encoder_dict for k in ("max_seq_length", "do_lower_case")):
        return encoder_dict
    return None


def try_get_dense_modules(model: str) -> list[dict[str, Any]] | None:
    """vLLM's `try_get_dense_modules`: the sentence-transformers Dense layers' configs."""
    try:
        modules = read_json(model, "modules.json")
        if not modules:
            return None
        if isinstance(modules, dict):
            modules = modules.get("modules", [])
        dense_modules = [m for m in modules if m.get("type") == "sentence_transformers.models.Dense"]
        if not dense_modules:
            return None
        layer_configs = []
        for module in dense_modules:
            folder = module.get("path", "")
            config_path = f"{folder}/config.json" if folder else "config.json"
            layer_config = read_json(model, config_path)
            if not layer_config:
                continue
            layer_config["folder"] = folder
            layer_configs.append(layer_config)
        return layer_configs
    except Exception:
        return None


def try_get_tokenizer_config(tokenizer: str) -> dict[str, Any] | None:
    """The tokenizer's `tokenizer_config.json` (transformers' `get_tokenizer_config`), None when absent."""
    return read_json(tokenizer, "tokenizer_config.json")


_EXTRA_OUTPUT_FLAGS = ("output_attentions", "output_hidden_states", "output_scores", "output_logits")
_INVALID_REPOSITORY = (
    "Invalid repository ID or local directory specified:"
    " '{model}'.\nPlease verify the following requirements:\n"
    "1. Provide a valid Hugging Face repository ID.\n"
    "2. Specify a local directory that contains a recognized "
    "configuration file.\n"
    "   - For Hugging Face models: ensure the presence of a "
    "'config.json'.\n"
    "   - For Mistral models: ensure the presence of a "
    "'params.json'.\n"
)


def try_get_generation_config(model: str) -> dict[str, Any] | None:
    """vLLM's `try_get_generation_config(...).to_diff_dict()` for a local folder: the folder's
    `generation_config.json`, else the generation fields of its `config.json` (transformers'
    `GenerationConfig.from_model_config`), as the values that differ from `GenerationConfig()`'s, with the
    transformers version vLLM 0.14.0's reference build serialises (4.57.6)."""
    from compilation_bridge.vllm_config import model_registry

    if not is_readable_folder(model):
        raise ValueError(
            f"generation config {model!r} is not a bundled model and not under an allowed root "
            f"(set {MODEL_ROOTS_ENV}); only local folders are read, never the hub"
        )
    defaults = model_registry.generation_config_defaults()
    generation = read_json(model, "generation_config.json")
    if isinstance(generation, dict):
        values = {**defaults, **generation}
    else:
        config = read_json(model, "config.json")
        if not isinstance(config, dict):
            raise ValueError(_INVALID_REPOSITORY.format(model=model))
        # vLLM reads the generation fields of the transformers object: its class's defaults count.
        config = hf_config_dict(config, model, {}) or config
        values = {**defaults, "_from_model_config": True}
        values.update({k: v for k, v in config.items() if k in defaults and v is not None})
        values.pop("transformers_version", None)
        values["_from_model_config"] = True
        if values["return_dict_in_generate"] is False and any(
            values.get(flag, False) for flag in _EXTRA_OUTPUT_FLAGS
        ):
            values["return_dict_in_generate"] = True
    diff = {k: v for k, v in values.items() if k not in defaults or v != defaults[k]}
    diff.pop("transformers_version", None)
    diff["transformers_version"] = model_registry.transformers_version()
    return diff
