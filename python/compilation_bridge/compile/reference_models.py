"""Reference models: `toy-llama` (a small Llama-style decoder) and the models of vLLM's piecewise tests.

Every model takes tensors whose dimension 0 is the flat token dimension, the dynamic dimension that
compile ranges and compile sizes refer to, and builds deterministic inputs for a token count
(`example_inputs`). Weights come from a seeded generator, in float32, so two processes build the same
model. Layers that are `CustomOp`s must be built inside `ops.custom_op_context`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn

from compilation_bridge.compile import budgets
from compilation_bridge.compile.ops import RMSNorm, SiluAndMul

# The sizes of `ToyLlamaOptions.run_footprint` (its docstring says where each comes from).
FLOAT32 = 4
SCORE_COPIES = 3
CAUSAL_MASK_BYTES = 5
ATTENTION_WIDTHS = 16
MLP_HIDDEN_WIDTHS = 4
MLP_INTERMEDIATE_WIDTHS = 4
# vLLM's test models: the input, the running value, its next one and the attention's output buffer, and
# two more that a split graph keeps for its next piece (a whole Inductor run measured 9 hidden-state
# tensors alive, 4 of them the runner's inputs and outputs; RUN_FACTOR doubles these 6).
SIMPLE_MODEL_WIDTHS = 6


@dataclasses.dataclass(frozen=True)
class ToyLlamaOptions:
    vocab_size: int = 512
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 256
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", int) and (not isinstance(value, int) or isinstance(value, bool)):
                raise TypeError(f"toy-llama option {f.name} must be an int, got {value!r}")
        limits = {
            "vocab_size": 1 << 16,
            "hidden_size": 4096,
            "num_layers": 64,
            "num_heads": 256,
            "num_kv_heads": 256,
            "intermediate_size": 16384,
        }
        for name, cap in limits.items():
            if not 1 <= getattr(self, name) <= cap:
                raise ValueError(f"toy-llama option {name} must be between 1 and {cap}")
        if (
            self.hidden_size % self.num_heads
            or self.num_heads % self.num_kv_heads
            or (self.hidden_size // self.num_heads) % 2
        ):
            raise ValueError(
                "toy-llama needs hidden_size divisible by num_heads into an even head size, and num_heads "
                "divisible by num_kv_heads, got "
                f"hidden_size={self.hidden_size}, num_heads={self.num_heads}, "
                f"num_kv_heads={self.num_kv_heads}"
            )
        budgets.check_model_bytes("toy-llama", self.parameter_count())

    def parameter_count(self) -> int:
        """The weights `ToyLlama` allocates for these options (computed, so nothing is allocated first)."""
        head_size = self.hidden_size // self.num_heads
        qkv = self.hidden_size * (self.num_heads + 2 * self.num_kv_heads) * head_size
        o_proj = self.num_heads * head_size * self.hidden_size
        mlp = 3 * self.hidden_size * self.intermediate_size  # gate and up projections, then down
        layer = qkv + o_proj + mlp + 2 * self.hidden_size  # plus two RMSNorm weights
        return self.vocab_size * self.hidden_size + self.num_layers * layer + self.hidden_size

    def run_footprint(self, num_tokens: int) -> budgets.RunFootprint:
        """The peak bytes a run of `num_tokens` tokens allocates, computed (nothing is allocated first).

        One forward peaks in a layer's attention and in its MLP (the layers run one after the other, and
        the embedding and final norm hold a few hidden widths, fewer than either), all float32:

        - attention: `SCORE_COPIES` x heads x tokens² (`scaled_dot_product_attention` on CPU takes its
          math path for `unified_attention`'s 3-D inputs and materialises the scores, their softmax and
          its masked copy, measured 2.4 to 3.2 copies with torch 2.13), tokens² bytes x
          `CAUSAL_MASK_BYTES` (the causal mask as bool, then float), and `ATTENTION_WIDTHS` hidden
          widths per token: residual, norm, qkv (at most 3), rotary tables and halves, rotated q and k,
          keys and values repeated to every head, the scaled q and k, the output (12.5 counted).
        - MLP: `MLP_HIDDEN_WIDTHS` hidden widths per token (the residuals, the norm, the output) and
          `MLP_INTERMEDIATE_WIDTHS` intermediate widths (gate and up, the SiLU, the product).

        The model returns hidden states, so there are no vocabulary-sized logits; the embedding reads
        rows of its table. `budgets.RunFootprint.of` sums the two (the allocator may keep the first's
        pages), doubles that for the eager reference run beside the compiled one, and adds what the
        runner holds: both outputs and two input sets.
        """
        n, heads, hidden, width = num_tokens, self.num_heads, self.hidden_size, FLOAT32 * num_tokens
        scores = (SCORE_COPIES * FLOAT32 * heads + CAUSAL_MASK_BYTES) * n * n
        mlp_widths = MLP_HIDDEN_WIDTHS * hidden + MLP_INTERMEDIATE_WIDTHS * self.intermediate_size
        terms = {
            f"attention {heads} heads x {n}² tokens": scores,
            f"hidden states {n} tokens x hidden size {hidden}": ATTENTION_WIDTHS * hidden * width,
            f"the MLP {n} tokens x intermediate size {self.intermediate_size}": mlp_widths * width,
        }
        held = 2 * hidden * width + 2 * 2 * 8 * n  # both outputs; two sets of int64 ids and positions
        return budgets.RunFootprint.of(n, terms, held)


def _init_(generator: torch.Generator, *tensors: torch.Tensor, std: float) -> None:
    with torch.no_grad():
        for t in tensors:
            t.copy_(torch.randn(t.shape, generator=generator) * std)


def _rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # neox-style rotation of the two halves of each head, as vLLM's default RotaryEmbedding
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class ToyLlamaAttention(nn.Module):
    inv_freq: torch.Tensor  # a buffer, registered in __init__

    def __init__(self, o: ToyLlamaOptions, layer_name: str) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads = o.num_heads, o.num_kv_heads
        self.head_size = o.hidden_size // o.num_heads
        self.q_size, self.kv_size = self.num_heads * self.head_size, self.num_kv_heads * self.head_size
        self.qkv_proj = nn.Linear(o.hidden_size, self.q_size + 2 * self.kv_size, bias=False)
        self.o_proj = nn.Linear(self.q_size, o.hidden_size, bias=False)
        self.layer_name = layer_name
        half = self.head_size // 2
        inv_freq = 1.0 / (o.rope_theta ** (torch.arange(0, half, dtype=torch.float32) / half))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        n = hidden.shape[0]
        qkv = self.qkv_proj(hidden)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        freqs = positions.to(torch.float32)[:, None] * self.inv_freq[None, :]
        cos, sin = freqs.cos()[:, None, :], freqs.sin()[:, None, :]
        q = _rotary(q.view(n, self.num_heads, self.head_size), cos, sin)
        k = _rotary(k.view(n, self.num_kv_heads, self.head_size), cos, sin)
        v = v.view(n, self.num_kv_heads, self.head_size)
        out = torch.ops.vllm.unified_attention(q, k, v, self.layer_name)
        return self.o_proj(out.reshape(n, self.q_size))


class ToyLlamaMLP(nn.Module):
    def __init__(self, o: ToyLlamaOptions) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(o.hidden_size, 2 * o.intermediate_size, bias=False)
        self.act_fn = SiluAndMul()
        self.down_proj = nn.Linear(o.intermediate_size, o.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_up_proj(x)))


class ToyLlamaDecoderLayer(nn.Module):
    def __init__(self, o: ToyLlamaOptions, layer_name: str) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(o.hidden_size, o.rms_norm_eps)
        self.self_attn = ToyLlamaAttention(o, layer_name)
        self.post_attention_layernorm = RMSNorm(o.hidden_size, o.rms_norm_eps)
        self.mlp = ToyLlamaMLP(o)

    def forward(self, positions: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        hidden = hidden + self.self_attn(positions, self.input_layernorm(hidden))
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class ToyLlama(nn.Module):
    """Embedding, `num_layers` decoder layers (one attention op each), final RMSNorm -> hidden states."""

    def __init__(self, options: ToyLlamaOptions, seed: int = 0) -> None:
        super().__init__()
        self.options = options
        self.embed_tokens = nn.Embedding(options.vocab_size, options.hidden_size)
        self.layers = nn.ModuleList(
            ToyLlamaDecoderLayer(options, f"model.layers.{i}.self_attn.attn")
            for i in range(options.num_layers)
        )
        self.norm = RMSNorm(options.hidden_size, options.rms_norm_eps)
        generator = torch.Generator().manual_seed(seed)
        for name, p in sorted(self.named_parameters()):
            if name.endswith("layernorm.weight") or name == "norm.weight":
                _init_(generator, p, std=0.1)
                with torch.no_grad():
                    p.add_(1.0)
            else:
                std = 1.0 if name.startswith("embed") else 1.0 / math.sqrt(p.shape[-1])
                _init_(generator, p, std=std)

    def run_footprint(self, num_tokens: int) -> budgets.RunFootprint:
        return self.options.run_footprint(num_tokens)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        hidden = self.embed_tokens(input_ids)
        for layer in self.layers:
            hidden = layer(positions, hidden)
        return self.norm(hidden)

    def example_inputs(self, num_tokens: int, device: torch.device) -> tuple[torch.Tensor, ...]:
        positions = torch.arange(num_tokens, device=device)
        input_ids = (positions * 7 + 3) % self.options.vocab_size
        return input_ids, positions


class SimplePiecewiseModel(nn.Module):
    """vLLM's `fullgraph/test_simple.py` model: x+1, +2, attention, -2, -1, attention, +1.

    Two attention calls, so splitting at `silly::attention` gives 5 pieces of which 3 are compiled; an
    input of zeros gives 19 everywhere.
    """

    def __init__(self, hidden_size: int = 1) -> None:
        super().__init__()
        self.hidden_size = hidden_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + 1
        x = x + 2
        out = torch.empty_like(x)
        torch.ops.silly.attention(x, x, x, out)
        x = out
        x = x - 2
        x = x - 1
        out = torch.empty_like(x)
        torch.ops.silly.attention(x, x, x, out)
        x = out
        return x + 1

    def example_inputs(self, num_tokens: int, device: torch.device) -> tuple[torch.Tensor, ...]:
        return (torch.zeros(num_tokens, self.hidden_size, device=device),)

    def run_footprint(self, num_tokens: int) -> budgets.RunFootprint:
        return _simple_run_footprint(num_tokens, self.hidden_size)


class SingleAttentionModel(nn.Module):
    """vLLM's `test_compile_ranges.py` model: x + x, attention, * 3 (ones in, 18 out)."""

    def __init__(self, hidden_size: int = 4) -> None:
        super().__init__()
        self.hidden_size = hidden_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + x
        out = torch.empty_like(x)
        torch.ops.silly.attention(x, x, x, out)
        return out * 3

    def example_inputs(self, num_tokens: int, device: torch.device) -> tuple[torch.Tensor, ...]:
        return (torch.ones(num_tokens, self.hidden_size, device=device),)

    def run_footprint(self, num_tokens: int) -> budgets.RunFootprint:
        return _simple_run_footprint(num_tokens, self.hidden_size)


