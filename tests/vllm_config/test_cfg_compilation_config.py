"""vLLM's CompilationConfig fields, validators, __post_init__ and methods (no VllmConfig)."""

import pytest
from pydantic import ValidationError

from compilation_bridge.vllm_config import (
    CompilationConfig,
    CompilationMode,
    CUDAGraphMode,
    PassConfig,
    Range,
)
from compilation_bridge.vllm_config.limits import MAX_SIZE

ATTENTION_OPS = CompilationConfig._attention_ops


@pytest.mark.parametrize(
    "value,expected",
    [
        (0, CompilationMode.NONE),
        (3, CompilationMode.VLLM_COMPILE),
        ("none", CompilationMode.NONE),
        ("Vllm_Compile", CompilationMode.VLLM_COMPILE),
        ("DYNAMO_TRACE_ONCE", CompilationMode.DYNAMO_TRACE_ONCE),
        ("STOCK_TORCH_COMPILE", CompilationMode.STOCK_TORCH_COMPILE),
        (True, CompilationMode.STOCK_TORCH_COMPILE),
        (3.0, CompilationMode.VLLM_COMPILE),
        (None, None),
    ],
)
def test_mode_validator_accepts(cpu, value, expected) -> None:
    mode = CompilationConfig(mode=value).mode
    assert mode is expected


@pytest.mark.parametrize("value", [4, -1])
def test_mode_out_of_range(cpu, value) -> None:
    with pytest.raises(ValidationError, match="Input should be 0, 1, 2 or 3"):
        CompilationConfig(mode=value)


@pytest.mark.parametrize("value", ["4", "bogus", "INVALID_MODE"])
def test_mode_bad_string(cpu, value) -> None:
    with pytest.raises(ValidationError, match=f"Invalid compilation mode: {value}. Valid modes are: NONE, "):
        CompilationConfig(mode=value)


@pytest.mark.parametrize(
    "value,expected",
    [
        ("piecewise", CUDAGraphMode.PIECEWISE),
        (0, CUDAGraphMode.NONE),
        (2, CUDAGraphMode.FULL),
        ((2, 0), CUDAGraphMode.FULL_DECODE_ONLY),
        (None, None),
    ],
)
def test_cudagraph_mode_validator(cpu, value, expected) -> None:
    assert CompilationConfig(cudagraph_mode=value).cudagraph_mode is expected


def test_cudagraph_mode_quirks(cpu) -> None:
    with pytest.raises(KeyError) as excinfo:
        CompilationConfig(cudagraph_mode="bogus")
    assert excinfo.type is KeyError and excinfo.value.args == ("BOGUS",)
    with pytest.raises(ValidationError):
        CompilationConfig(cudagraph_mode=[2, 1])


def test_level_copies_raw_int_into_mode(cpu) -> None:
    cc = CompilationConfig(level=3)
    assert cc.mode == 3 and type(cc.mode) is int
    assert type(CompilationConfig(level="3").mode) is int
    both = CompilationConfig(level=1, mode=3)
    assert both.mode is CompilationMode.VLLM_COMPILE and both.level == 1


@pytest.mark.parametrize("name", ["use_inductor", "use_cudagraph", "full_cuda_graph", "enable_fusion"])
def test_removed_fields_rejected(cpu, name) -> None:
    with pytest.raises(ValidationError, match="Unexpected keyword argument"):
        CompilationConfig(**{name: True})


@pytest.mark.parametrize("ops", [["all", "none"], ["all", "all"]])
def test_custom_ops_all_and_none(cpu, ops) -> None:
    with pytest.raises(ValidationError, match="Assertion failed, Can only specify 'none' or 'all'"):
        CompilationConfig(custom_ops=ops)


def test_custom_op_syntax(cpu) -> None:
    CompilationConfig(custom_ops=["+quant_fp8", "-silu_and_mul"])
    with pytest.raises(ValueError, match="Invalid syntax '"):
        CompilationConfig(custom_ops=["quant_fp8"])
    with pytest.raises(IndexError):
        CompilationConfig(custom_ops=[""])


