"""vLLM's ``CompilationConfig`` fields and methods on a standalone ``CompilationConfig``: constructor
validation (types, messages, raw ``KeyError``/``IndexError``), ``__post_init__``, ``repr``/``str``, equality,
``compute_hash`` and every method, plus the standalone cases of vLLM's own tests."""

from __future__ import annotations

from typing import Any

import pytest
from diff_harness import (
    ATTENTION_OPS,
    FIELDS,
    HASH,
    POST_INIT,
    RANGES,
    REPR,
    STR,
    call,
    cc_request,
    enum,
    new,
    op,
    tup,
)

# What every construction case is compared on, besides the build outcome and the final fields.
INSPECT = [
    HASH,
    REPR,
    STR,
    RANGES,
    call("splitting_ops_contain_attention"),
    call("is_attention_compiled_piecewise"),
    call("is_custom_op_enabled", "rms_norm"),
    op("eq", other=new("CompilationConfig")),
    op("eq", other=None),
    op("ne", other={}),
    op("pyhash_eq", other=None),
    op("deepcopy_eq"),
    HASH,
]


def check_cc(check: Any, platform: str, kwargs: dict[str, Any], extra: list[dict[str, Any]] = ()) -> Any:  # type: ignore[assignment]
    return check(platform, cc_request(kwargs, [*INSPECT, *extra]))


MODE_VALUES: list[Any] = [
    0,
    1,
    2,
    3,
    "none",
    "NONE",
    "Vllm_Compile",
    "vllm_compile",
    "DYNAMO_TRACE_ONCE",
    "stock_torch_compile",
    True,
    False,
    3.0,
    3.5,
    None,
    4,
    -1,
    "4",
    "bogus",
    "",
    "INVALID_MODE",
    [3],
    enum("CompilationMode", "VLLM_COMPILE"),
    enum("CUDAGraphMode", "FULL"),
]


@pytest.mark.parametrize("mode", MODE_VALUES, ids=repr)
def test_mode_validator(check: Any, platform: str, mode: Any) -> None:
    """``validate_mode_before`` and vLLM's ``test_compilation_config_mode_validator``."""
    check_cc(check, platform, {"mode": mode})


LEVEL_CASES: list[dict[str, Any]] = [
    {"level": 3},
    {"level": 0},
    {"level": "3"},
    {"level": 3.0},
    {"level": 2.5},
    {"level": True},
    {"level": "x"},
    {"level": None},
    {"level": 5},
    {"level": -1},
    {"level": 3, "mode": 1},
    {"level": 1, "mode": None},
    {"level": 1, "mode": "vllm_compile"},
    {"level": "bogus", "mode": 3},
]


