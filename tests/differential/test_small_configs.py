"""``PassConfig`` and ``DynamicShapesConfig`` (validation, ``__post_init__``,
``flashinfer_max_size``, ``compute_hash``, equality)."""

from __future__ import annotations

from typing import Any

import pytest
from diff_harness import HASH, REPR, build_new, call, new, op

PASS_FLAGS = (
    "fuse_norm_quant",
    "fuse_act_quant",
    "fuse_attn_quant",
    "eliminate_noops",
    "enable_sp",
    "fuse_gemm_comms",
    "fuse_allreduce_rms",
)


def pass_request(kwargs: dict[str, Any], ops: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    default_ops = [
        HASH,
        REPR,
        op("eq", other=new("PassConfig")),
        op("deepcopy_eq"),
        op("eq", other=None),
        op("pyhash_eq", other=None),
        *[call("flashinfer_max_size", ws) for ws in (1, 2, 3, 4, 8, 16)],
    ]
    return {"build": build_new("PassConfig", **kwargs), "ops": default_ops if ops is None else ops}


PASS_CASES: list[dict[str, Any]] = [
    {},
    *[{f: v} for f in PASS_FLAGS for v in (True, False, None)],
    {"fuse_norm_quant": "yes"},
    {"fuse_norm_quant": 1},
    {"fuse_norm_quant": 0},
    {"fuse_norm_quant": "off"},
    {"fuse_norm_quant": 2},
    {"fuse_norm_quant": "maybe"},
    {"fuse_norm_quant": []},
    {"eliminate_noops": 1.0},
    {"eliminate_noops": 0.5},
    {"fi_allreduce_fusion_max_size_mb": 1},
    {"fi_allreduce_fusion_max_size_mb": 0.5},
    {"fi_allreduce_fusion_max_size_mb": 64.0},
    {"fi_allreduce_fusion_max_size_mb": "2"},
    {"fi_allreduce_fusion_max_size_mb": "x"},
    {"fi_allreduce_fusion_max_size_mb": None},
    {"fi_allreduce_fusion_max_size_mb": 0},
    {"fi_allreduce_fusion_max_size_mb": -1.5},
    {"enable_qk_norm_rope_fusion": True},
    {"enable_qk_norm_rope_fusion": False},
    {"enable_qk_norm_rope_fusion": None},
    {"enable_qk_norm_rope_fusion": "true"},
    # warnings only: fusions on with noop elimination off
    {"fuse_norm_quant": True, "fuse_attn_quant": True, "fuse_allreduce_rms": True, "eliminate_noops": False},
    {"fuse_gemm_comms": True, "enable_sp": False},
    # removed old names and unknown keys
    {"enable_fusion": True},
    {"enable_noop": True},
    {"enable_attn_fusion": True},
    {"enable_sequence_parallelism": True},
    {"bogus": 1, "fuse_norm_quant": True},
]


@pytest.mark.parametrize("kwargs", PASS_CASES, ids=repr)
def test_pass_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, pass_request(kwargs))


def test_pass_config_positional(check: Any, platform: str) -> None:
    """Positional construction, and "multiple values" for a keyword given twice."""
    check(platform, {"build": build_new("PassConfig", True, False), "ops": [HASH]})
    check(platform, {"build": build_new("PassConfig", True, fuse_norm_quant=False), "ops": [HASH]})


def test_pass_config_hash_none_vs_false(check: Any, platform: str) -> None:
    """``PassConfig.compute_hash``: None and False hash differently; equal configs hash alike."""
    for kwargs in ({}, {"fuse_norm_quant": False}, {"fuse_norm_quant": None}, {"fuse_norm_quant": True}):
        check(platform, pass_request(kwargs, [HASH, op("eq", other=new("PassConfig", **kwargs))]))


def test_pass_config_default_fi_table(check: Any, platform: str) -> None:
    """The per-capability default table: sm_90 values on the stand-in CUDA node, ``{}`` on CPU."""
    req = {
        "build": {"kind": "class", "cls": "PassConfig"},
        "ops": [call("default_fi_allreduce_fusion_max_size_mb")],
    }
    check(platform, req)


DSC_CASES: list[dict[str, Any]] = [
    {},
    {"type": "backed"},
    {"type": "unbacked"},
    {"type": "backed_size_oblivious"},
    {"type": {"__enum__": "DynamicShapesType", "name": "UNBACKED"}},
    {"type": "BACKED"},
    {"type": "bogus"},
    {"type": 1},
    {"type": None},
    {"evaluate_guards": True},
    {"evaluate_guards": "yes"},
    {"evaluate_guards": 2},
    {"evaluate_guards": None},
    {"assume_32_bit_indexing": False},
    {"assume_32_bit_indexing": "no"},
    {"assume_32_bit_indexing": None},
    {"type": "unbacked", "evaluate_guards": True, "assume_32_bit_indexing": False},
    {"bogus": True},
    {"assume_32bit_indexing": True},
]


@pytest.mark.parametrize("kwargs", DSC_CASES, ids=repr)
def test_dynamic_shapes_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    ops = [HASH, REPR, op("eq", other=new("DynamicShapesConfig")), op("deepcopy_eq")]
    check(platform, {"build": build_new("DynamicShapesConfig", **kwargs), "ops": ops})


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        *(
            {"device": d}
            for d in ("auto", "cpu", "cuda", "cuda:1", "cpu:0", "tpu", "cuda:x", "cuda:-1", "bogus")
        ),
    ],
    ids=repr,
)
def test_device_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    """``DeviceConfig``: the platform's device type, its hash and repr. vLLM holds a ``torch.device`` in
    ``device``, this worker its type name (docs/configuration.md): compared by ``str``, which both print
    alike."""
    ops = [HASH, REPR, op("get", name="device_type"), op("str", on="device")]
    check(platform, {"build": build_new("DeviceConfig", **kwargs), "ops": ops, "final": False})
