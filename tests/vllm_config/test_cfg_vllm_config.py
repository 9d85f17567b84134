"""vLLM's `VllmConfig.__post_init__` and its tests (tests/compile/test_config.py, tests/test_config.py,
tests/compile/test_compile_ranges.py): how VllmConfig drives a CompilationConfig, per platform."""

import pytest
from pydantic import ValidationError

from compilation_bridge.vllm_config import (
    CompilationConfig,
    CompilationMode,
    CUDAGraphMode,
    OptimizationLevel,
    ParallelConfig,
    PassConfig,
    Range,
    SchedulerConfig,
    VllmConfig,
)
from compilation_bridge.vllm_config.model import ModelConfig

ATTENTION_OPS = CompilationConfig._attention_ops
DEFAULT_35_SIZES = [1, 2, 4, *range(8, 257, 8)]


def tiny_model(**kwargs: object) -> ModelConfig:
    return ModelConfig(model="tiny-llama", skip_tokenizer_init=True, **kwargs)


def test_cpu_defaults(cpu) -> None:
    cc = VllmConfig().compilation_config
    assert cc.mode is CompilationMode.DYNAMO_TRACE_ONCE
    assert cc.cudagraph_mode is CUDAGraphMode.NONE
    assert (cc.cudagraph_capture_sizes, cc.max_cudagraph_capture_size, cc.compile_sizes) == ([], None, None)
    assert cc.compile_ranges_split_points == [2048]
    assert (cc.splitting_ops, cc.custom_ops, cc.backend) == ([], ["none"], "inductor")
    assert cc.inductor_compile_config == {
        "enable_auto_functionalized_v2": False,
        "dce": True,
        "size_asserts": False,
        "nan_asserts": False,
        "epilogue_fusion": True,
    }
    assert cc.bs_to_padded_graph_size is None
    assert VllmConfig(
        compilation_config=CompilationConfig(compile_sizes=[4])
    ).compilation_config.compile_sizes == [4]


def test_cuda_defaults(cuda) -> None:
    cc = VllmConfig().compilation_config
    assert cc.mode is CompilationMode.VLLM_COMPILE
    assert cc.cudagraph_mode is CUDAGraphMode.FULL_AND_PIECEWISE
    assert (cc.cudagraph_capture_sizes, cc.max_cudagraph_capture_size, cc.compile_sizes) == ([], 0, [])
    assert (cc.custom_ops, cc.splitting_ops, cc.compile_ranges_split_points) == (
        ["none"],
        ATTENTION_OPS,
        [2048],
    )
    assert (cc.cudagraph_num_of_warmups, cc.use_inductor_graph_partition, cc.bs_to_padded_graph_size) == (
        1,
        False,
        [0],
    )
    pc = cc.pass_config
    assert pc.eliminate_noops is True
    assert not any(
        [pc.fuse_norm_quant, pc.fuse_act_quant, pc.fuse_attn_quant, pc.enable_sp, pc.fuse_gemm_comms]
    )


@pytest.mark.parametrize(
    "level,mode,cudagraph_mode,custom_ops,splitting_ops",
    [
        (0, 0, "NONE", ["all"], []),
        (1, 3, "PIECEWISE", ["none"], ATTENTION_OPS),
        (2, 3, "FULL_AND_PIECEWISE", ["none"], ATTENTION_OPS),
        (3, 3, "FULL_AND_PIECEWISE", ["none"], ATTENTION_OPS),
    ],
)
def test_no_model_levels_on_cuda(cuda, level, mode, cudagraph_mode, custom_ops, splitting_ops) -> None:
    cc = VllmConfig(optimization_level=OptimizationLevel(level)).compilation_config
    assert (cc.mode, cc.cudagraph_mode, cc.custom_ops, cc.splitting_ops) == (
        mode,
        CUDAGraphMode[cudagraph_mode],
        custom_ops,
        splitting_ops,
    )