def _simple_run_footprint(num_tokens: int, hidden_size: int) -> budgets.RunFootprint:
    """vLLM's test models only add to and copy hidden states (their attention writes q + k + v), so a
    forward holds `SIMPLE_MODEL_WIDTHS` of them; the runner holds both outputs and two inputs besides."""
    hidden = FLOAT32 * num_tokens * hidden_size
    what = f"hidden states {num_tokens} tokens x hidden size {hidden_size}"
    return budgets.RunFootprint.of(num_tokens, {what: SIMPLE_MODEL_WIDTHS * hidden}, 4 * hidden)


def _toy_llama(seed: int, options: dict[str, Any]) -> nn.Module:
    return ToyLlama(ToyLlamaOptions(**options), seed=seed)


def _simple(cls: type[nn.Module]) -> Callable[[int, dict[str, Any]], nn.Module]:
    def build(seed: int, options: dict[str, Any]) -> nn.Module:
        hidden = options.pop("hidden_size", None)
        if options:
            raise TypeError(f"unknown model options: {', '.join(sorted(options))}")
        if hidden is None:
            return cls()
        if not isinstance(hidden, int) or not 1 <= hidden <= 4096:
            raise ValueError("hidden_size must be an int between 1 and 4096")
        return cls(hidden)

    return build


