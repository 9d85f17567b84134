"""Custom ops: a correct attention, and the custom_ops rules choosing kernel or native paths."""

from __future__ import annotations

import math

import pytest
import torch

from compilation_bridge.compile import compile_model, ops
from compilation_bridge.vllm_config import CompilationConfig


def _naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    n, heads, d = q.shape
    k = k.repeat_interleave(heads // k.shape[1], dim=1)
    v = v.repeat_interleave(heads // v.shape[1], dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(d)
    scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)


def test_unified_attention_is_causal_grouped_query_attention() -> None:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(5, h, 8, generator=g) for h in (4, 2, 2))
    out = torch.ops.vllm.unified_attention(q, k, v, "layer")
    torch.testing.assert_close(out, _naive_attention(q, k, v))
    # the first token sees only itself
    torch.testing.assert_close(out[0], v[0].repeat_interleave(2, dim=0))


def test_rms_norm_and_silu_and_mul_custom_paths_match_native() -> None:
    x, w = torch.randn(3, 8), torch.randn(8)
    torch.testing.assert_close(torch.ops.bridge.rms_norm(x, w, 1e-6), ops.rms_norm_native(x, w, 1e-6))
    torch.testing.assert_close(torch.ops.bridge.silu_and_mul(x), ops.silu_and_mul_native(x))


@pytest.mark.parametrize(
    ("mode", "backend", "custom_ops", "enabled", "disabled"),
    [
        (3, "inductor", [], {}, {"rms_norm": 3, "silu_and_mul": 1}),  # "none" with Inductor compiling
        (0, "inductor", [], {"rms_norm": 3, "silu_and_mul": 1}, {}),  # "all" when nothing compiles
        (3, "eager", [], {"rms_norm": 3, "silu_and_mul": 1}, {}),  # and with the eager backend
        (0, "eager", ["none", "+rms_norm"], {"rms_norm": 3}, {"silu_and_mul": 1}),
        (0, "inductor", ["all", "-silu_and_mul"], {"rms_norm": 3}, {"silu_and_mul": 1}),
    ],
)
def test_custom_ops_rules_are_recorded_as_vllm_does(
    mode: int, backend: str, custom_ops: list[str], enabled: dict, disabled: dict, cache_dir: str
) -> None:
    config = CompilationConfig(mode=mode, backend=backend, custom_ops=custom_ops, cache_dir=cache_dir)
    before = config.compute_hash()
    model = compile_model(config, model="toy-llama", num_layers=1, hidden_size=16)
    assert dict(config.enabled_custom_ops) == enabled
    assert dict(config.disabled_custom_ops) == disabled
    assert config.compute_hash() != before  # the counters are hashed, as in vLLM
    assert config.custom_ops == custom_ops  # the defaulted "all"/"none" is not written back
    if mode == 0 or backend == "eager":  # no Inductor compile in a unit test
        assert model.run(4)["max_abs_diff_vs_eager"] == 0.0


def test_enabling_and_disabling_one_op_fails_like_vllm() -> None:
    config = CompilationConfig(mode=0, custom_ops=["+rms_norm", "-rms_norm"])
    with pytest.raises(AssertionError, match="Cannot enable and disable rms_norm"):
        compile_model(config, model="toy-llama", num_layers=1, hidden_size=16)


def test_kernel_and_native_paths_give_the_same_numbers(cache_dir: str) -> None:
    outs = []
    for custom_ops in (["all"], ["none"]):
        config = CompilationConfig(
            mode=3, backend="eager", custom_ops=custom_ops, cache_dir=cache_dir + custom_ops[0]
        )
        model = compile_model(config, model="toy-llama", max_num_tokens=8, num_layers=1, hidden_size=16)
        outs.append(model.forward(*model.model.example_inputs(8, torch.device("cpu"))))
    torch.testing.assert_close(outs[0], outs[1])