@pytest.mark.parametrize(
    "level,cudagraph_mode", [(1, "PIECEWISE"), (2, "FULL_AND_PIECEWISE"), (3, "FULL_AND_PIECEWISE")]
)
def test_tiny_model_levels_on_cuda(cuda, level, cudagraph_mode) -> None:
    vc = VllmConfig(model_config=tiny_model(), optimization_level=OptimizationLevel(level))
    cc = vc.compilation_config
    assert cc.cudagraph_mode is CUDAGraphMode[cudagraph_mode]
    assert (cc.cudagraph_capture_sizes, cc.max_cudagraph_capture_size) == (DEFAULT_35_SIZES, 256)
    assert len(cc.bs_to_padded_graph_size) == 257
    assert cc.bs_to_padded_graph_size[:20] == [
        0,
        1,
        2,
        4,
        4,
        8,
        8,
        8,
        8,
        16,
        16,
        16,
        16,
        16,
        16,
        16,
        16,
        24,
        24,
        24,
    ]
    assert vc.pad_for_cudagraph(17) == 24
    with pytest.raises(IndexError):
        vc.pad_for_cudagraph(257)


def test_enforce_eager(cuda) -> None:
    vc = VllmConfig(model_config=tiny_model(enforce_eager=True))
    cc = vc.compilation_config
    assert vc.optimization_level is OptimizationLevel.O0
    assert (cc.mode, cc.cudagraph_mode, cc.custom_ops, cc.splitting_ops) == (
        0,
        CUDAGraphMode.NONE,
        ["all"],
        [],
    )
    assert (cc.cudagraph_capture_sizes, cc.max_cudagraph_capture_size, cc.cudagraph_num_of_warmups) == (
        [],
        0,
        0,
    )


@pytest.mark.parametrize(
    "kwargs,mode,cudagraph_mode,custom_ops,splitting_ops,fused",
    [
        ({"mode": 0}, 0, "NONE", ["all"], [], True),
        ({"mode": 2}, 2, "NONE", ["none"], [], False),
        ({"mode": 0, "cudagraph_mode": "FULL"}, 0, "FULL", ["all"], [], True),
        ({"backend": "eager"}, 3, "FULL_AND_PIECEWISE", ["all"], ATTENTION_OPS, True),
        ({"mode": 3, "splitting_ops": [], "cudagraph_mode": "PIECEWISE"}, 3, "NONE", ["none"], [], False),
        ({"mode": 3, "splitting_ops": []}, 3, "FULL", ["none"], [], False),
    ],
)
def test_end_states_on_cuda(cuda, kwargs, mode, cudagraph_mode, custom_ops, splitting_ops, fused) -> None:
    cc = VllmConfig(compilation_config=CompilationConfig(**kwargs)).compilation_config
    assert (cc.mode, cc.cudagraph_mode, cc.custom_ops, cc.splitting_ops) == (
        mode,
        CUDAGraphMode[cudagraph_mode],
        custom_ops,
        splitting_ops,
    )
    assert cc.pass_config.fuse_norm_quant is fused and cc.pass_config.fuse_act_quant is fused


def test_o0_with_explicit_mode(cuda) -> None:
    vc = VllmConfig(compilation_config=CompilationConfig(mode=3), optimization_level=OptimizationLevel.O0)
    cc = vc.compilation_config
    assert (cc.mode, cc.cudagraph_mode, cc.custom_ops, cc.splitting_ops) == (
        CompilationMode.VLLM_COMPILE,
        CUDAGraphMode.NONE,
        ["none"],
        ATTENTION_OPS,
    )


def test_keeps_and_mutates_the_given_config(cpu) -> None:
    cc = CompilationConfig(compile_ranges_split_points=[8, 32])
    scheduler = SchedulerConfig(max_num_batched_tokens=8192, max_model_len=8192, is_encoder_decoder=False)
    vc = VllmConfig(scheduler_config=scheduler, compilation_config=cc)
    assert vc.compilation_config is cc
    assert cc.get_compile_ranges() == [Range(1, 8), Range(9, 32), Range(33, 8192)]


def test_compile_range_split_points(cpu) -> None:
    cc = VllmConfig(compilation_config=CompilationConfig(compile_ranges_split_points=[8, 32, 1, 5000, 8]))
    assert cc.compilation_config.compile_ranges_split_points == [8, 8, 32, 2048]
    with pytest.raises(ValidationError, match="Assertion failed, Invalid compile range split point: 0"):
        VllmConfig(compilation_config=CompilationConfig(compile_ranges_split_points=[0]))


