"""vLLM's tests/compile/test_config.py test_version and tests/model_executor/test_enabled_custom_ops.py
test_enabled_ops / test_enabled_ops_invalid."""

import pytest
from pydantic import ValidationError

from compilation_bridge.vllm_config import CompilationConfig, VllmConfig
from compilation_bridge.vllm_config.custom_ops import custom_op_enabled, default_on, dispatch_custom_op
from compilation_bridge.vllm_config.versions import is_torch_equal_or_newer, is_torch_equal_or_newer_than


@pytest.mark.parametrize(
    "version,expected",
    [
        ("2.8.0.dev20250624+cu128", True),
        ("2.8.0a0+gitc82a174", True),
        ("2.8.0", True),
        ("2.8.1", True),
        ("2.7.1", False),
    ],
)
def test_version(version, expected) -> None:
    assert is_torch_equal_or_newer_than(version, "2.8.0.dev") is expected


def test_installed_torch_is_read_without_importing_it() -> None:
    import sys

    imported_before = "torch" in sys.modules
    assert is_torch_equal_or_newer("2.6")
    assert ("torch" in sys.modules) is imported_before


OPS = ["rms_norm", "silu_and_mul", "gelu_and_mul", "relu3"]


@pytest.mark.parametrize(
    "env,mode,backend,enabled,expected_default_on",
    [
        ("", 0, "eager", [True] * 4, True),
        ("", 3, "eager", [True] * 4, True),
        ("", 0, "inductor", [True] * 4, True),
        ("", 1, "inductor", [False] * 4, False),
        ("", 3, "inductor", [False] * 4, False),
        ("+rms_norm,-silu_and_mul", 0, "inductor", [1, 0, 1, 1], True),
        ("none,-rms_norm,+relu3", 1, "eager", [0, 0, 0, 1], False),
        ("all,-silu_and_mul", 2, "inductor", [1, 0, 1, 1], True),
        ("-relu3,+relu2", 3, "eager", [1, 1, 1, 0], True),
        ("none,-relu3,+rms_norm,+silu_and_mul", 3, "eager", [1, 1, 0, 0], False),
        ("-rms_norm", 3, "eager", [0, 1, 1, 1], True),
        ("none,+relu3", 3, "inductor", [0, 0, 0, 1], False),
        ("all,-rms_norm", 3, "inductor", [0, 1, 1, 1], True),
    ],
)
def test_enabled_ops(cuda, env, mode, backend, enabled, expected_default_on) -> None:
    custom_ops = env.split(",") if env else []
    cc = CompilationConfig(mode=mode, backend=backend, custom_ops=custom_ops)
    VllmConfig(compilation_config=cc)
    assert [custom_op_enabled(cc, op) for op in OPS] == [bool(e) for e in enabled]
    assert default_on(cc) is expected_default_on


@pytest.mark.parametrize("env", ["all,none", "all,+rms_norm,all"])
def test_enabled_ops_invalid_at_construction(cuda, env) -> None:
    with pytest.raises(ValidationError):
        CompilationConfig(custom_ops=env.split(","))


def test_enable_and_disable_same_op(cuda) -> None:
    cc = CompilationConfig(custom_ops=["+rms_norm", "-rms_norm"])
    VllmConfig(compilation_config=cc)
    with pytest.raises(AssertionError, match="Cannot enable and disable rms_norm"):
        custom_op_enabled(cc, "rms_norm")


def test_dispatch_records_into_the_hashed_counters(cpu) -> None:
    cc = CompilationConfig(custom_ops=["none", "+rms_norm"])
    before = cc.compute_hash()
    assert dispatch_custom_op(cc, "rms_norm") is True
    assert dispatch_custom_op(cc, "silu_and_mul") is False
    assert cc.enabled_custom_ops == {"rms_norm": 1} and cc.disabled_custom_ops == {"silu_and_mul": 1}
    assert cc.compute_hash() != before
