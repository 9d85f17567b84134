"""What vLLM 0.14.0 reads of a model's transformers config (vllm/transformers_utils/config.py), over the
dict read from `config.json`: the RoPE fields it patches into `rope_parameters`, the text section of a
composite config, M-RoPE detection, and the pipeline-stage layer split (vllm/distributed/utils.py)."""

from __future__ import annotations

from typing import Any

from compilation_bridge.vllm_config.env import raw
from compilation_bridge.vllm_config.model_arch import ConfigFields, HFConfig, getattr_iter


def patch_rope_parameters(config: ConfigFields) -> None:
    """vLLM's `patch_rope_parameters` for transformers 4: legacy RoPE fields into `rope_parameters`."""
    rope_theta = getattr_iter(config, ["rope_theta", "rotary_emb_base"], None)
    partial_rotary_factor = getattr_iter(
        config, ["partial_rotary_factor", "rotary_pct", "rotary_emb_fraction"], None
    )
    ompe = config.get("original_max_position_embeddings")
    if (rope_scaling := config.get("rope_scaling")) is not None:
        config["rope_parameters"] = rope_scaling
    if (rope_theta is not None or partial_rotary_factor is not None or ompe is not None) and not config.get(
        "rope_parameters"
    ):
        config["rope_parameters"] = {"rope_type": "default"}
    if rope_theta is not None:
        config["rope_parameters"]["rope_theta"] = rope_theta
    if partial_rotary_factor is not None:
        config["rope_parameters"]["partial_rotary_factor"] = partial_rotary_factor
    if ompe is not None:
        config["rope_parameters"]["original_max_position_embeddings"] = ompe
    rope_parameters = config.get("rope_parameters")
    if rope_parameters is None:
        return
    if is_rope_parameters_nested(rope_parameters):
        for layer_rope_parameters in rope_parameters.values():
            _patch_rope_parameters_dict(layer_rope_parameters)
    else:
        _patch_rope_parameters_dict(rope_parameters)


# transformers' attention layer types (`ALLOWED_ATTENTION_LAYER_TYPES`)
_ATTENTION_LAYER_TYPES = (
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "linear_attention",
)


def is_rope_parameters_nested(rope_parameters: dict[str, Any]) -> bool:
    """Check if rope_parameters is nested by layer types."""
    if not rope_parameters:
        return False
    return set(rope_parameters.keys()).issubset(_ATTENTION_LAYER_TYPES)


def _patch_rope_parameters_dict(rope_parameters: dict[str, Any]) -> None:
    if "rope_type" in rope_parameters and "type" in rope_parameters:
        rope_type = rope_parameters["rope_type"]
        rope_type_legacy = rope_parameters["type"]
        if (rope_type_legacy == "su" and rope_type == "longrope") or (
            rope_type_legacy == "mrope" and rope_type == "default"
        ):
            pass  # No action needed
        elif rope_type != rope_type_legacy:
            raise ValueError(
                f"Found conflicts between 'rope_type={rope_type}' (modern "
                f"field) and 'type={rope_type_legacy}' (legacy field). "
                "You should only specify one of them."
            )
    if "rope_type" not in rope_parameters and "type" in rope_parameters:
        rope_parameters["rope_type"] = rope_parameters["type"]
    if "rope_type" not in rope_parameters:
        raise ValueError("rope_parameters should have a 'rope_type' key")
    if rope_parameters["rope_type"] == "su":
        rope_parameters["rope_type"] = "longrope"
    elif rope_parameters["rope_type"] == "mrope":
        if "mrope_section" not in rope_parameters:
            raise ValueError("Legacy rope_type 'mrope' requires 'mrope_section' in rope_parameters")
        rope_parameters["rope_type"] = "default"


def get_text_config(config: HFConfig) -> HFConfig:
    """transformers' `PretrainedConfig.get_text_config()`: the text section of a composite config."""
    names = [n for n in ("text_encoder", "decoder", "generator", "text_config") if config.get(n) is not None]
    if len(names) > 1:
        raise ValueError(
            f"Multiple valid text configs were found in the model config: {names}. In this "
            "case, using `get_text_config()` would be ambiguous. Please specify the desired text config "
            "directly, e.g. `text_config = config.sub_config_name`"
        )
    return config[names[0]] if names else config


def get_hf_text_config(config: HFConfig) -> HFConfig:
    """Get the "sub" config relevant to llm for multi modal models.
    No op for pure text models.
    """
    text_config = get_text_config(config)
    if text_config is not config and "num_attention_heads" not in text_config:
        raise ValueError(
            "The text_config extracted from the model config does not have "
            "`num_attention_heads` attribute. This indicates a mismatch "
            "between the model config and vLLM's expectations. Please "
            "ensure that the model config is compatible with vLLM."
        )
    return text_config


def _uses_mrope(config: HFConfig) -> bool:
    rope_parameters = config.get("rope_parameters")
    if rope_parameters is None:
        return False
    return "mrope_section" in rope_parameters


def uses_mrope(config: HFConfig) -> bool:
    """Detect if the model with this config uses M-ROPE."""
    thinker_text_config = (config.get("thinker_config") or {}).get("text_config")
    return (
        _uses_mrope(config)
        or _uses_mrope(get_text_config(config))
        or (thinker_text_config is not None and uses_mrope(thinker_text_config))
    )


def layers_block_type(config: HFConfig) -> list[str] | None:
    """`layers_block_type` of a hybrid's config; transformers' Jamba config derives it from the attention
    layers' period and offset."""
    if "layers_block_type" in config:
        return config["layers_block_type"]
    if config.get("model_type") == "jamba":
        period, offset = config.get("attn_layer_period", 8), config.get("attn_layer_offset", 4)
        return [
            "attention" if i % period == offset else "mamba"
            for i in range(config.get("num_hidden_layers", 32))
        ]
    return None


def get_pp_indices(num_hidden_layers: int, pp_rank: int, pp_size: int) -> tuple[int, int]:
    """vLLM's `get_pp_indices` (vllm/distributed/utils.py): the layers of one pipeline stage."""
    partition_list_str = raw("VLLM_PP_LAYER_PARTITION")
    if partition_list_str is not None:
        try:
            partitions = [int(layer) for layer in partition_list_str.split(",")]
        except ValueError as err:
            raise ValueError(f"Invalid partition string: {partition_list_str}") from err
        if len(partitions) != pp_size:
            raise ValueError(f"{len(partitions)=} does not match {pp_size=}.")
        if sum(partitions) != num_hidden_layers:
            raise ValueError(f"{sum(partitions)=} does not match {num_hidden_layers=}.")
    else:
        layers_per_partition = num_hidden_layers // pp_size
        partitions = [layers_per_partition for _ in range(pp_size)]
        if remaining_layers := num_hidden_layers % pp_size:
            for i in range(2, remaining_layers + 2):
                partitions[-i] += 1
    start_layer = sum(partitions[:pp_rank])
    return (start_layer, start_layer + partitions[pp_rank])