def test_piecewise_backend_check(cpu) -> None:
    with pytest.raises(ValidationError, match="Invalid backend for piecewise compilation: openxla"):
        CompilationConfig(mode=3, backend="openxla")
    assert CompilationConfig(mode=2, backend="openxla").backend == "openxla"
    assert CompilationConfig().backend == "inductor"


def test_save_format_literal(cpu) -> None:
    with pytest.raises(ValidationError, match="Input should be 'binary' or 'unpacked'"):
        CompilationConfig(compile_cache_save_format="zip")


def test_inductor_compile_config_defaults_per_platform(on_platform) -> None:
    on_platform("cpu")
    assert CompilationConfig().inductor_compile_config == {"enable_auto_functionalized_v2": False}
    on_platform("cuda")
    assert CompilationConfig().inductor_compile_config == {
        "enable_auto_functionalized_v2": False,
        "combo_kernels": True,
        "benchmark_combo_kernel": True,
    }


def test_qk_norm_rope_fusion_disabled_off_cuda(on_platform) -> None:
    on_platform("cpu")
    assert PassConfig(enable_qk_norm_rope_fusion=True).enable_qk_norm_rope_fusion is False
    on_platform("cuda")
    cc = CompilationConfig(pass_config={"enable_qk_norm_rope_fusion": True})
    assert cc.custom_ops == ["+rotary_embedding"]


def test_pass_config_validation(cpu) -> None:
    assert PassConfig().fuse_norm_quant is None
    assert PassConfig(fuse_norm_quant="yes").fuse_norm_quant is True
    assert PassConfig(fuse_norm_quant=False).compute_hash() != PassConfig().compute_hash()
    with pytest.raises(ValidationError, match="Unexpected keyword argument"):
        PassConfig(enable_fusion=True)
    with pytest.raises(ValidationError, match="Unexpected keyword argument"):
        CompilationConfig(pass_config={"enable_noop": True})


def test_flashinfer_max_size(on_platform) -> None:
    on_platform("cpu")
    assert PassConfig().flashinfer_max_size(2) is None
    assert PassConfig(fi_allreduce_fusion_max_size_mb=1.5).flashinfer_max_size(4) == int(1.5 * 1024 * 1024)
    assert PassConfig(fi_allreduce_fusion_max_size_mb=1.5).flashinfer_max_size(3) is None
    on_platform("cuda")
    assert PassConfig().flashinfer_max_size(8) == int(0.5 * 1024 * 1024)


def test_hash_stability_and_ignored_fields(cpu) -> None:
    base = CompilationConfig().compute_hash()
    assert len(base) == 64 and base == CompilationConfig().compute_hash()
    cc = CompilationConfig(cache_dir="/tmp/x", debug_dump_path="/tmp/y")
    cc.compilation_time = 3.0
    cc.static_forward_context["layer"] = object()
    cc.bs_to_padded_graph_size = [0, 1]
    assert cc.compute_hash() == base
    assert CompilationConfig(mode=3).compute_hash() != base
    assert CompilationConfig(level=3).compute_hash() != CompilationConfig(mode=3).compute_hash()
    cc.enabled_custom_ops.update(["rms_norm"])
    assert cc.compute_hash() != base


def test_repr_and_equality(on_platform) -> None:
    on_platform("cuda")
    expected = (
        "{'level': None, 'mode': None, 'debug_dump_path': None, 'cache_dir': '', "
        "'compile_cache_save_format': 'binary', 'backend': 'inductor', 'custom_ops': [], "
        "'splitting_ops': None, 'compile_mm_encoder': False, 'compile_sizes': None, "
        "'compile_ranges_split_points': None, 'inductor_compile_config': "
        "{'enable_auto_functionalized_v2': False, 'combo_kernels': True, 'benchmark_combo_kernel': True}, "
        "'inductor_passes': {}, 'cudagraph_mode': None, 'cudagraph_num_of_warmups': 0, "
        "'cudagraph_capture_sizes': None, 'cudagraph_copy_inputs': False, 'cudagraph_specialize_lora': True, "
        "'use_inductor_graph_partition': None, 'pass_config': {}, 'max_cudagraph_capture_size': None, "
        "'dynamic_shapes_config': {'type': <DynamicShapesType.BACKED: 'backed'>, 'evaluate_guards': False, "
        "'assume_32_bit_indexing': True}, 'local_cache_dir': None}"
    )
    assert repr(CompilationConfig()) == str(CompilationConfig()) == expected
    assert CompilationConfig() == CompilationConfig()
    assert CompilationConfig(mode=3) != CompilationConfig()


