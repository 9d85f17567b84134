"""Random configurations (hypothesis, derandomized so CI is reproducible), standalone and through
``VllmConfig``, compared with vLLM 0.14.0 on fields, errors, hashes, ranges, repr and method results.

``DIFFERENTIAL_EXAMPLES`` (default 1000) sets the number of examples per test and platform; the session
summary prints how many configurations were compared."""

from __future__ import annotations

import os
from typing import Any

import pytest
from config_strategies import (
    compilation_kwargs,
    dynamic_shapes_configs,
    pass_configs,
    vllm_surroundings,
)
from diff_harness import (
    FIELDS,
    HASH,
    PLATFORMS,
    POST_INIT,
    RANGES,
    REPR,
    STR,
    call,
    cc_request,
    get,
    op,
    vllm_request,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("DIFFERENTIAL_EXAMPLES", "1000"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

OP_NAMES = ("rms_norm", "quant_fp8", "silu_and_mul", "x")
# Built once: building these strategies inside each draw costs more than running the example.
STANDALONE_KWARGS = compilation_kwargs(invalid_share=3)
VLLM_KWARGS = compilation_kwargs(invalid_share=40)
SURROUNDINGS = vllm_surroundings()
OTHER_KWARGS = compilation_kwargs(invalid_share=0)
SEQUENCE_KWARGS = compilation_kwargs(invalid_share=12)
PASS_KWARGS = pass_configs(invalid_share=3).filter(lambda v: isinstance(v, dict) and "__new__" not in v)
DSC_KWARGS = dynamic_shapes_configs(invalid_share=3).filter(lambda v: isinstance(v, dict))


@st.composite
def standalone_requests(draw: st.DrawFn) -> dict[str, Any]:
    kwargs = draw(STANDALONE_KWARGS)
    q = draw(st.integers(1, 4))
    tp = draw(st.sampled_from((1, 2, 4)))
    all2all = draw(st.sampled_from(("allgather_reducescatter", "deepep_high_throughput")))
    dp = draw(st.sampled_from((1, 2)))
    ops = [
        HASH,
        REPR,
        RANGES,
        call("splitting_ops_contain_attention"),
        call("is_attention_compiled_piecewise"),
        call("is_custom_op_enabled", draw(st.sampled_from(OP_NAMES))),
        op("eq", other={"__new__": "CompilationConfig", "kwargs": {}}),
        op("eq", other={"__new__": "CompilationConfig", "kwargs": kwargs}),
        op("eq", other={"__new__": "CompilationConfig", "kwargs": draw(OTHER_KWARGS)}),
        op("deepcopy_eq"),
        op("hash", on="pass_config"),
        op("hash", on="dynamic_shapes_config"),
        POST_INIT,
        FIELDS,
        HASH,
        call("adjust_cudagraph_sizes_for_spec_decode", q, tp),
        call("set_splitting_ops_for_v1", all2all, dp),
        FIELDS,
        call("is_attention_compiled_piecewise"),
        HASH,
        STR,
    ]
    if "mode" not in kwargs and "level" not in kwargs:
        ops.append(op("init_backend"))
    return cc_request(kwargs, ops)


@st.composite
def vllm_requests(draw: st.DrawFn) -> dict[str, Any]:
    kwargs = draw(VLLM_KWARGS)
    around = draw(SURROUNDINGS)
    ops = [
        HASH,
        RANGES,
        REPR,
        call("splitting_ops_contain_attention"),
        call("is_attention_compiled_piecewise"),
        call("is_custom_op_enabled", draw(st.sampled_from(OP_NAMES))),
        get("optimization_level", on=""),
        op("hash", on="compilation_config.pass_config"),
        op("hash", on="compilation_config.dynamic_shapes_config"),
        POST_INIT,
        FIELDS,
        HASH,
        RANGES,
    ]
    ops.append(op("fields", on="scheduler_config"))
    if around.get("parallel_config", {}).get("data_parallel_size", 1) == 1:  # else vLLM picks free ports
        ops.append(op("fields", on="parallel_config"))
    return vllm_request(kwargs, ops=ops, **around)


@pytest.mark.parametrize("plat", PLATFORMS)
def test_random_compilation_configs(check: Any, plat: str) -> None:
    """Standalone ``CompilationConfig``s from the whole valid and invalid space, then its methods."""

    @SETTINGS
    @given(standalone_requests())
    def run(req: dict[str, Any]) -> None:
        check(plat, req)

    run()


@pytest.mark.parametrize("plat", PLATFORMS)
def test_random_vllm_configs(check: Any, plat: str) -> None:
    """Mostly valid ``CompilationConfig``s through ``VllmConfig`` (scheduler, parallelism, DeepEP, the
    tiny model, optimization levels), then ``post_init_cudagraph_sizes`` again and the methods."""

    @SETTINGS
    @given(vllm_requests())
    def run(req: dict[str, Any]) -> None:
        check(plat, req)

    run()


@st.composite
def small_config_requests(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        ops = [HASH, REPR, op("deepcopy_eq"), *[call("flashinfer_max_size", ws) for ws in (1, 2, 4, 8)]]
        return {"build": {"kind": "new", "cls": "PassConfig", "kwargs": draw(PASS_KWARGS)}, "ops": ops}
    ops = [HASH, REPR, op("deepcopy_eq")]
    return {"build": {"kind": "new", "cls": "DynamicShapesConfig", "kwargs": draw(DSC_KWARGS)}, "ops": ops}


@pytest.mark.parametrize("plat", PLATFORMS)
def test_random_pass_and_dynamic_shapes_configs(check: Any, plat: str) -> None:
    """Standalone ``PassConfig`` and ``DynamicShapesConfig`` from valid and invalid keyword arguments."""

    @settings(SETTINGS, max_examples=max(EXAMPLES // 4, 1))
    @given(small_config_requests())
    def run(req: dict[str, Any]) -> None:
        check(plat, req)

    run()


METHOD_STEPS = st.one_of(
    st.just(POST_INIT),
    st.just(call("compute_bs_to_padded_graph_size")),
    st.builds(
        lambda q, tp: call("adjust_cudagraph_sizes_for_spec_decode", q, tp),
        st.integers(0, 5),
        st.sampled_from((1, 2, 3, 4, 8)),
    ),
    st.builds(
        lambda a, dp: call("set_splitting_ops_for_v1", a, dp),
        st.sampled_from(("naive", "deepep_high_throughput")),
        st.sampled_from((1, 2)),
    ),
    st.just(call("set_splitting_ops_for_attn_fusion")),
    st.builds(lambda n: call("is_custom_op_enabled", n), st.sampled_from(OP_NAMES)),
    st.just(RANGES),
    st.just(call("is_attention_compiled_piecewise")),
    st.just(FIELDS),
    st.just(HASH),
    st.just(REPR),
)


@st.composite
def method_sequences(draw: st.DrawFn) -> dict[str, Any]:
    kwargs = draw(SEQUENCE_KWARGS)
    steps = draw(st.lists(METHOD_STEPS, min_size=1, max_size=8))
    return cc_request(kwargs, [*steps, HASH])


@pytest.mark.parametrize("plat", PLATFORMS)
def test_random_method_sequences(check: Any, plat: str) -> None:
    """Random sequences of the mutating methods on a random config: every intermediate result, error and
    the final state must match (methods that fail half-way leave the same partial state)."""

    @settings(SETTINGS, max_examples=max(EXAMPLES // 2, 1))
    @given(method_sequences())
    def run(req: dict[str, Any]) -> None:
        check(plat, req)

    run()
