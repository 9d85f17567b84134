"""What vLLM 0.14.0's model registry (vllm/model_executor/models/registry.py) answers about an architecture,
from a declared table instead of vLLM's model classes.

`model_registry.json` holds, for each architecture whose class vLLM's CPU build can import, the
`_ModelInfo` vLLM inspects from that class (the runner kinds it serves, its attention type and default
pooling types, and the `SupportsPP`, `IsHybrid`, `IsAttentionFree`, `HasInnerState`, ... flags), with the
registry's full list of names (for its "not supported" message) and what the Transformers modelling
backend accepts. scripts/gen_model_registry.py writes it from vLLM itself, and a differential test checks
that it still does. The resolution (`inspect_model_cls`: the Transformers fallback, the `*For...` suffix
normalisation, the errors) is vLLM's code.

An architecture vLLM registers but the table lacks (its class needs `einops`, `torchvision`, ... that the
reference build has not) fails as vLLM fails where it cannot inspect a class: "failed to be inspected".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from compilation_bridge.vllm_config.logs import logger

if TYPE_CHECKING:
    from compilation_bridge.vllm_config.model import ModelConfig

TABLE = Path(__file__).with_name("model_registry.json")

RunnerType = Literal["generate", "pooling", "draft"]
ConvertType = Literal["none", "embed", "classify", "reward", "mm_encoder_only"]

# Some model suffixes are based on auto classes from Transformers:
# https://huggingface.co/docs/transformers/en/model_doc/auto
# NOTE: Items higher on this list priority over lower ones
SUFFIX_TO_DEFAULTS: list[tuple[str, tuple[RunnerType, ConvertType]]] = [
    ("ForCausalLM", ("generate", "none")),
    ("ForConditionalGeneration", ("generate", "none")),
    ("ChatModel", ("generate", "none")),
    ("LMHeadModel", ("generate", "none")),
    ("ForTextEncoding", ("pooling", "embed")),
    ("EmbeddingModel", ("pooling", "embed")),
    ("ForSequenceClassification", ("pooling", "classify")),
    ("ForTokenClassification", ("pooling", "classify")),
    ("ForAudioClassification", ("pooling", "classify")),
    ("ForImageClassification", ("pooling", "classify")),
    ("ForVideoClassification", ("pooling", "classify")),
    ("ClassificationModel", ("pooling", "classify")),
    ("ForRewardModeling", ("pooling", "embed")),
    ("RewardModel", ("pooling", "embed")),
    # Let other `*Model`s take priority
    ("Model", ("pooling", "embed")),
]


def try_match_architecture_defaults(
    architecture: str,
    *,
    runner_type: str | None = None,
    convert_type: str | None = None,
) -> tuple[str, tuple[RunnerType, ConvertType]] | None:
    for suffix, (default_runner_type, default_convert_type) in SUFFIX_TO_DEFAULTS:
        if (
            (runner_type is None or runner_type == default_runner_type)
            and (convert_type is None or convert_type == default_convert_type)
            and architecture.endswith(suffix)
        ):
            return suffix, (default_runner_type, default_convert_type)
    return None


@dataclass(frozen=True)
class _ModelInfo:
    """vLLM's `_ModelInfo`: what the registry inspects from a model class."""

    architecture: str
    is_text_generation_model: bool
    is_pooling_model: bool
    attn_type: str
    default_seq_pooling_type: str
    default_tok_pooling_type: str
    supports_cross_encoding: bool
    supports_multimodal: bool
    supports_multimodal_raw_input_only: bool
    requires_raw_input_tokens: bool
    supports_multimodal_encoder_tp_data: bool
    supports_pp: bool
    has_inner_state: bool
    is_attention_free: bool
    is_hybrid: bool
    has_noops: bool
    supports_mamba_prefix_caching: bool
    supports_transcription: bool
    supports_transcription_only: bool


@cache
def _table() -> dict[str, Any]:
    with TABLE.open(encoding="utf-8") as f:
        return json.load(f)


@cache
def _model_infos() -> dict[str, _ModelInfo]:
    return {arch: _ModelInfo(**info) for arch, info in _table()["models"].items()}


@cache
def supported_archs() -> dict[str, None]:
    """vLLM's registry names in its order (a dict, so that its `keys()` prints as vLLM's does); one
    shared dict, read only (every ModelConfig looks its architectures up in it)."""
    return dict.fromkeys(_table()["supported_architectures"])


def quantization_methods() -> list[str]:
    return list(_table()["quantization_methods"])


def deprecated_quantization_methods() -> list[str]:
    return list(_table()["deprecated_quantization_methods"])


def generation_config_defaults() -> dict[str, Any]:
    return dict(_table()["generation_config_defaults"])


def transformers_version() -> str:
    return str(_table()["transformers_version"])


def _try_inspect_model_cls(model_arch: str) -> _ModelInfo | None:
    if model_arch not in supported_archs():
        return None
    info = _model_infos().get(model_arch)
    if info is None:
        logger.error(
            "Error in inspecting model architecture '%s': vLLM 0.14.0 registers it, but its model class "
            "needs packages vLLM's CPU build lacks, so this worker's table has no facts for it",
            model_arch,
        )
    return info