@pytest.mark.parametrize(
    "sizes,table",
    [
        ([1, 2, 4, 8], [0, 1, 2, 4, 4, 8, 8, 8, 8]),
        ([1, 8], [0, 1, 8, 8, 8, 8, 8, 8, 8]),
        ([2, 4], [0, 2, 2, 4, 4]),
        ([3], [0, 3, 3, 3]),
        ([], [0]),
    ],
)
def test_padding_table(cpu, sizes, table) -> None:
    cc = CompilationConfig(
        cudagraph_capture_sizes=sizes, max_cudagraph_capture_size=sizes[-1] if sizes else 0
    )
    cc.post_init_cudagraph_sizes()
    assert cc.bs_to_padded_graph_size == table
    assert cc.compile_sizes == []


def test_post_init_compile_sizes_expansion(cpu) -> None:
    cc = CompilationConfig(compile_sizes=[1, "cudagraph_capture_sizes"], cudagraph_capture_sizes=[1, 2])
    cc.max_cudagraph_capture_size = 2
    cc.post_init_cudagraph_sizes()
    assert sorted(cc.compile_sizes) == [1, 1, 2]
    bad = CompilationConfig(compile_sizes=["x"], cudagraph_capture_sizes=[1], max_cudagraph_capture_size=1)
    with pytest.raises(AssertionError, match="Unrecognized size type in compile_sizes"):
        bad.post_init_cudagraph_sizes()
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'sort'"):
        CompilationConfig().post_init_cudagraph_sizes()
    mismatch = CompilationConfig(cudagraph_capture_sizes=[1, 2], max_cudagraph_capture_size=4)
    with pytest.raises(AssertionError):
        mismatch.post_init_cudagraph_sizes()


@pytest.mark.parametrize(
    "points,ranges",
    [
        (None, []),
        ([], []),
        ([2048], [(1, 2048)]),
        ([8, 32, 8192], [(1, 8), (9, 32), (33, 8192)]),
        ([32, 8, 8, 8192], [(1, 8), (9, 32), (33, 8192)]),
    ],
)
def test_get_compile_ranges(cpu, points, ranges) -> None:
    got = CompilationConfig(compile_ranges_split_points=points).get_compile_ranges()
    assert got == [Range(s, e) for s, e in ranges]


def _with_sizes(sizes: list[int], mx: int, enable_sp: bool = False) -> CompilationConfig:
    cc = CompilationConfig(
        cudagraph_capture_sizes=sizes, max_cudagraph_capture_size=mx, pass_config={"enable_sp": enable_sp}
    )
    cc.post_init_cudagraph_sizes()
    return cc


@pytest.mark.parametrize(
    "sizes,mx,q,tp,sp,out_sizes,out_max",
    [
        ([1, 2, 4, 8, 16], 16, 2, 1, False, [2, 4, 8, 16], 16),
        ([1, 2, 4, 8, 16], 16, 3, 1, False, [3, 6, 9], 9),
        ([1, 2, 4, 8, 16], 16, 4, 4, True, [4, 8, 16], 16),
        ([1, 2, 4, 8, 16], 16, 2, 4, True, [4, 8, 16], 16),
        ([4], 4, 3, 1, False, [3], 3),
        ([1, 3, 5], 5, 2, 2, False, [2, 4], 4),
        ([1, 2, 4], 4, 1, 1, False, [1, 2, 4], 4),
    ],
)
def test_spec_decode_adjustment(cpu, sizes, mx, q, tp, sp, out_sizes, out_max) -> None:
    cc = _with_sizes(sizes, mx, sp)
    cc.adjust_cudagraph_sizes_for_spec_decode(q, tp)
    assert (cc.cudagraph_capture_sizes, cc.max_cudagraph_capture_size) == (out_sizes, out_max)
    assert len(cc.bs_to_padded_graph_size) == out_max + 1


