"""vLLM 0.14.0's model-specific updates of a whole `VllmConfig` (`verify_and_update_config` of the classes
in `MODELS_CONFIG_MAP`, vllm/model_executor/models/config.py, and of `SequenceClassificationConfig`,
vllm/model_executor/models/adapters.py), which `VllmConfig.try_verify_and_update_config` runs.

The model-config-only updates of the same map run in `ModelConfig` (model.py). Here the model's config is a
dict (docs/configuration.md), so vLLM's attribute reads and writes on it are key reads and writes.
"""

from collections.abc import Callable
from math import lcm
from typing import Any

from compilation_bridge.vllm_config.attention import AttentionBackendEnum
from compilation_bridge.vllm_config.logs import logger
from compilation_bridge.vllm_config.mamba_state import (
    STR_DTYPE_TO_DTYPE,
    cdiv,
    full_attention_page_size,
    mamba_state_page_size,
    mla_attention_page_size,
)
from compilation_bridge.vllm_config.platforms import current_platform

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
    """vLLM's `HybridAttentionMambaModelConfig`: ensure that the page size of attention layers is greater
    than or equal to the mamba layers'. If not, set the attention block size so that it is; if the attention
    page is strictly greater than the mamba page, pad the mamba page to make them equal."""
    # Save the user input before it gets modified by MambaModelConfig
    mamba_block_size = vllm_config.cache_config.mamba_block_size
    mamba(vllm_config)
    model_config = vllm_config.model_config
    cache_config = vllm_config.cache_config
    kernel_block_alignment_size, attn_page_size_1_token = _attention_page_1_token(vllm_config)
    mamba_page_size = mamba_state_page_size(vllm_config)
    # Model may be marked as is_hybrid but mamba is skipped via config: return directly.
    if mamba_page_size == 0:
        return
    if cache_config.enable_prefix_caching:
        # With prefix caching the attention block is a multiple of the mamba kernel's chunk size (and of
        # the backend's alignment) that holds a mamba state; the mamba block follows it.
        base_chunk_size = mamba_block_size or model_config.get_mamba_chunk_size()
        attn_tokens_per_mamba_state = cdiv(mamba_page_size, attn_page_size_1_token)
        chunk_size = lcm(base_chunk_size, kernel_block_alignment_size)
        attn_block_size = chunk_size * cdiv(attn_tokens_per_mamba_state, chunk_size)
        cache_config.mamba_block_size = attn_block_size
    else:
        # Without prefix caching, the smallest aligned attention block whose page holds a mamba state,
        # which minimizes the mamba state's padding.
        attn_block_size = kernel_block_alignment_size * cdiv(
            mamba_page_size, kernel_block_alignment_size * attn_page_size_1_token
        )
    # override attention block size if either (a) the user has not set it or (b) the user has set it
    # too small.
    if cache_config.block_size is None or cache_config.block_size < attn_block_size:
        cache_config.block_size = attn_block_size
        logger.info(
            "Setting attention block size to %d tokens "
            "to ensure that attention page size is >= mamba page size.",
            attn_block_size,
        )
    _pad_mamba_page(cache_config, cache_config.block_size * attn_page_size_1_token, mamba_page_size)


def _attention_page_1_token(vllm_config: Any) -> tuple[int, int]:
    """The attention backend's block alignment and the attention page of one token, in bytes.

    FlashAttention needs blocks of a multiple of 16; MLA backends 64, CUTLASS_MLA 128; FlashInfer on
    Blackwell (capability family 10.x) 32 for head size 256 (flashinfer-ai/flashinfer#1993)."""
    attention_config = vllm_config.attention_config
    cache_config = vllm_config.cache_config
    model_config = vllm_config.model_config
    if cache_config.cache_dtype == "auto":
        kv_cache_dtype = model_config.dtype
    else:
        kv_cache_dtype = STR_DTYPE_TO_DTYPE[cache_config.cache_dtype]
    num_kv_heads = model_config.get_num_kv_heads(vllm_config.parallel_config)
    if model_config.use_mla:
        use_cutlass_mla = attention_config.backend == AttentionBackendEnum.CUTLASS_MLA
        page = mla_attention_page_size(1, num_kv_heads, model_config.get_head_size(), kv_cache_dtype)
        return (128 if use_cutlass_mla else 64), page
    kernel_block_alignment_size = 16
    if (
        current_platform.is_device_capability_family(100)
        and model_config.get_head_size() == 256
        and attention_config.backend in (None, AttentionBackendEnum.FLASHINFER)
    ):
        kernel_block_alignment_size = 32
    page = full_attention_page_size(1, num_kv_heads, model_config.get_head_size(), kv_cache_dtype)
    return kernel_block_alignment_size, page


def _pad_mamba_page(cache_config: Any, attn_page_size: int, mamba_page_size: int) -> None:
    """Pads the mamba page to exactly the attention page (vLLM's tail of the update)."""
    assert attn_page_size >= mamba_page_size
    if attn_page_size == mamba_page_size:
        # don't need to pad mamba page size
        return
    if cache_config.mamba_page_size_padded is None or cache_config.mamba_page_size_padded != attn_page_size:
        cache_config.mamba_page_size_padded = attn_page_size
        mamba_padding_pct = 100 * (attn_page_size - mamba_page_size) / mamba_page_size
        logger.info(
            "Padding mamba page size by %.2f%% to ensure "
            "that mamba page size and attention page size are "
            "exactly equal.",
            mamba_padding_pct,
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
