"""`split_graph` and `should_split` (vLLM's test_graph_partition and test_should_split;
docs/design.md#real-compilation)."""

from __future__ import annotations

import operator

import torch
from torch import fx
from torch.fx.experimental.proxy_tensor import make_fx

import compilation_bridge.compile  # noqa: F401  (registers the silly/vllm ops)
from compilation_bridge.compile.split import should_split, split_graph


def _node(target: object) -> fx.Node:
    graph = fx.Graph()
    x = graph.placeholder("x")
    return graph.call_function(target, (x, x))  # type: ignore[arg-type]


def test_should_split_matches_packet_and_overload_names() -> None:
    add = _node(torch.ops.aten.add.default)
    assert should_split(add, ["aten::add"])
    assert should_split(add, ["aten::add.default"])
    assert not should_split(add, ["aten::add.Tensor"])
    assert should_split(_node(torch.ops.silly.attention), ["silly::attention"])
    assert should_split(_node(torch.ops.silly.attention.default), ["silly::attention"])
    assert should_split(_node(torch.ops.silly.attention.default), ["silly::attention.default"])
    assert not should_split(_node(operator.add), ["aten::add"])


def _split_model(x: torch.Tensor) -> torch.Tensor:
    a, b = torch.split(x, x.shape[0] // 2)
    return torch.relu(a) + torch.sigmoid(b)


def test_split_at_split_tensor_keeps_getitems_with_their_producer() -> None:
    x = torch.randn(4, 3)
    gm = make_fx(_split_model)(x)
    split_gm, items = split_graph(gm, ["aten::split.Tensor"])
    assert len(items) == 2
    assert [i.is_splitting_graph for i in items] == [True, False]
    for item in items:
        for node in item.graph.graph.nodes:
            if node.op == "call_function" and node.target == operator.getitem:
                assert node.args[0].op != "placeholder"
    torch.testing.assert_close(split_gm(x), gm(x))


def test_split_at_two_ops_gives_four_items() -> None:
    gm = make_fx(_split_model)(torch.randn(4, 3))
    _, items = split_graph(gm, ["aten::split.Tensor", "aten::sigmoid"])
    assert len(items) == 4
    assert [i.graph_id for i in items] == [1, 2, 3, 4]  # starts with a split op: no submod_0


def test_n_attention_calls_give_2n_plus_1_pieces() -> None:
    def three(x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            out = torch.empty_like(x)
            torch.ops.silly.attention(x + 1, x, x, out)
            x = out * 2
        return x

    gm = make_fx(three)(torch.zeros(2))
    _, items = split_graph(gm, ["silly::attention"])
    assert len(items) == 7
    assert sum(not i.is_splitting_graph for i in items) == 4