def test_spec_decode_errors(cpu) -> None:
    with pytest.raises(ValueError, match=r"both a multiple of 3 .* and 2 \(tensor_parallel_size\)"):
        _with_sizes([1, 2, 4, 8, 16], 16, True).adjust_cudagraph_sizes_for_spec_decode(3, 2)
    with pytest.raises(ValueError) as excinfo:
        _with_sizes([1, 2, 4], 4).adjust_cudagraph_sizes_for_spec_decode(5, 1)
    assert str(excinfo.value) == (
        "No valid cudagraph sizes after rounding to multiple of 5 (num_speculative_tokens + 1 or tp if "
        "sequence parallelism is enabled) please adjust num_speculative_tokens (4) or "
        "max_cudagraph_capture_size (4) or cudagraph_capture_sizes ([1, 2, 4])"
    )
    with pytest.raises(ValueError):
        _with_sizes([1, 2], 2).adjust_cudagraph_sizes_for_spec_decode(3, 1)


@pytest.mark.parametrize(
    "kwargs,args,splitting_ops,cudagraph_mode",
    [
        ({}, ("x",), [], None),
        ({"mode": 2, "splitting_ops": ["x"]}, ("x",), ["x"], None),
        ({"mode": 3}, ("x",), ATTENTION_OPS, None),
        (
            {"mode": 3, "cudagraph_mode": "FULL_DECODE_ONLY", "splitting_ops": []},
            ("x",),
            [],
            "FULL_DECODE_ONLY",
        ),
        ({"mode": 3, "cudagraph_mode": "PIECEWISE"}, ("deepep_high_throughput", 2), ATTENTION_OPS, "NONE"),
        (
            {"mode": 3, "cudagraph_mode": "PIECEWISE"},
            ("deepep_high_throughput", 1),
            ATTENTION_OPS,
            "PIECEWISE",
        ),
        ({"mode": 2, "cudagraph_mode": "PIECEWISE"}, ("deepep_high_throughput", 2), [], "PIECEWISE"),
        ({"mode": 3, "cudagraph_mode": "PIECEWISE", "splitting_ops": []}, ("x",), [], "NONE"),
        ({"mode": 3, "cudagraph_mode": "FULL_AND_PIECEWISE", "splitting_ops": []}, ("x",), [], "FULL"),
    ],
)
def test_set_splitting_ops_for_v1(cpu, kwargs, args, splitting_ops, cudagraph_mode) -> None:
    cc = CompilationConfig(**kwargs)
    cc.set_splitting_ops_for_v1(*args)
    assert cc.splitting_ops == splitting_ops
    assert cc.cudagraph_mode is (None if cudagraph_mode is None else CUDAGraphMode[cudagraph_mode])
    if splitting_ops == ATTENTION_OPS:
        assert cc.splitting_ops is not ATTENTION_OPS  # a new list, never the class constant


def test_attention_fusion_splitting(cpu) -> None:
    cc = CompilationConfig(mode=3, cudagraph_mode="PIECEWISE", pass_config={"fuse_attn_quant": True})
    cc.set_splitting_ops_for_v1("x")
    assert (cc.splitting_ops, cc.cudagraph_mode) == ([], CUDAGraphMode.FULL)
    kept = CompilationConfig(mode=3, splitting_ops=["x"], pass_config={"fuse_attn_quant": True})
    kept.set_splitting_ops_for_attn_fusion()
    assert kept.splitting_ops == ["x"] and kept.cudagraph_mode is None
    with pytest.raises(AttributeError):
        CompilationConfig(mode=3, pass_config={"fuse_attn_quant": True}).set_splitting_ops_for_attn_fusion()
    clash = CompilationConfig(
        mode=3, splitting_ops=list(ATTENTION_OPS), pass_config={"fuse_attn_quant": True}
    )
    with pytest.raises(AssertionError, match="attention ops should not be in splitting_ops"):
        clash.set_splitting_ops_for_attn_fusion()