def test_splitting_ops_dynamic(cuda) -> None:
    assert VllmConfig().compilation_config.splitting_ops_contain_attention()
    kept = CompilationConfig(
        mode=3, use_inductor_graph_partition=True, splitting_ops=["vllm::unified_attention"]
    )
    assert VllmConfig(compilation_config=kept).compilation_config.splitting_ops == ["vllm::unified_attention"]

    def fusion(**extra: object) -> CompilationConfig:
        return CompilationConfig(
            mode=3,
            pass_config=PassConfig(fuse_attn_quant=True, eliminate_noops=True),
            custom_ops=["+quant_fp8"],
            cudagraph_mode=CUDAGraphMode.PIECEWISE,
            **extra,
        )

    cc = VllmConfig(compilation_config=fusion()).compilation_config
    assert (cc.splitting_ops, cc.cudagraph_mode, cc.custom_ops) == (
        [],
        CUDAGraphMode.FULL,
        ["+quant_fp8", "none"],
    )
    with pytest.raises(ValidationError, match="attention ops should not be in splitting_ops"):
        VllmConfig(compilation_config=fusion(splitting_ops=list(ATTENTION_OPS)))
    cc = VllmConfig(compilation_config=fusion(use_inductor_graph_partition=True)).compilation_config
    assert cc.splitting_ops_contain_attention() and cc.cudagraph_mode is CUDAGraphMode.PIECEWISE


def test_deepep_high_throughput(cuda) -> None:
    ops = ["vllm::unified_attention", "vllm::moe_forward", "vllm::moe_forward_shared"]
    vc = VllmConfig(
        parallel_config=ParallelConfig(all2all_backend="deepep_high_throughput", data_parallel_size=8),
        compilation_config=CompilationConfig(mode=3, use_inductor_graph_partition=True, splitting_ops=ops),
    )
    assert vc.compilation_config.splitting_ops == ops
    assert vc.compilation_config.cudagraph_mode is CUDAGraphMode.NONE


def test_gemm_comms_turns_on_sequence_parallelism(cuda) -> None:
    cc = VllmConfig(
        compilation_config=CompilationConfig(pass_config={"fuse_gemm_comms": True})
    ).compilation_config
    assert cc.pass_config.enable_sp is True
    assert cc.custom_ops == ["none", "+rms_norm", "+rms_norm"]


@pytest.mark.parametrize(
    "sizes,mx,tp,sp,mbt,cudagraph_mode,expected",
    [
        (None, None, 1, False, 2048, "FULL_AND_PIECEWISE", 256),
        ([1, 2, 4], 4, 1, False, 2048, "FULL_AND_PIECEWISE", 4),
        ([1, 2, 4], 8, 1, False, 2048, "FULL_AND_PIECEWISE", ValidationError),
        ([1, 256], None, 1, False, 2048, "FULL_AND_PIECEWISE", 256),
        ([], None, 1, False, 2048, "NONE", 0),
        (None, 0, 1, False, 2048, "NONE", 0),
        (None, 257, 1, False, 2048, "FULL_AND_PIECEWISE", 256),
        ([1, 2, 4, 15], None, 1, False, 2048, "FULL_AND_PIECEWISE", 15),
        ([1, 2, 4, 15], None, 2, True, 2048, "FULL_AND_PIECEWISE", 4),
        ([1, 2, 4, 15], None, 1, False, 8, "FULL_AND_PIECEWISE", 4),
        ([], None, 1, False, 2048, "FULL_AND_PIECEWISE", ValidationError),
        (None, 0, 1, False, 2048, "FULL_AND_PIECEWISE", ValidationError),
    ],
)
def test_cudagraph_sizes_post_init(cuda, sizes, mx, tp, sp, mbt, cudagraph_mode, expected) -> None:
    def build() -> VllmConfig:
        cc = CompilationConfig(
            cudagraph_capture_sizes=sizes,
            max_cudagraph_capture_size=mx,
            cudagraph_mode=cudagraph_mode,
            pass_config=PassConfig(
                enable_sp=sp, fuse_norm_quant=True, fuse_act_quant=True, eliminate_noops=True
            ),
        )
        scheduler = SchedulerConfig(
            max_num_batched_tokens=mbt,
            max_num_seqs=min(mbt, 128),
            max_model_len=512,
            is_encoder_decoder=False,
        )
        return VllmConfig(
            model_config=tiny_model(),
            compilation_config=cc,
            scheduler_config=scheduler,
            parallel_config=ParallelConfig(tensor_parallel_size=tp),
        )

    if expected is ValidationError:
        with pytest.raises(ValidationError):
            build()
    else:
        assert build().compilation_config.max_cudagraph_capture_size == expected