def _raise_for_unsupported(architectures: list[str]) -> Any:
    all_supported_archs = supported_archs().keys()
    if any(arch in all_supported_archs for arch in architectures):
        raise ValueError(
            f"Model architectures {architectures} failed "
            "to be inspected. Please check the logs for more details."
        )
    previously = _table()["previously_supported"]
    for arch in architectures:
        if arch in previously:
            raise ValueError(
                f"Model architecture {arch} was supported in vLLM until "
                f"v{previously[arch]}, and is not supported anymore. "
                "Please use an older version of vLLM if you want to "
                "use this model architecture."
            )
    raise ValueError(
        f"Model architectures {architectures} are not supported for now. "
        f"Supported architectures: {all_supported_archs}"
    )


def _try_resolve_transformers(architecture: str, model_config: ModelConfig) -> str | None:
    """vLLM's resolution of the Transformers modelling backend class. Only transformers' own classes are
    known here (the table says which are backend-compatible); a config's `auto_map` names remote code,
    which this worker never loads."""
    if architecture in _table()["transformers_backend_models"]:
        return architecture
    if model_config.hf_config.get("auto_map"):
        raise ValueError(
            f"model {model_config.model!r}: its config.json names remote code (auto_map); this worker "
            "never loads a model's own code"
        )
    compatible = _table()["transformers_backend_compatible"].get(architecture)
    if compatible is None:
        if model_config.model_impl != "transformers":
            return None
        raise ValueError(
            f"Cannot find model module. {architecture!r} is not a "
            "registered model in the Transformers library (only "
            "relevant if the model is meant to be in Transformers) "
            "and 'AutoModel' is not present in the model config's "
            "'auto_map' (relevant if the model is custom)."
        )
    if not compatible:
        if model_config.model_impl != "transformers":
            return None
        raise ValueError(f"The Transformers implementation of {architecture!r} is not compatible with vLLM.")
    return model_config._get_transformers_backend_cls()


def _normalize_arch(architecture: str, model_config: ModelConfig) -> str:
    if architecture in supported_archs():
        return architecture
    # This may be called in order to resolve runner_type and convert_type
    # in the first place, in which case we consider the default match
    match = try_match_architecture_defaults(
        architecture,
        runner_type=getattr(model_config, "runner_type", None),
        convert_type=getattr(model_config, "convert_type", None),
    )
    if match:
        suffix, _ = match
        # Get the name of the base model to convert
        for repl_suffix, _ in SUFFIX_TO_DEFAULTS:
            base_arch = architecture.replace(suffix, repl_suffix)
            if base_arch in supported_archs():
                return base_arch
    return architecture


def inspect_model_cls(architectures: str | list[str], model_config: ModelConfig) -> tuple[_ModelInfo, str]:
    """vLLM's `_ModelRegistry.inspect_model_cls`."""
    if isinstance(architectures, str):
        architectures = [architectures]
    if not architectures:
        raise ValueError("No model architectures are specified")
    registered = supported_archs()

    # Require transformers impl
    if model_config.model_impl == "transformers":
        arch = _try_resolve_transformers(architectures[0], model_config)
        if arch is not None:
            model_info = _try_inspect_model_cls(arch)
            if model_info is not None:
                return (model_info, arch)
    elif model_config.model_impl == "terratorch":
        return (_try_inspect_model_cls("Terratorch"), "Terratorch")  # type: ignore[return-value]

    # Fallback to transformers impl (after resolving convert_type)
    if (
        all(arch not in registered for arch in architectures)
        and model_config.model_impl == "auto"
        and getattr(model_config, "convert_type", "none") == "none"
    ):
        arch = _try_resolve_transformers(architectures[0], model_config)
        if arch is not None:
            model_info = _try_inspect_model_cls(arch)
            if model_info is not None:
                return (model_info, arch)

    for arch in architectures:
        normalized_arch = _normalize_arch(arch, model_config)
        model_info = _try_inspect_model_cls(normalized_arch)
        if model_info is not None:
            return (model_info, arch)

    # Fallback to transformers impl (before resolving runner_type)
    if all(arch not in registered for arch in architectures) and model_config.model_impl == "auto":
        arch = _try_resolve_transformers(architectures[0], model_config)
        if arch is not None:
            model_info = _try_inspect_model_cls(arch)
            if model_info is not None:
                return (model_info, arch)

    return _raise_for_unsupported(architectures)


def is_text_generation_model(architectures: str | list[str], model_config: ModelConfig) -> bool:
    return inspect_model_cls(architectures, model_config)[0].is_text_generation_model


def is_pooling_model(architectures: str | list[str], model_config: ModelConfig) -> bool:
    return inspect_model_cls(architectures, model_config)[0].is_pooling_model


def is_pp_supported_model(architectures: str | list[str], model_config: ModelConfig) -> bool:
    return inspect_model_cls(architectures, model_config)[0].supports_pp