@pytest.mark.parametrize(
    "splitting_ops,mode,uigp,backend,expected",
    [
        (None, 3, False, "inductor", (False, False)),
        (ATTENTION_OPS, 3, False, "eager", (True, True)),
        (ATTENTION_OPS[:11], 3, False, "inductor", (False, False)),
        ([*ATTENTION_OPS, "x"], 2, False, "inductor", (True, False)),
        (ATTENTION_OPS, 2, True, "inductor", (True, True)),
        (ATTENTION_OPS, 0, True, "inductor", (True, False)),
        (ATTENTION_OPS, 2, True, "eager", (True, False)),
        (ATTENTION_OPS, 3, None, "eager", (True, True)),
    ],
)
def test_attention_piecewise(cpu, splitting_ops, mode, uigp, backend, expected) -> None:
    cc = CompilationConfig(
        splitting_ops=splitting_ops, mode=mode, use_inductor_graph_partition=uigp, backend=backend
    )
    assert (cc.splitting_ops_contain_attention(), cc.is_attention_compiled_piecewise()) == expected


@pytest.mark.parametrize(
    "ops,expected",
    [(["all"], True), (["none"], False), (["all", "-x"], False), (["none", "+x"], True)],
)
def test_is_custom_op_enabled(cpu, ops, expected) -> None:
    assert CompilationConfig(custom_ops=ops).is_custom_op_enabled("x") is expected


@pytest.mark.parametrize("ops", [[], ["+x"], ["-x"]])
def test_is_custom_op_enabled_needs_all_or_none(cpu, ops) -> None:
    with pytest.raises(AssertionError):
        CompilationConfig(custom_ops=ops).is_custom_op_enabled("x")


def test_init_backend_argument_checks(cpu) -> None:
    with pytest.raises(ValueError, match=r"^No compilation mode is set\. This method should only"):
        CompilationConfig().init_backend(None)
    with pytest.raises(ValueError, match=r"^No compilation mode is set\.$"):
        CompilationConfig(mode=0).init_backend(None)


def test_init_backend_vllm_compile_needs_a_vllm_config(cpu, monkeypatch) -> None:
    """vLLM's VllmBackend(None) fails reading `.compilation_config`; so does ours, even when the compile
    layer's factory is installed (it is never reached)."""
    from compilation_bridge.vllm_config import compilation

    message = r"^'NoneType' object has no attribute 'compilation_config'$"
    for factory in (None, lambda vllm_config: pytest.fail("the factory must not be called")):
        monkeypatch.setattr(compilation, "_vllm_backend_factory", factory)
        with pytest.raises(AttributeError, match=message):
            CompilationConfig(mode=3).init_backend(None)


@pytest.mark.parametrize(
    "field",
    ["max_cudagraph_capture_size", "cudagraph_capture_sizes", "compile_sizes", "compile_ranges_split_points"],
)
def test_sizes_are_capped(cpu, field) -> None:
    value = MAX_SIZE + 1 if field == "max_cudagraph_capture_size" else [1, MAX_SIZE + 1]
    with pytest.raises(ValidationError, match=f"{field} must be at most {MAX_SIZE}"):
        CompilationConfig(**{field: value})
    CompilationConfig(**{field: MAX_SIZE if field == "max_cudagraph_capture_size" else [MAX_SIZE]})


def test_padding_table_cap_survives_direct_assignment(cpu) -> None:
    cc = CompilationConfig(cudagraph_capture_sizes=[1])
    cc.max_cudagraph_capture_size = 2**40
    with pytest.raises(ValueError, match="max_cudagraph_capture_size must be at most"):
        cc.compute_bs_to_padded_graph_size()


def test_inductor_passes_need_the_allowlist(cpu) -> None:
    with pytest.raises(ValidationError, match="not on the operator's allowlist"):
        CompilationConfig(inductor_passes={"p": "os.system"})
    with pytest.raises(ValidationError):
        CompilationConfig(inductor_passes={"p": print})  # type: ignore[dict-item]
