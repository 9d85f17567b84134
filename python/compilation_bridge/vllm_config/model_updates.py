"""vLLM 0.14.0's model-specific updates of a whole `VllmConfig` (`verify_and_update_config` of the classes
in `MODELS_CONFIG_MAP`, vllm/model_executor/models/config.py, and of `SequenceClassificationConfig`,
vllm/model_executor/models/adapters.py), which `VllmConfig.try_verify_and_update_config` runs.

The model-config-only updates of the same map run in `ModelConfig` (model.py). Here the model's config is a
dict (docs/configuration.md), so vLLM's attribute reads and writes on it are key reads and writes.
"""

from collections.abc import Callable
from typing import Any

from compilation_bridge.vllm_config.logs import logger

SEQ_CLS_LOAD_METHODS = ("from_2_way_softmax", "no_post_processing")


def gpt_oss(vllm_config: Any) -> None:
    structured_outputs_config = vllm_config.structured_outputs_config
    if structured_outputs_config.reasoning_parser == "":
        structured_outputs_config.reasoning_parser = "openai_gptoss"

    # Increase the max capture size from 512 to 1024 for performance.
    compilation_config = vllm_config.compilation_config
    # Only override when the user has not set either of
    # cudagraph_capture_sizes or max_cudagraph_capture_size.
    if (
        compilation_config.cudagraph_capture_sizes is None
        and compilation_config.max_cudagraph_capture_size is None
    ):
        compilation_config.max_cudagraph_capture_size = 1024
        logger.info("Overriding max cuda graph capture size to %d for performance.", 1024)


def mamba(vllm_config: Any) -> None:
    """vLLM's `MambaModelConfig`: the mamba block size follows prefix caching, else the model length."""
    model_config = vllm_config.model_config
    cache_config = vllm_config.cache_config
    if cache_config.enable_prefix_caching:
        if model_config.supports_mamba_prefix_caching:
            logger.info(
                "Warning: Prefix caching is currently enabled. "
                "Its support for Mamba layers is experimental. "
                "Please report any issues you may observe."
            )
            # With prefix caching the mamba block size is aligned to the block size.
            if cache_config.mamba_block_size is None:
                cache_config.mamba_block_size = cache_config.block_size
        else:
            logger.info("Hybrid or mamba-based model detected without support for prefix caching: disabling.")
            cache_config.enable_prefix_caching = False
    if cache_config.mamba_block_size is None:
        cache_config.mamba_block_size = model_config.max_model_len


def deepseek_v32(vllm_config: Any) -> None:
    """Updated fp8 cache to custom "fp8_ds_mla" format for DeepSeekV32"""
    hf_config = vllm_config.model_config.hf_config
    # Mirror the check in vllm/model_executor/models/deepseek_v2.py
    is_v32 = "index_topk" in hf_config
    assert is_v32
    cache_config = vllm_config.cache_config
    if cache_config.cache_dtype.startswith("fp8"):
        cache_config.cache_dtype = "fp8_ds_mla"
        logger.info("Using custom fp8 kv-cache format for DeepSeekV3.2")
    if cache_config.cache_dtype == "bfloat16":
        cache_config.cache_dtype = "auto"
        logger.info("Using bfloat16 kv-cache for DeepSeekV3.2")


def nemotron_h(vllm_config: Any) -> None:
    """Update mamba_ssm_cache_dtype for NemotronH models when set to 'auto'
    (or not explicitly set), to the value specified in the HF config, or to
    float16 if not specified.
    """
    cache_config = vllm_config.cache_config
    if cache_config.mamba_ssm_cache_dtype == "auto":
        mamba_ssm_cache_dtype = vllm_config.model_config.hf_config.get("mamba_ssm_cache_dtype", "float16")
        logger.info("Updating mamba_ssm_cache_dtype to '%s' for NemotronH model", mamba_ssm_cache_dtype)
        cache_config.mamba_ssm_cache_dtype = mamba_ssm_cache_dtype


def hybrid_attention_mamba(vllm_config: Any) -> None:
    """vLLM's `HybridAttentionMambaModelConfig` sizes the attention blocks so that an attention page holds
    a mamba page, from the mamba state's shapes and dtypes that each hybrid model class computes (its
    `get_mamba_state_shape_from_config`, with the layers' kernels). This worker has no model classes and
    does not guess them: refused, where leaving the block sizes unaligned would answer unlike vLLM."""
    architecture = vllm_config.model_config.architecture
    raise ValueError(
        f"{architecture}: a hybrid attention/mamba model's block sizes (cache_config.block_size, "
        "mamba_block_size, mamba_page_size_padded) come from the mamba state shapes its vLLM model class "
        "computes; this worker has no model classes and does not plan such a model's VllmConfig"
    )


def sequence_classification(vllm_config: Any) -> None:
    """vLLM's `SequenceClassificationConfig`: a causal LM converted to a classifier by its config's
    `method` and `classifier_from_token`."""
    hf_config = vllm_config.model_config.hf_config
    text_config = vllm_config.model_config.hf_text_config
    method = hf_config.get("method", text_config.get("method"))
    tokens = hf_config.get("classifier_from_token", text_config.get("classifier_from_token"))
    if method is None:
        return
    assert tokens is not None
    assert method in SEQ_CLS_LOAD_METHODS, f"method {method} not supported"
    if method == "from_2_way_softmax":
        assert len(tokens) == 2
        hf_config["num_labels"] = 1
        text_config["num_labels"] = 1
    else:
        hf_config["num_labels"] = len(tokens)
        text_config["num_labels"] = len(tokens)
    # `llm as reranker` defaults to not using separating token.
    text_config["use_sep_token"] = text_config.get("use_sep_token", False)


# The architectures of vLLM's MODELS_CONFIG_MAP whose update reaches past the model config.
VLLM_CONFIG_UPDATES: dict[str, Callable[[Any], None]] = {
    "GptOssForCausalLM": gpt_oss,
    "MambaForCausalLM": mamba,
    "Mamba2ForCausalLM": mamba,
    "FalconMambaForCausalLM": mamba,
    "DeepseekV32ForCausalLM": deepseek_v32,
    "NemotronHForCausalLM": nemotron_h,
}
