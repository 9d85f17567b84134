"""Hypothesis strategies for ``CompilationConfig`` keyword arguments covering the valid and the invalid
space of every field, and for the surroundings of a ``VllmConfig`` (scheduler, parallelism, model,
optimization level). Values stay far below the product's 2**24 size cap (a deliberate departure), and
``inductor_passes`` never names a real module (the product resolves those only against an allowlist)."""

from __future__ import annotations

from typing import Any

from diff_harness import ATTENTION_OPS, enum, new, scheduler, tiny_model, tiny_moe_model, tup
from hypothesis import strategies as st

S = st.SearchStrategy


def mostly(valid: S[Any], invalid: S[Any], invalid_share: int) -> S[Any]:
    """`valid`, with `invalid` drawn about once in `invalid_share` draws (0: never)."""
    if invalid_share <= 0:
        return valid
    return _one_in(valid, invalid, invalid_share)


@st.composite
def _one_in(draw: st.DrawFn, valid: S[Any], invalid: S[Any], share: int) -> Any:
    # Cheaper than flatmap, which builds a strategy per draw. Hypothesis favours the bounds of a range
    # (and shrinks towards 0), so the invalid branch is the middle value: drawn about once in `share`, and
    # a shrunk failure prefers valid values.
    return draw(invalid) if draw(st.integers(0, share - 1)) == share // 2 else draw(valid)


def sampled(*values: Any) -> S[Any]:
    return st.sampled_from(values)


MODE_NAMES = ("NONE", "STOCK_TORCH_COMPILE", "DYNAMO_TRACE_ONCE", "VLLM_COMPILE")
CUDAGRAPH_NAMES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
PASS_FLAGS = (
    "fuse_norm_quant",
    "fuse_act_quant",
    "fuse_attn_quant",
    "eliminate_noops",
    "enable_sp",
    "fuse_gemm_comms",
    "fuse_allreduce_rms",
)
CUSTOM_OP_ITEMS = (
    "all",
    "none",
    "+rms_norm",
    "-rms_norm",
    "+quant_fp8",
    "-quant_fp8",
    "+silu_and_mul",
    "-silu_and_mul",
    "+rotary_embedding",
)
BAD_CUSTOM_OP_ITEMS = ("rms_norm", "", "+", "-", "ALL", "*rms_norm")
SPLITTING_ITEMS = (
    "vllm::unified_attention",
    "vllm::unified_attention_with_output",
    "vllm::moe_forward",
    "silly::attention",
    "aten::add",
)


def modes(invalid_share: int) -> S[Any]:
    valid = st.one_of(
        st.none(),
        st.integers(0, 3),
        st.sampled_from(MODE_NAMES).map(lambda n: enum("CompilationMode", n)),
        sampled("none", "NONE", "Vllm_Compile", "vllm_compile", "dynamo_trace_once", "STOCK_TORCH_COMPILE"),
        st.booleans(),
        sampled(0.0, 1.0, 2.0, 3.0),
    )
    invalid = st.one_of(
        st.integers(-3, 8).filter(lambda i: not 0 <= i <= 3),
        sampled("4", "bogus", "", "VLLM-COMPILE", " none"),
        sampled(3.5, -1.0, float("nan")),
        st.just([3]),
        st.just({"mode": 3}),
    )
    return mostly(valid, invalid, invalid_share)


def levels(invalid_share: int) -> S[Any]:
    valid = st.one_of(st.integers(0, 3), sampled("0", "3", 3.0, True))
    invalid = st.one_of(sampled(5, -1, "x", 2.5, [1]))
    return mostly(valid, invalid, invalid_share)


def cudagraph_modes(invalid_share: int) -> S[Any]:
    valid = st.one_of(
        st.none(),
        st.sampled_from(CUDAGRAPH_NAMES),
        st.sampled_from(CUDAGRAPH_NAMES).map(str.lower),
        st.sampled_from(CUDAGRAPH_NAMES).map(lambda n: enum("CUDAGraphMode", n)),
        st.integers(0, 2),
        sampled(tup(2, 0), tup(2, 1)),
    )
    invalid = st.one_of(
        sampled("bogus", "", "full-decode-only", "PIECEWISE "),
        sampled(3, -1, tup(2, 2), tup(1, 0), [2, 1], [2, 0], 1.5, 2.0, True),
    )
    return mostly(valid, invalid, invalid_share)


def custom_ops(invalid_share: int) -> S[Any]:
    valid = st.lists(st.sampled_from(CUSTOM_OP_ITEMS), max_size=4)
    invalid = st.one_of(
        st.lists(st.sampled_from(CUSTOM_OP_ITEMS + BAD_CUSTOM_OP_ITEMS), min_size=1, max_size=4),
        sampled("all", None, [1], ["all", None]),
    )
    return mostly(valid, invalid, invalid_share)


