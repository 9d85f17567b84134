"""ModelConfig against vLLM 0.14.0, on tiny config-only models of each kind the worker plans: dense Llama,
Mixtral (mixture of experts), Mistral (sliding window, a generation_config.json), Mamba (attention-free),
LFM2 and Jamba (hybrids), BERT (a pooling encoder). Every attribute the `vllm` hex package's generated
module reads and every method it calls without arguments, on both platforms; the methods with arguments
with representative and invalid ones; hf_overrides for the branches no folder holds (ALiBi, M-RoPE,
XD-RoPE, head dtype, chunk sizes, sentence-transformers flags); quantization; the registry's answers for
an unknown, a previously supported and a not-inspectable architecture."""

from __future__ import annotations

from typing import Any

import pytest
from diff_harness import TINY_LLAMA, TINY_MIXTRAL, build_new, call, get, new
from tests.generated_getters import GETTERS

MODELS_DIR = TINY_MIXTRAL.parent
MODELS = {
    "tiny-llama": TINY_LLAMA,
    "tiny-mixtral": TINY_MIXTRAL,
    "tiny-mistral": MODELS_DIR / "tiny-mistral",
    "tiny-mamba": MODELS_DIR / "tiny-mamba",
    "tiny-lfm2": MODELS_DIR / "tiny-lfm2",
    "tiny-jamba": MODELS_DIR / "tiny-jamba",
    "tiny-bert": MODELS_DIR / "tiny-bert",
}
# The attributes of a ModelConfig that the generated module does not read but that say what it resolved.
RESOLVED = ("runner_type", "convert_type", "model_arch_config", "encoder_config", "original_max_model_len")
# Its methods without arguments (`compute_hash` hashes transformers' JSON of the config object, which the
# worker builds for it); `validate_model_config_after` answers the config itself, whose transformers
# config prints otherwise.
NO_ARGUMENTS = (
    "_get_encoder_config",
    "_get_transformers_backend_cls",
    "_try_verify_and_update_model_config",
    "_verify_bnb_config",
    "_verify_cuda_graph",
    "_verify_quantization",
    "_verify_with_expert_parallelism",
    "compute_hash",
    "get_diff_sampling_param",
    "get_head_size",
    "get_hidden_size",
    "get_inputs_embeds_size",
    "get_mamba_chunk_size",
    "get_model_arch_config",
    "get_multimodal_config",
    "get_num_experts",
    "get_sliding_window",
    "get_total_num_hidden_layers",
    "get_total_num_kv_heads",
    "get_vocab_size",
    "try_get_generation_config",
    "using_transformers_backend",
)


def parallel(**kw: Any) -> dict[str, Any]:
    return new("ParallelConfig", **kw)


WITH_ARGUMENTS = [
    call("get_num_kv_heads", parallel(tensor_parallel_size=2)),
    call("get_num_attention_heads", parallel(tensor_parallel_size=2)),
    call("get_num_layers", parallel()),
    call("get_layers_start_end_indices", parallel()),
    call("get_num_layers_by_block_type", parallel()),
    call("get_num_layers_by_block_type", parallel(), "mamba"),
    call("get_num_layers_by_block_type", parallel(), "linear_attention"),
    call("verify_with_parallel_config", parallel(tensor_parallel_size=3)),
    call("verify_with_parallel_config", parallel(enable_expert_parallel=True)),
    call("verify_dual_chunk_attention_config", new("LoadConfig")),
    call("get_and_verify_max_len", 64),
    call("get_and_verify_max_len", -1),
    call("get_and_verify_max_len", None),
    call("get_and_verify_max_len", 10**6),
    call("_get_runner_type", ["BertModel"], "auto"),
    call("_get_runner_type", ["MixtralForCausalLM"], "pooling"),
    call("_get_default_runner_type", ["FooForSequenceClassification"]),
    call("_get_default_runner_type", ["FooModel"]),
    call("_get_convert_type", ["LlamaForCausalLM"], "pooling", "auto"),
    call("_get_convert_type", ["LlamaForCausalLM"], "pooling", "reward"),
    call("_get_default_convert_type", ["FooForSequenceClassification"], "pooling"),
    call("_get_default_convert_type", ["BertModel"], "generate"),
    call("_lowercase_tokenizer_mode", "HF"),
    call("validate_quantization_before", "FP8"),
    call("validate_quantization_before", None),
    call("_skip_none_validation", None, None),
    call("_update_nested", {"a": {"b": 1}, "c": 2}, {"a": {"d": 3}, "c": {"e": 4}}),
    call("_apply_dict_overrides", {}, {"rope_scaling": {"factor": 2.0}}),
    call("_apply_dict_overrides", {}, {}),
]
FACTS = [get(name) for name in (*GETTERS["ModelConfig"], *RESOLVED)] + [call(name) for name in NO_ARGUMENTS]