@pytest.mark.parametrize(
    "backend,ops,enabled,final_ops",
    [
        ("eager", [], True, ["all"]),
        ("eager", ["+fused_layernorm"], True, ["+fused_layernorm", "all"]),
        ("eager", ["all", "-fused_layernorm"], False, ["all", "-fused_layernorm"]),
        ("inductor", [], False, ["none"]),
        ("inductor", ["none", "+fused_layernorm"], True, ["none", "+fused_layernorm"]),
        ("inductor", ["none", "-fused_layernorm"], False, ["none", "-fused_layernorm"]),
    ],
)
def test_is_custom_op_enabled_after_vllm_config(cuda, backend, ops, enabled, final_ops) -> None:
    cc = VllmConfig(compilation_config=CompilationConfig(backend=backend, custom_ops=ops)).compilation_config
    assert cc.is_custom_op_enabled("fused_layernorm") is enabled
    assert cc.custom_ops == final_ops


def test_explicit_overrides(cuda) -> None:
    cc = VllmConfig(
        compilation_config=CompilationConfig(
            pass_config=PassConfig(eliminate_noops=True, fuse_attn_quant=True)
        ),
        optimization_level=OptimizationLevel.O0,
    ).compilation_config
    assert cc.pass_config.eliminate_noops is True and cc.pass_config.fuse_attn_quant is True
    cc = VllmConfig(
        compilation_config=CompilationConfig(pass_config=PassConfig(eliminate_noops=False))
    ).compilation_config
    assert cc.pass_config.eliminate_noops is False
    assert (cc.mode, cc.cudagraph_mode) == (CompilationMode.VLLM_COMPILE, CUDAGraphMode.FULL_AND_PIECEWISE)


def test_world_size_against_the_node(cuda) -> None:
    vc = VllmConfig(model_config=tiny_model(), parallel_config=ParallelConfig(tensor_parallel_size=2))
    assert vc.parallel_config.world_size == 2
    with pytest.raises(
        ValidationError, match=r"World size \(16\) is larger than the number of available GPUs \(8\)"
    ):
        ParallelConfig(tensor_parallel_size=16)


def test_heads_divisible_by_tp(cuda) -> None:
    with pytest.raises(ValidationError, match=r"Total number of attention heads \(4\) must be divisible"):
        VllmConfig(model_config=tiny_model(), parallel_config=ParallelConfig(tensor_parallel_size=8))


def test_model_folder_must_be_allowed(cpu, tmp_path) -> None:
    with pytest.raises(ValidationError, match="not a bundled model and not under an allowed root"):
        ModelConfig(model="/etc")
    with pytest.raises(ValidationError, match=r"no config\.json"):
        ModelConfig(model=str(tmp_path))


def test_scheduler_requires_its_init_vars(cpu) -> None:
    with pytest.raises(ValidationError, match="max_model_len\n  Field required"):
        SchedulerConfig(max_num_batched_tokens=64)
    with pytest.raises(ValidationError, match=r"must be greater than or equal to max_num_seqs \(128\)"):
        SchedulerConfig(max_num_batched_tokens=64, max_model_len=64, is_encoder_decoder=False)


def test_debug_dump_path_is_made_absolute(cpu, monkeypatch) -> None:
    monkeypatch.delenv("VLLM_DEBUG_DUMP_PATH", raising=False)
    vc = VllmConfig(compilation_config=CompilationConfig(debug_dump_path="dump"))
    assert vc.compilation_config.debug_dump_path.is_absolute()
    assert vc.compile_debug_dump_path().name == "rank_0_dp_0"


def test_vllm_hash_changes_with_compilation(on_platform) -> None:
    for name in ("cpu", "cuda"):
        on_platform(name)
        base = VllmConfig().compute_hash()
        assert len(base) == 10 and base == VllmConfig().compute_hash()
        assert VllmConfig(compilation_config=CompilationConfig(mode=2)).compute_hash() != base