def splitting_ops(invalid_share: int) -> S[Any]:
    valid = st.one_of(
        st.none(),
        st.just([]),
        st.lists(st.sampled_from(SPLITTING_ITEMS), min_size=1, max_size=3),
        st.just(ATTENTION_OPS),
    )
    invalid = sampled("vllm::unified_attention", [1], [None], {"a": 1})
    return mostly(valid, invalid, invalid_share)


def sizes_list(lo: int, hi: int, max_size: int = 6) -> S[list[int]]:
    return st.lists(st.integers(lo, hi), max_size=max_size)


def capture_sizes(invalid_share: int) -> S[Any]:
    valid = st.one_of(
        st.none(),
        sizes_list(1, 600),
        st.lists(sampled(1, 2, 4, 8, 16, 32, 64), max_size=5),
    )
    invalid = st.one_of(sizes_list(-4, 0, 3), sampled("1,2", [1, "x"], [1.5], None))
    return mostly(valid, invalid, invalid_share)


def max_capture_size(invalid_share: int) -> S[Any]:
    valid = st.one_of(st.none(), st.integers(0, 600), sampled(1, 2, 4, 8, 16, 64, 256, 512))
    invalid = st.one_of(st.integers(-5, -1), sampled("8", 8.5, [8]))
    return mostly(valid, invalid, invalid_share)


def compile_sizes(invalid_share: int) -> S[Any]:
    item = st.one_of(st.integers(1, 600), st.just("cudagraph_capture_sizes"))
    valid = st.one_of(st.none(), st.lists(item, max_size=5))
    bad_item = st.one_of(item, st.integers(-5, 0), sampled("bogus", "", 4.0, None, "CUDAGRAPH_CAPTURE_SIZES"))
    invalid = st.one_of(st.lists(bad_item, min_size=1, max_size=4), sampled("cudagraph_capture_sizes", 4))
    return mostly(valid, invalid, invalid_share)


def split_points(invalid_share: int) -> S[Any]:
    valid = st.one_of(st.none(), st.lists(st.integers(1, 9000), max_size=5))
    invalid = st.one_of(
        st.lists(st.integers(-10, 10), min_size=1, max_size=4), sampled(["8"], [8.5], "8", [None])
    )
    return mostly(valid, invalid, invalid_share)


def pass_configs(invalid_share: int) -> S[Any]:
    flag = st.one_of(st.none(), st.booleans())
    bad_flag = sampled("yes", "no", 1, 0, 2, "maybe", [])
    mb = st.one_of(st.none(), sampled(0.5, 1, 2.0, 64))
    valid_dict = st.fixed_dictionaries(
        {},
        optional={
            **{f: flag for f in PASS_FLAGS},
            "fi_allreduce_fusion_max_size_mb": mb,
            "enable_qk_norm_rope_fusion": st.booleans(),
        },
    )
    valid = st.one_of(valid_dict, valid_dict.map(lambda kw: new("PassConfig", **kw)))
    invalid = st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                **{f: st.one_of(flag, bad_flag) for f in PASS_FLAGS},
                "fi_allreduce_fusion_max_size_mb": st.one_of(mb, sampled("x", [1])),
                "enable_fusion": st.booleans(),
                "enable_noop": st.booleans(),
                "bogus": st.integers(),
            },
        ),
        sampled(None, "x", 1),
    )
    return mostly(valid, invalid, invalid_share)


def dynamic_shapes_configs(invalid_share: int) -> S[Any]:
    kinds = sampled("backed", "unbacked", "backed_size_oblivious")
    valid = st.fixed_dictionaries(
        {},
        optional={"type": kinds, "evaluate_guards": st.booleans(), "assume_32_bit_indexing": st.booleans()},
    )
    invalid = st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "type": st.one_of(kinds, sampled("BACKED", "bogus", 1, None)),
                "evaluate_guards": sampled("x", 2, None),
                "bogus": st.booleans(),
            },
        ),
        sampled(None, "backed"),
    )
    return mostly(valid, invalid, invalid_share)


def inductor_configs(invalid_share: int) -> S[Any]:
    keys = sampled(
        "max_autotune", "combo_kernels", "benchmark_combo_kernel", "enable_auto_functionalized_v2", "dce"
    )
    valid = st.dictionaries(keys, st.one_of(st.booleans(), st.integers(0, 3), sampled("x")), max_size=3)
    invalid = sampled("x", None, [1], {"max_autotune": None})
    return mostly(valid, invalid, invalid_share)


def inductor_passes(invalid_share: int) -> S[Any]:
    # Never a string value: a string names code, which the product resolves only against its allowlist.
    return mostly(st.just({}), sampled({"p": 1}, {"p": None}, {"p": ["x"]}, ["p"], None), invalid_share)