def model_kwargs(model: str, **kw: Any) -> dict[str, Any]:
    return {"model": str(MODELS[model]), "skip_tokenizer_init": True, **kw}


def request(kwargs: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    return {"build": build_new("ModelConfig", **kwargs), "ops": ops, "final": False}


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"dtype": "float32"},
        {"dtype": "half"},
        {"max_model_len": 256},
        {"runner": "pooling"},
        {"disable_sliding_window": True},
        {"generation_config": "vllm"},
        {"override_generation_config": {"temperature": 0.5, "max_new_tokens": 9}},
    ],
    ids=repr,
)
@pytest.mark.parametrize("model", list(MODELS))
def test_every_generated_attribute_and_method(
    check: Any, platform: str, model: str, kwargs: dict[str, Any]
) -> None:
    check(platform, request(model_kwargs(model, **kwargs), [*FACTS, *WITH_ARGUMENTS]))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"hf_overrides": {"alibi": True}},
        {"hf_overrides": {"position_encoding_type": "alibi"}},
        {"hf_overrides": {"attn_config": {"alibi": True}}},
        {"hf_overrides": {"rope_parameters": {"rope_type": "default", "mrope_section": [2, 2, 4]}}},
        {"hf_overrides": {"xdrope_section": [1, 2, 3]}},
        {"hf_overrides": {"rope_scaling": {"rope_type": "default", "xdrope_section": [1, 2]}}},
        {"hf_overrides": {"head_dtype": "model"}, "runner": "pooling"},
        {"hf_overrides": {"head_dtype": "float16"}, "runner": "pooling"},
        {"hf_overrides": {"head_dtype": "float16"}},
        {"hf_overrides": {"head_dtype": "int3"}, "runner": "pooling"},
        {"hf_overrides": {"mamba_chunk_size": 128, "projection_dim": 32}},
        {"hf_overrides": {"chunk_size": 256, "projection_size": 16}},
        {"hf_overrides": {"use_pad_token": False}},
        {"hf_overrides": {"use_sep_token": False}},
        {"hf_overrides": {"sliding_window": 128}},
        {"hf_overrides": {"sliding_window": 128}, "disable_sliding_window": True},
        {"hf_overrides": {"is_causal": False}, "runner": "pooling"},
        {"hf_overrides": {"num_local_experts": 8}, "model_impl": "transformers"},
        {"hf_overrides": {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}},
        {"hf_overrides": {"rope_scaling": {"type": "dynamic", "factor": 4.0}}, "max_model_len": 2048},
        {"hf_overrides": {"model_max_length": 1024}, "max_model_len": 800},
        {"hf_overrides": {"n_routed_experts": 2, "kv_lora_rank": 8}},
        {"hf_overrides": {"is_encoder_decoder": True}},
        {"hf_overrides": {"torch_dtype": "float16"}},
        {"hf_overrides": {"dtype": "float32"}, "runner": "pooling"},
        {"hf_overrides": {"model_type": "mistral", "sliding_window": 64}},
        {"model_impl": "transformers"},
        {"model_impl": "transformers", "runner": "pooling"},
        {"runner": "pooling", "convert": "classify"},
        {"runner": "pooling", "pooler_config": new("PoolerConfig", seq_pooling_type="MEAN")},
        {"runner": "pooling", "pooler_config": new("PoolerConfig", tok_pooling_type="STEP")},
        {"runner": "generate", "convert": "embed"},
        {"tokenizer_mode": "HF", "served_model_name": ["a", "b"], "revision": "r1"},
        {"served_model_name": ""},
        {"quantization": "FP8"},
        {"quantization": "ptpc_fp8"},
        {"quantization": "ptpc_fp8", "allow_deprecated_quantization": True},
        {"quantization": "nope"},
        {"max_model_len": -2},
        {"enable_sleep_mode": True},
    ],
    ids=repr,
)
def test_overrides_and_options(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(model_kwargs("tiny-llama", **kwargs), [*FACTS, *WITH_ARGUMENTS[:5]]))


