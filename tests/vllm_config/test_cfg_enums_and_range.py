"""vLLM 0.14.0's enums, the CUDAGraphMode truth table, Range."""

import pytest

from compilation_bridge.vllm_config import CompilationMode, CUDAGraphMode, Range

M = CUDAGraphMode
# mode: decode, mixed, separate, has_full, has_piecewise, max, valid_runtime
TRUTH_TABLE = [
    (M.NONE, M.NONE, M.NONE, False, False, False, M.NONE, True),
    (M.PIECEWISE, M.PIECEWISE, M.PIECEWISE, False, False, True, M.PIECEWISE, True),
    (M.FULL, M.FULL, M.FULL, False, True, False, M.FULL, True),
    (M.FULL_DECODE_ONLY, M.FULL, M.NONE, True, True, False, M.FULL, False),
    (M.FULL_AND_PIECEWISE, M.FULL, M.PIECEWISE, True, True, True, M.FULL, False),
]


@pytest.mark.parametrize("mode,decode,mixed,sep,full,pw,mx,valid", TRUTH_TABLE)
def test_cudagraph_mode_truth_table(mode, decode, mixed, sep, full, pw, mx, valid) -> None:
    assert mode.decode_mode() is decode
    assert mode.mixed_mode() is mixed
    assert mode.separate_routine() is sep
    assert mode.has_full_cudagraphs() is full
    assert mode.has_piecewise_cudagraphs() is pw
    assert mode.requires_piecewise_compilation() is pw
    assert mode.max_cudagraph_mode() is mx
    assert mode.valid_runtime_modes() is valid
    assert str(mode) == mode.name


def test_has_mode_rejects_separate_routine_argument() -> None:
    with pytest.raises(AssertionError):
        M.FULL.has_mode(M.FULL_DECODE_ONLY)


def test_compilation_mode_is_int_enum() -> None:
    assert CompilationMode.VLLM_COMPILE == 3
    assert [m.value for m in CompilationMode] == [0, 1, 2, 3]


def test_range_semantics() -> None:
    r = Range(1, 8)
    assert str(r) == repr(r) == "(1, 8)"
    assert 1 in r and 8 in r and 9 not in r
    assert Range(1, 2) != (1, 2)
    assert Range(1, 2) == Range(1, 2)
    assert hash(Range(1, 2)) == hash((1, 2))
    assert Range(4, 4).is_single_size() and not r.is_single_size()