def hidden_size(model: nn.Module) -> int:
    """The width of the model's hidden states, which every activation of a run scales with."""
    options = getattr(model, "options", None)
    width: Any = options.hidden_size if options is not None else model.hidden_size
    return int(width)


def footprint_of(model: nn.Module) -> budgets.Footprint:
    """The model's `run_footprint`: every reference model states what a run allocates at its peak."""
    return cast(budgets.Footprint, model.run_footprint)


MODELS: dict[str, Callable[[int, dict[str, Any]], nn.Module]] = {
    "toy-llama": _toy_llama,
    "simple-piecewise": _simple(SimplePiecewiseModel),
    "single-attention": _simple(SingleAttentionModel),
}


def option_names(name: str) -> tuple[str, ...]:
    """The size options model `name` takes (what `build_model` accepts as keywords)."""
    if MODELS[name] is _toy_llama:
        return tuple(f.name for f in dataclasses.fields(ToyLlamaOptions))
    return ("hidden_size",)


def build_model(name: str, seed: int = 0, **options: Any) -> nn.Module:
    """Build a reference model by name; layers with CustomOps need an active `custom_op_context`."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(MODELS)}")
    try:
        return MODELS[name](seed, dict(options))
    except TypeError as e:
        if "unexpected keyword argument" in str(e):
            raise TypeError(f"unknown option for model {name!r}: {e}") from None
        raise