@pytest.mark.parametrize(
    "overrides",
    [
        {"architectures": ["FooForCausalLM"]},
        {"architectures": ["BartForConditionalGeneration"]},
        {"architectures": ["Qwen2VLForConditionalGeneration"]},
        {"architectures": ["LlamaForSequenceClassification"]},
        {"architectures": ["Terratorch"]},
        {"architectures": []},
        {"architectures": ["GPT2LMHeadModel", "LlamaForCausalLM"]},
    ],
    ids=repr,
)
def test_the_registry_answers_for_other_architectures(
    check: Any, platform: str, overrides: dict[str, Any]
) -> None:
    check(platform, request(model_kwargs("tiny-llama", hf_overrides=overrides), FACTS))


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-mistral", "tiny-bert"])
def test_a_generation_config_folder(check: Any, platform: str, model: str) -> None:
    kwargs = model_kwargs("tiny-llama", generation_config=str(MODELS[model]))
    check(platform, request(kwargs, [call("try_get_generation_config"), call("get_diff_sampling_param")]))


@pytest.mark.parametrize("pp_size, rank", [(2, 0), (2, 1), (3, 2)])
def test_pipeline_stages(check: Any, platform: str, pp_size: int, rank: int) -> None:
    pc = parallel(pipeline_parallel_size=pp_size, rank=rank)
    ops = [
        call("get_layers_start_end_indices", pc),
        call("get_num_layers", pc),
        call("get_num_layers_by_block_type", pc, "mamba"),
        call("verify_with_parallel_config", pc),
    ]
    for model in ("tiny-mistral", "tiny-jamba", "tiny-bert"):
        check(platform, request(model_kwargs(model), ops))
    env = {"VLLM_PP_LAYER_PARTITION": "1,3" if pp_size == 2 else "1,1,2"}
    check(platform, {**request(model_kwargs("tiny-lfm2"), ops), "env": env})


# Every config-only model folder the tests serve, for the hash: vLLM's own config classes (Medusa) and
# transformers' alike.
ALL_MODELS = {"tiny-llama": TINY_LLAMA, **{p.name: p for p in sorted(MODELS_DIR.iterdir()) if p.is_dir()}}


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"num_key_value_heads": 1, "vocab_size": 2000},
        {"rope_theta": 5e5, "initializer_range": 0.5},
        {"rope_scaling": {"rope_type": "linear", "factor": 2.0}, "hidden_act": "gelu"},
        {"max_position_embeddings": 1024, "torch_dtype": "float16", "extra_key": [1, 2]},
    ],
    ids=repr,
)
@pytest.mark.parametrize("model", list(ALL_MODELS))
def test_the_hash_of_every_model(check: Any, platform: str, model: str, overrides: dict[str, Any]) -> None:
    """`compute_hash()`, which hashes transformers' JSON of `hf_config` and `hf_text_config`."""
    kwargs = {"model": str(ALL_MODELS[model]), "skip_tokenizer_init": True, "hf_overrides": overrides}
    ops = [call("compute_hash"), get("architectures")]
    check(platform, request(kwargs, ops))
    check(platform, request({**kwargs, "disable_sliding_window": True, "runner": "pooling"}, ops))


def test_the_hash_keeps_what_transformers_derived_at_load(check: Any, platform: str) -> None:
    """vLLM's LlamaConfig derives `head_dim` from the head count as it loads; hf_overrides applied after
    leave it, and the hash of that object holds the loaded value."""
    kwargs = model_kwargs("tiny-llama", hf_overrides={"num_attention_heads": 8})
    check(platform, request(kwargs, [call("compute_hash")]))


# config.json files that leave out what their transformers class fills in (all its sizes, Mistral's sliding
# window, Qwen2's derived layer types) or that name sizes by GPT-2's own keys, read through its aliases.
MINIMAL_MODELS = ("minimal-mistral", "minimal-qwen2", "minimal-gpt2")


@pytest.mark.parametrize("kwargs", [{}, {"hf_overrides": {"num_attention_heads": 8, "n_head": 8}}], ids=repr)
@pytest.mark.parametrize("model", MINIMAL_MODELS)
def test_a_config_json_that_leaves_keys_out(
    check: Any, platform: str, model: str, kwargs: dict[str, Any]
) -> None:
    """vLLM reads the attributes of transformers' object, the class's defaults among them."""
    model_kwargs = {"model": str(MODELS_DIR / model), "skip_tokenizer_init": True, **kwargs}
    check(platform, request(model_kwargs, [*FACTS, *WITH_ARGUMENTS]))