@pytest.mark.parametrize("kwargs", LEVEL_CASES, ids=repr)
def test_level_alias(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """``__post_init__``, first step: ``level`` is copied raw into ``mode`` (an int, not the enum) and is
    hashed."""
    check_cc(check, platform, kwargs, [op("eq", other=new("CompilationConfig", mode=3))])


CUDAGRAPH_VALUES: list[Any] = [
    "piecewise",
    "FULL",
    "full_decode_only",
    "Full_And_Piecewise",
    "none",
    0,
    1,
    2,
    3,
    -1,
    tup(2, 0),
    tup(2, 1),
    tup(2, 2),
    [2, 1],
    [2, 0],
    None,
    "bogus",
    "",
    1.0,
    True,
    enum("CUDAGraphMode", "FULL_DECODE_ONLY"),
]


@pytest.mark.parametrize("cudagraph_mode", CUDAGRAPH_VALUES, ids=repr)
def test_cudagraph_mode_validator(check: Any, platform: str, cudagraph_mode: Any) -> None:
    """``validate_cudagraph_mode_before``: unknown strings raise a bare ``KeyError``."""
    check_cc(check, platform, {"cudagraph_mode": cudagraph_mode})


CUSTOM_OPS: list[Any] = [
    [],
    ["all"],
    ["none"],
    ["all", "none"],
    ["all", "all"],
    ["none", "none"],
    ["all", "+rms_norm", "all"],
    ["+quant_fp8", "-silu_and_mul"],
    ["quant_fp8"],
    [""],
    ["+"],
    ["-"],
    ["all", "-rms_norm"],
    ["none", "+rms_norm"],
    ["+rms_norm"],
    ["-rms_norm"],
    ["+rms_norm", "-rms_norm"],
    ["none", "+rms_norm", "+rms_norm"],
    ["ALL"],
    ["all", ""],
    "all",
    [1],
    None,
]


@pytest.mark.parametrize("custom_ops", CUSTOM_OPS, ids=repr)
def test_custom_ops(check: Any, platform: str, custom_ops: Any) -> None:
    """``__post_init__`` on ``custom_ops`` (``"Can only specify 'none' or 'all'"``, ``"Invalid syntax
    '...'"``, a raw ``IndexError`` for ``""``), ``is_custom_op_enabled`` and vLLM's ``test_custom_op``."""
    extra = [call("is_custom_op_enabled", name) for name in ("quant_fp8", "silu_and_mul", "x")]
    check_cc(check, platform, {"custom_ops": custom_ops}, extra)


BACKEND_CASES: list[dict[str, Any]] = [
    {"backend": ""},
    {"backend": "inductor"},
    {"backend": "eager"},
    {"backend": "openxla"},
    {"backend": "custom_backend"},
    {"mode": 3, "backend": "custom_backend"},
    {"mode": 3, "backend": "eager"},
    {"mode": 3, "backend": "aot_eager"},
    {"mode": 2, "backend": "openxla"},
    {"mode": 1, "backend": "aot_eager"},
    {"mode": 0, "backend": "custom_backend"},
    {"level": 3, "backend": "custom_backend"},
    {"backend": 1},
    {"backend": None},
]


@pytest.mark.parametrize("kwargs", BACKEND_CASES, ids=repr)
def test_backend(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """``__post_init__`` on ``backend``: only VLLM_COMPILE checks the backend name; ``""`` becomes the
    platform's."""
    check_cc(check, platform, kwargs)


OTHER_FIELD_CASES: list[dict[str, Any]] = [
    {"compile_cache_save_format": "binary"},
    {"compile_cache_save_format": "unpacked"},
    {"compile_cache_save_format": "bogus"},
    {"compile_cache_save_format": None},
    {"inductor_compile_config": {"max_autotune": True}},
    {"inductor_compile_config": {"combo_kernels": False}},
    {"inductor_compile_config": {"benchmark_combo_kernel": False}},
    {"inductor_compile_config": {"enable_auto_functionalized_v2": True, "dce": 1}},
    {"inductor_compile_config": "x"},
    {"inductor_compile_config": None},
    {"inductor_passes": {"p": 1}},
    {"inductor_passes": {"p": None}},
    {"inductor_passes": ["x"]},
    {"inductor_passes": {}},
    {"use_inductor_graph_partition": True},
    {"use_inductor_graph_partition": False},
    {"use_inductor_graph_partition": "yes"},
    {"use_inductor_graph_partition": 2},
    {"pass_config": {"fuse_norm_quant": True}},
    {"pass_config": {"enable_qk_norm_rope_fusion": True}},
    {"pass_config": {"enable_qk_norm_rope_fusion": True}, "custom_ops": ["none"]},
    {"pass_config": {"enable_fusion": True}},
    {"pass_config": new("PassConfig", eliminate_noops=False)},
    {"pass_config": None},
    {"pass_config": "x"},
    {"dynamic_shapes_config": {"type": "unbacked"}},
    {"dynamic_shapes_config": {"type": "bogus"}},
    {"dynamic_shapes_config": {"bogus": 1}},
    {"dynamic_shapes_config": new("DynamicShapesConfig", evaluate_guards=True)},
    {"dynamic_shapes_config": None},
    {"debug_dump_path": "dump"},
    {"debug_dump_path": {"__path__": "dump/sub"}},
    {"debug_dump_path": 3},
    {"cache_dir": "some/dir"},
    {"cache_dir": 3},
    {"compile_mm_encoder": True},
    {"compile_mm_encoder": "yes"},
    {"cudagraph_num_of_warmups": 2},
    {"cudagraph_num_of_warmups": -1},
    {"cudagraph_num_of_warmups": "1"},
    {"cudagraph_copy_inputs": True},
    {"cudagraph_specialize_lora": False},
    {"cudagraph_specialize_lora": None},
    {"max_cudagraph_capture_size": 100},
    {"max_cudagraph_capture_size": None},
    {"max_cudagraph_capture_size": -5},
    {"max_cudagraph_capture_size": "8"},
    {"max_cudagraph_capture_size": 8.5},
    {"cudagraph_capture_sizes": [4, 2, 2, 1]},
    {"cudagraph_capture_sizes": []},
    {"cudagraph_capture_sizes": [1, "x"]},
    {"cudagraph_capture_sizes": "1,2"},
    {"compile_sizes": [1, "cudagraph_capture_sizes"]},
    {"compile_sizes": ["bogus", 3]},
    {"compile_sizes": [4.0]},
    {"compile_sizes": [None]},
    {"compile_ranges_split_points": [8, 32]},
    {"compile_ranges_split_points": [0, -3]},
    {"compile_ranges_split_points": ["8"]},
    # names of fields vLLM 0.14.0 no longer has, and unknown keys
    {"use_inductor": True},
    {"use_cudagraph": True},
    {"full_cuda_graph": True},
    {"cudagraph_capture_size": [1]},
    {"local_cache_dir": "x"},
    {"bs_to_padded_graph_size": [0]},
    {"compilation_time": 1.0},
    {"enabled_custom_ops": {}},
    {"static_forward_context": {}},
]


@pytest.mark.parametrize("kwargs", OTHER_FIELD_CASES, ids=repr)
def test_fields(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """Field types and defaults, pass_config and dynamic_shapes_config from dicts,
    ``inductor_compile_config`` auto keys, ``+rotary_embedding``, init=False fields refused."""
    check_cc(check, platform, kwargs)


def test_positional_arguments(check: Any, platform: str) -> None:
    """Construction is ``cls(*args, **kwargs)``: positional fields in declaration order, and a field
    given both ways fails with pydantic's "Got multiple values for argument"."""
    check(
        platform, {"build": {"kind": "new", "cls": "CompilationConfig", "args": [3], "kwargs": {}}, "ops": []}
    )
    check(
        platform,
        {"build": {"kind": "new", "cls": "CompilationConfig", "args": [None, 3], "kwargs": {}}, "ops": []},
    )
    too_many = {
        "build": {"kind": "new", "cls": "CompilationConfig", "args": [None] * 30, "kwargs": {}},
        "ops": [],
    }
    check(platform, too_many)
    for cls in ("PassConfig", "DynamicShapesConfig"):
        check(platform, {"build": {"kind": "new", "cls": cls, "args": [None] * 12, "kwargs": {}}, "ops": []})
    for args in ([None, None, None], [None], [None, None]):
        req = {
            "build": {"kind": "new", "cls": "CompilationConfig", "args": args, "kwargs": {"mode": 3}},
            "ops": [],
        }
        check(platform, req)


def test_equality_and_hash_stability(check: Any, platform: str) -> None:
    """``__eq__`` and ``compute_hash``: equality is over all fields; the hash ignores cache_dir and
    debug_dump_path and follows mode, level and everything else hashed."""
    variants: list[dict[str, Any]] = [
        {},
        {"cache_dir": "elsewhere"},
        {"debug_dump_path": "dump"},
        {"mode": 3},
        {"level": 3},
        {"mode": enum("CompilationMode", "VLLM_COMPILE")},
        {"mode": 3, "level": 3},
        {"backend": "inductor"},
        {"pass_config": {"fuse_norm_quant": False}},
        {"dynamic_shapes_config": {"evaluate_guards": False}},
        {"dynamic_shapes_config": {"type": "unbacked"}},
    ]
    for kwargs in variants:
        others = [op("eq", other=new("CompilationConfig", **v)) for v in variants]
        check(platform, cc_request(kwargs, [HASH, *others, op("ne", other=new("CompilationConfig"))]))


# post_init_cudagraph_sizes / compute_bs_to_padded_graph_size, on a bare config
POST_INIT_CASES: list[dict[str, Any]] = [
    {"cudagraph_capture_sizes": [1, 2, 4, 8], "max_cudagraph_capture_size": 8},
    {"cudagraph_capture_sizes": [8, 1], "max_cudagraph_capture_size": 8},
    {"cudagraph_capture_sizes": [2, 4], "max_cudagraph_capture_size": 4},
    {"cudagraph_capture_sizes": [3], "max_cudagraph_capture_size": 3},
    {"cudagraph_capture_sizes": [], "max_cudagraph_capture_size": 0},
    {"cudagraph_capture_sizes": [], "max_cudagraph_capture_size": 5},
    {"cudagraph_capture_sizes": [1, 2], "max_cudagraph_capture_size": 4},
    {"cudagraph_capture_sizes": [1, 2]},
    {"max_cudagraph_capture_size": 4},
    {},
    {
        "compile_sizes": [1, "cudagraph_capture_sizes"],
        "cudagraph_capture_sizes": [1, 2],
        "max_cudagraph_capture_size": 2,
    },
    {
        "compile_sizes": [16, "cudagraph_capture_sizes", 16, 3],
        "cudagraph_capture_sizes": [1, 2, 4, 8],
        "max_cudagraph_capture_size": 8,
    },
    {
        "compile_sizes": ["cudagraph_capture_sizes", "cudagraph_capture_sizes", 7, 300, 5, 64],
        "cudagraph_capture_sizes": [8, 4, 2, 1],
        "max_cudagraph_capture_size": 8,
    },
    {"compile_sizes": ["bogus"], "cudagraph_capture_sizes": [1], "max_cudagraph_capture_size": 1},
    {"compile_sizes": [5, 3, 5, 1], "cudagraph_capture_sizes": [1], "max_cudagraph_capture_size": 1},
    {"compile_sizes": [], "cudagraph_capture_sizes": [1], "max_cudagraph_capture_size": 1},
    {"compile_sizes": ["cudagraph_capture_sizes"]},
    {"compile_sizes": [-3, 0, 2]},
]


@pytest.mark.parametrize("kwargs", POST_INIT_CASES, ids=repr)
def test_post_init_cudagraph_sizes(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """``post_init_cudagraph_sizes``: compile_sizes through a set then expanded; sizes sorted in place; the
    max assertion; the padding table (also recomputed on its own, and called twice)."""
    ops = [POST_INIT, FIELDS, HASH, REPR, call("compute_bs_to_padded_graph_size"), FIELDS, POST_INIT, HASH]
    check(platform, cc_request(kwargs, ops))


@pytest.mark.parametrize(
    "points",
    [None, [], [2048], [8, 32, 8192], [32, 8, 8, 8192], [0], [-5, 3], [1], [1, 1, 2], [8192, 1]],
    ids=repr,
)
def test_get_compile_ranges(check: Any, platform: str, points: Any) -> None:
    """``get_compile_ranges``."""
    check(platform, cc_request({"compile_ranges_split_points": points}, [RANGES, HASH]))


SPEC_DECODE_ROWS: list[tuple[list[int], int, int, int, bool]] = [
    ([1, 2, 4, 8, 16], 16, 2, 1, False),
    ([1, 2, 4, 8, 16], 16, 3, 1, False),
    ([1, 2, 4, 8, 16], 16, 4, 4, True),
    ([1, 2, 4, 8, 16], 16, 2, 4, True),
    ([1, 2, 4, 8, 16], 16, 3, 2, True),
    ([1, 2, 4], 4, 5, 1, False),
    ([4], 4, 3, 1, False),
    ([1, 2], 2, 3, 1, False),
    ([1, 3, 5], 5, 2, 2, False),
    ([1, 2, 4, 8, 16], 16, 1, 8, True),
    ([1, 2, 4, 8, 16], 16, 0, 1, False),
    ([], 0, 2, 1, False),
    ([1, 2, 4], 4, 0, 2, True),
    ([1, 2, 4], 4, -2, 1, False),
    ([1, 2, 4], 4, 2, 0, True),
]


@pytest.mark.parametrize(("sizes", "mx", "q", "tp", "sp"), SPEC_DECODE_ROWS)
def test_adjust_cudagraph_sizes_for_spec_decode(
    check: Any, platform: str, sizes: list[int], mx: int, q: int, tp: int, sp: bool
) -> None:
    """``adjust_cudagraph_sizes_for_spec_decode``, after ``post_init_cudagraph_sizes`` as the model runner
    does."""
    kwargs = {
        "cudagraph_capture_sizes": sizes,
        "max_cudagraph_capture_size": mx,
        "pass_config": {"enable_sp": sp},
    }
    ops = [POST_INIT, call("adjust_cudagraph_sizes_for_spec_decode", q, tp), FIELDS, HASH]
    check(platform, cc_request(kwargs, ops))


def test_adjust_spec_decode_without_sizes(check: Any, platform: str) -> None:
    for q, tp in ((1, 1), (2, 1), (3, 2)):
        check(platform, cc_request({}, [call("adjust_cudagraph_sizes_for_spec_decode", q, tp)]))
        kwargs = {"cudagraph_capture_sizes": [1, 2], "pass_config": {"enable_sp": True}}
        check(platform, cc_request(kwargs, [call("adjust_cudagraph_sizes_for_spec_decode", q, tp)]))


SPLITTING_CASES: list[tuple[dict[str, Any], str, int]] = [
    ({}, "allgather_reducescatter", 1),
    ({"mode": 2, "splitting_ops": ["x"]}, "allgather_reducescatter", 1),
    ({"mode": 3}, "allgather_reducescatter", 1),
    ({"mode": 3, "cudagraph_mode": "FULL_DECODE_ONLY", "splitting_ops": []}, "naive", 1),
    ({"mode": 3, "cudagraph_mode": "PIECEWISE"}, "deepep_high_throughput", 2),
    ({"mode": 3, "cudagraph_mode": "PIECEWISE"}, "deepep_high_throughput", 1),
    ({"mode": 3, "cudagraph_mode": "PIECEWISE"}, "deepep_low_latency", 2),
    ({"mode": 2, "cudagraph_mode": "PIECEWISE"}, "deepep_high_throughput", 2),
    ({"mode": 3, "cudagraph_mode": "PIECEWISE", "splitting_ops": []}, "naive", 1),
    ({"mode": 3, "cudagraph_mode": "FULL_AND_PIECEWISE", "splitting_ops": []}, "naive", 1),
    ({"mode": 3, "cudagraph_mode": "FULL", "splitting_ops": []}, "naive", 1),
    ({"mode": 3, "cudagraph_mode": "NONE", "splitting_ops": []}, "deepep_high_throughput", 4),
    ({"mode": 3, "splitting_ops": []}, "naive", 1),
    ({"mode": 3, "splitting_ops": ["vllm::unified_attention", "x"]}, "naive", 1),
    ({"mode": 3, "cudagraph_mode": "FULL", "pass_config": {"fuse_attn_quant": True}}, "naive", 1),
    ({"mode": 3, "cudagraph_mode": "PIECEWISE", "pass_config": {"fuse_attn_quant": True}}, "naive", 1),
    (
        {"mode": 3, "cudagraph_mode": "FULL_AND_PIECEWISE", "pass_config": {"fuse_attn_quant": True}},
        "naive",
        1,
    ),
    ({"mode": 3, "pass_config": {"fuse_attn_quant": True}}, "naive", 1),
    ({"mode": 3, "pass_config": {"fuse_attn_quant": True}, "splitting_ops": ["x"]}, "naive", 1),
    ({"mode": 3, "pass_config": {"fuse_attn_quant": True}, "splitting_ops": ATTENTION_OPS}, "naive", 1),
    (
        {"mode": 3, "pass_config": {"fuse_attn_quant": True}, "use_inductor_graph_partition": True},
        "deepep_high_throughput",
        2,
    ),
    ({"mode": 3, "pass_config": {"fuse_attn_quant": True}, "cudagraph_mode": "PIECEWISE"}, "x", 2),
    ({"mode": 1, "pass_config": {"fuse_attn_quant": True}}, "naive", 1),
]


@pytest.mark.parametrize(("kwargs", "all2all", "dp"), SPLITTING_CASES, ids=repr)
def test_set_splitting_ops_for_v1(
    check: Any, platform: str, kwargs: dict[str, Any], all2all: str, dp: int
) -> None:
    """``set_splitting_ops_for_v1``, called directly on a bare config (also
    ``set_splitting_ops_for_attn_fusion`` and the attention predicates after it)."""
    ops = [
        call("set_splitting_ops_for_v1", all2all, dp),
        FIELDS,
        call("splitting_ops_contain_attention"),
        call("is_attention_compiled_piecewise"),
        HASH,
        call("set_splitting_ops_for_v1", all2all_backend=all2all),
        FIELDS,
    ]
    check(platform, cc_request(kwargs, ops))
    check(platform, cc_request(kwargs, [call("set_splitting_ops_for_attn_fusion"), FIELDS]))


PIECEWISE_CASES: list[dict[str, Any]] = [
    {"splitting_ops": None, "mode": 3},
    {"splitting_ops": ATTENTION_OPS, "mode": 3, "use_inductor_graph_partition": False},
    {"splitting_ops": ATTENTION_OPS, "mode": 2, "use_inductor_graph_partition": False},
    {"splitting_ops": ATTENTION_OPS, "mode": 2, "use_inductor_graph_partition": True},
    {"splitting_ops": ATTENTION_OPS, "mode": 0, "use_inductor_graph_partition": True},
    {"splitting_ops": ATTENTION_OPS, "mode": 2, "use_inductor_graph_partition": True, "backend": "eager"},
    {"splitting_ops": ATTENTION_OPS, "mode": 3},
    {"splitting_ops": ATTENTION_OPS, "mode": None},
    {"splitting_ops": ATTENTION_OPS, "mode": None, "use_inductor_graph_partition": True},
    {"splitting_ops": ["vllm::unified_attention"], "mode": 3},
    {"splitting_ops": [], "mode": 3},
]


@pytest.mark.parametrize("kwargs", PIECEWISE_CASES, ids=repr)
def test_attention_predicates(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """``splitting_ops_contain_attention``: all twelve attention ops must be present; piecewise depends on
    mode, uigp and backend."""
    check_cc(check, platform, kwargs)


def test_attention_predicates_extra_and_missing_ops(check: Any, platform: str, oracle: Any) -> None:
    """``splitting_ops_contain_attention`` with 11 of the ops and with 12 + x, with the op list read from the
    oracle's class."""
    got = oracle(
        platform,
        {"build": {"kind": "class", "cls": "CompilationConfig"}, "ops": [op("get", name="_attention_ops")]},
    )
    attention = got["ops"][0]["ok"]
    for ops in (attention[:-1], attention[1:], [*attention, "x"], list(reversed(attention))):
        for mode in (2, 3):
            check_cc(
                check, platform, {"splitting_ops": ops, "mode": mode, "use_inductor_graph_partition": False}
            )


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"mode": None},
        {"mode": 0},
        {"level": 0},
        {"mode": 1, "backend": "eager"},
        {"mode": 1, "backend": "inductor"},
        {"mode": 2, "backend": "aot_eager"},
        {"mode": 2, "backend": "eager"},
        {"mode": 2},
    ],
    ids=repr,
)
def test_init_backend(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """``init_backend``: mode None and NONE fail with their messages; modes 1 and 2 with a torch backend name
    return the name itself."""
    check(platform, cc_request(kwargs, [op("init_backend")]))


@pytest.mark.parametrize(
    "kwargs", [{"mode": 3}, {"level": 3}, {"mode": 3, "backend": "eager"}, {"mode": "VLLM_COMPILE"}], ids=repr
)
def test_init_backend_vllm_compile_without_a_vllm_config(check: Any, kwargs: dict[str, Any]) -> None:
    """VLLM_COMPILE builds a VllmBackend, whose first read of its argument fails on None: the same
    AttributeError from the product, with or without its compile layer loaded. CPU only: on the stand-in
    CUDA node the oracle fails earlier, building the pass manager from vLLM's compiled kernels (`_C`),
    which the oracle environment lacks; a real CUDA vLLM reaches the same AttributeError."""
    check("cpu", cc_request(kwargs, [op("init_backend")]))


@pytest.mark.parametrize(
    "custom_ops",
    [["all"], ["none"], ["all", "-x"], ["none", "+x"], [], ["+x"], ["-x"], ["all", "+x"], ["none", "-x"]],
    ids=repr,
)
def test_is_custom_op_enabled_table(check: Any, platform: str, custom_ops: list[str]) -> None:
    """``is_custom_op_enabled`` on a bare config (an empty-message AssertionError without all/none)."""
    check(platform, cc_request({"custom_ops": custom_ops}, [call("is_custom_op_enabled", "x")]))


def test_repr_mutated(check: Any, platform: str) -> None:
    """``repr`` after the methods have mutated the config (pass_config defaults excluded, bs table and
    counters excluded)."""
    kwargs = {
        "mode": 3,
        "cudagraph_capture_sizes": [1, 2, 4],
        "max_cudagraph_capture_size": 4,
        "compile_sizes": ["cudagraph_capture_sizes", 8],
        "pass_config": {"fuse_norm_quant": True, "eliminate_noops": None},
        "inductor_compile_config": {"max_autotune": True},
    }
    ops = [REPR, POST_INIT, REPR, call("set_splitting_ops_for_v1", "naive", 1), REPR, STR, HASH]
    check(platform, cc_request(kwargs, ops))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"cudagraph_capture_sizes": [8, 1, 4], "max_cudagraph_capture_size": 8},
        {"cudagraph_capture_sizes": [1, 4], "max_cudagraph_capture_size": 2},
        {"cudagraph_capture_sizes": [2, 2, 3], "max_cudagraph_capture_size": 3},
        {"cudagraph_capture_sizes": [1, 2]},
        {"max_cudagraph_capture_size": 3},
        {"cudagraph_capture_sizes": [], "max_cudagraph_capture_size": -1},
    ],
    ids=repr,
)
def test_compute_bs_to_padded_graph_size_direct(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """``compute_bs_to_padded_graph_size``: the padding table computed straight from the fields (unsorted,
    short max, missing values)."""
    check(platform, cc_request(kwargs, [call("compute_bs_to_padded_graph_size"), FIELDS]))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"custom_ops": tup("all", "-rms_norm")},
        {"splitting_ops": tup("vllm::unified_attention")},
        {"cudagraph_capture_sizes": tup(4, 2), "max_cudagraph_capture_size": 4},
        {"compile_sizes": tup(2, "cudagraph_capture_sizes")},
        {"compile_sizes": [True, 2]},
        {"compile_ranges_split_points": [8.0, 16]},
        {"cudagraph_capture_sizes": [1.0, 2.0]},
        {"max_cudagraph_capture_size": 4.0},
        {"custom_ops": ["all", 1]},
        {"inductor_compile_config": {"max_autotune": None, "nested": {"a": [1, 2]}}},
        {"pass_config": {"fi_allreduce_fusion_max_size_mb": True}},
    ],
    ids=repr,
)
def test_coercions(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """pydantic's lax coercions (tuples for lists, integral floats for ints, bools) and what follows."""
    check_cc(check, platform, kwargs, [POST_INIT, FIELDS, HASH])


@pytest.mark.parametrize(
    "args",
    [
        ["naive", "2"],
        ["naive", None],
        [None, 2],
        ["deepep_high_throughput", 2.5],
        ["deepep_high_throughput", True],
    ],
    ids=repr,
)
def test_set_splitting_ops_for_v1_arguments(check: Any, platform: str, args: list[Any]) -> None:
    for kwargs in ({"mode": 3, "cudagraph_mode": "PIECEWISE"}, {"mode": 2}):
        check(platform, cc_request(kwargs, [call("set_splitting_ops_for_v1", *args), FIELDS]))
