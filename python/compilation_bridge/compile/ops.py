"""Custom ops (torch.library) and the `CustomOp` layers whose path the config's `custom_ops` selects.

- `vllm::unified_attention(query, key, value, layer_name)`: named and shaped like vLLM's, so vLLM's
  default splitting ops match it. Causal attention over the flat token dimension (one sequence),
  query ``[n, heads, head_size]``, key/value ``[n, kv_heads, head_size]`` (grouped-query allowed).
- `silly::attention(q, k, v, out)`: the op of vLLM's piecewise tests (writes ``q + k + v`` into `out`),
  counted in `silly_attention_calls`.
- `bridge::rms_norm` and `bridge::silu_and_mul`: the "custom kernel" paths of `RMSNorm` and `SiluAndMul`.
  They are opaque to Inductor, as vLLM's C++ kernels are; the native paths are plain torch that Inductor
  can fuse. Which one a layer uses is decided once, at construction, by `CustomOp.dispatch_forward`, and
  recorded in the config's `enabled_custom_ops` / `disabled_custom_ops` as vLLM does.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

# ---- torch.library ops ---------------------------------------------------------------------------


@torch.library.custom_op("vllm::unified_attention", mutates_args=())
def unified_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, layer_name: str
) -> torch.Tensor:
    heads, kv_heads = query.shape[1], key.shape[1]
    if heads != kv_heads:
        key = key.repeat_interleave(heads // kv_heads, dim=1)
        value = value.repeat_interleave(heads // kv_heads, dim=1)
    # [n, h, d] -> [h, n, d]: every token attends to itself and the tokens before it.
    out = F.scaled_dot_product_attention(
        query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), is_causal=True
    )
    return out.transpose(0, 1).contiguous()


@unified_attention.register_fake
def _(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, layer_name: str) -> torch.Tensor:
    return torch.empty_like(query)


silly_attention_calls = 0


@torch.library.custom_op("silly::attention", mutates_args=("out",))
def silly_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> None:
    global silly_attention_calls
    silly_attention_calls += 1
    out.copy_(q)
    out += k
    out += v


@silly_attention.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> None:
    return None


@torch.library.custom_op("bridge::rms_norm", mutates_args=())
def rms_norm_op(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return rms_norm_native(x, weight, eps)


@rms_norm_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("bridge::silu_and_mul", mutates_args=())
def silu_and_mul_op(x: torch.Tensor) -> torch.Tensor:
    return silu_and_mul_native(x)


@silu_and_mul_op.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return x.new_empty((*x.shape[:-1], d))


def rms_norm_native(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    variance = x.pow(2).mean(dim=-1, keepdim=True)
    return x * torch.rsqrt(variance + eps) * weight


def silu_and_mul_native(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


# ---- CustomOp layers -----------------------------------------------------------------------------


class CustomOpContext:
    """What `CustomOp.dispatch_forward` reads: the custom_ops rules and where to record the choice."""

    def __init__(self, custom_ops: list[str], compilation_config: Any) -> None:
        self.custom_ops = custom_ops
        self.compilation_config = compilation_config


_context: contextvars.ContextVar[CustomOpContext | None] = contextvars.ContextVar(
    "custom_op_context", default=None
)


@contextmanager
def custom_op_context(custom_ops: list[str], compilation_config: Any) -> Iterator[None]:
    """Layers built inside the block dispatch by `custom_ops` and record into `compilation_config`."""
    token = _context.set(CustomOpContext(custom_ops, compilation_config))
    try:
        yield
    finally:
        _context.reset(token)


def _current() -> CustomOpContext:
    ctx = _context.get()
    if ctx is None:
        raise RuntimeError("CustomOp layers must be built inside compile.ops.custom_op_context(...)")
    return ctx


class CustomOp(nn.Module):
    """vLLM's CustomOp: a layer with a native path and a custom-kernel path, chosen at construction."""

    name: ClassVar[str]
    op_registry: ClassVar[dict[str, type[CustomOp]]] = {}

    def __init__(self) -> None:
        super().__init__()
        self._forward_method = self.dispatch_forward()

    def forward(self, *args: Any) -> Any:
        return self._forward_method(*args)

    def forward_native(self, *args: Any) -> Any:
        raise NotImplementedError

    def forward_custom(self, *args: Any) -> Any:
        raise NotImplementedError

    def dispatch_forward(self) -> Callable[..., Any]:
        ctx = _current()
        enabled = self.enabled(ctx.custom_ops)
        counter = "enabled_custom_ops" if enabled else "disabled_custom_ops"
        getattr(ctx.compilation_config, counter).update([self.name])
        return self.forward_custom if enabled else self.forward_native

    @classmethod
    def enabled(cls, custom_ops: list[str]) -> bool:
        on, off = f"+{cls.name}" in custom_ops, f"-{cls.name}" in custom_ops
        assert not (on and off), f"Cannot enable and disable {cls.name}"
        return (cls.default_on(custom_ops) or on) and not off

    @staticmethod
    def default_on(custom_ops: list[str]) -> bool:
        count_none, count_all = custom_ops.count("none"), custom_ops.count("all")
        assert count_none + count_all == 1
        return not count_none > 0 or count_all > 0

    @classmethod
    def register(cls, name: str) -> Callable[[type[CustomOp]], type[CustomOp]]:
        def decorator(op_cls: type[CustomOp]) -> type[CustomOp]:
            assert name not in cls.op_registry, f"Duplicate op name: {name}"
            op_cls.name = name
            cls.op_registry[name] = op_cls
            return op_cls

        return decorator


@CustomOp.register("rms_norm")
class RMSNorm(CustomOp):
    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm_native(x, self.weight, self.eps)

    def forward_custom(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.bridge.rms_norm(x, self.weight, self.eps)


@CustomOp.register("silu_and_mul")
class SiluAndMul(CustomOp):
    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        return silu_and_mul_native(x)

    def forward_custom(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.bridge.silu_and_mul(x)