def backends(invalid_share: int) -> S[Any]:
    valid = sampled("", "inductor", "eager")
    invalid = st.one_of(sampled("openxla", "aot_eager", "custom_backend", "cudagraphs"), sampled(1, None))
    return mostly(valid, invalid, invalid_share)


def tri_bool(invalid_share: int) -> S[Any]:
    return mostly(st.one_of(st.none(), st.booleans()), sampled("yes", "no", 2, "true", 1.0), invalid_share)


def plain_bool(invalid_share: int) -> S[Any]:
    return mostly(st.booleans(), sampled("yes", None, 2, "off"), invalid_share)


UNKNOWN_KEYS = (
    "use_inductor",
    "use_cudagraph",
    "full_cuda_graph",
    "bogus",
    "local_cache_dir",
    "compilation_time",
)


def compilation_kwargs(invalid_share: int) -> S[dict[str, Any]]:
    """Keyword arguments for ``CompilationConfig``: each field present or not; each value invalid about
    once in `invalid_share` draws (0: always valid values)."""
    optional: dict[str, S[Any]] = {
        "level": levels(invalid_share),
        "mode": modes(invalid_share),
        "debug_dump_path": mostly(st.one_of(st.none(), sampled("dump")), sampled(3), invalid_share),
        "cache_dir": mostly(sampled("", "cache"), sampled(3, None), invalid_share),
        "compile_cache_save_format": mostly(
            sampled("binary", "unpacked"), sampled("bogus", None), invalid_share
        ),
        "backend": backends(invalid_share),
        "custom_ops": custom_ops(invalid_share),
        "splitting_ops": splitting_ops(invalid_share),
        "compile_mm_encoder": plain_bool(invalid_share),
        "compile_sizes": compile_sizes(invalid_share),
        "compile_ranges_split_points": split_points(invalid_share),
        "inductor_compile_config": inductor_configs(invalid_share),
        "inductor_passes": inductor_passes(invalid_share),
        "cudagraph_mode": cudagraph_modes(invalid_share),
        "cudagraph_num_of_warmups": mostly(st.integers(0, 3), sampled(-1, "1", None), invalid_share),
        "cudagraph_capture_sizes": capture_sizes(invalid_share),
        "cudagraph_copy_inputs": plain_bool(invalid_share),
        "cudagraph_specialize_lora": plain_bool(invalid_share),
        "use_inductor_graph_partition": tri_bool(invalid_share),
        "pass_config": pass_configs(invalid_share),
        "max_cudagraph_capture_size": max_capture_size(invalid_share),
        "dynamic_shapes_config": dynamic_shapes_configs(invalid_share),
    }
    kwargs = st.fixed_dictionaries({}, optional=optional)
    if invalid_share <= 0:
        return kwargs
    unknown = st.dictionaries(st.sampled_from(UNKNOWN_KEYS), st.booleans(), max_size=1)
    extra = mostly(st.just({}), unknown, invalid_share * 2)
    return st.tuples(kwargs, extra).map(lambda t: {**t[0], **t[1]})


@st.composite
def vllm_surroundings(draw: st.DrawFn) -> dict[str, Any]:
    """Scheduler, parallel, model and optimization-level arguments of a ``VllmConfig``."""
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        mbt = draw(sampled(8, 64, 100, 256, 600, 2048, 8192))
        seqs = draw(sampled(1, 8, 64, 128, 256).filter(lambda s: s <= mbt))
        out["scheduler_config"] = scheduler(max_num_batched_tokens=mbt, max_num_seqs=seqs)
    if draw(st.booleans()):
        parallel: dict[str, Any] = {"tensor_parallel_size": draw(sampled(1, 1, 2, 4, 8, 16))}
        if draw(st.integers(0, 3)) == 2:
            parallel["pipeline_parallel_size"] = draw(sampled(2, 4))
        if draw(st.booleans()):
            parallel["all2all_backend"] = draw(sampled("deepep_high_throughput", "allgather_reducescatter"))
            parallel["data_parallel_size"] = draw(sampled(1, 2))
        out["parallel_config"] = parallel
    if draw(st.booleans()):
        extra = draw(
            st.fixed_dictionaries(
                {}, optional={"enforce_eager": st.booleans(), "runner": sampled("generate", "pooling")}
            )
        )
        out["model"] = tiny_model(**extra) if draw(st.integers(0, 3)) != 2 else tiny_moe_model(**extra)
    level = draw(mostly(st.one_of(st.none(), st.integers(0, 3)), sampled(4, "O2"), 15))
    if level is not None:
        out["optimization_level"] = level
    return out
