"""Splitting a Dynamo FX graph at splitting ops (vLLM's `split_graph` and `should_split`).

See docs/design.md#real-compilation.
"""

from __future__ import annotations

import dataclasses
import operator

import torch
import torch.fx as fx
from torch.fx.passes.split_module import split_module


@dataclasses.dataclass
class SplitItem:
    submod_name: str
    graph_id: int
    is_splitting_graph: bool
    graph: fx.GraphModule


def should_split(node: fx.Node, splitting_ops: list[str]) -> bool:
    """True for a call of an op named in `splitting_ops` ("ns::name" or "ns::name.overload")."""
    if node.op != "call_function":
        return False
    target = node.target
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name in splitting_ops
    if isinstance(target, torch._ops.OpOverload):
        packet_name = target.name()
        return f"{packet_name}.{target._overloadname}" in splitting_ops or packet_name in splitting_ops
    return False


def split_graph(graph: fx.GraphModule, splitting_ops: list[str]) -> tuple[fx.GraphModule, list[SplitItem]]:
    """Split `graph` so that every splitting op sits alone in its own submodule, in original order.

    Ids: nodes before the first splitting op get 0, the op gets 1, the nodes after it 2, and so on;
    ids without nodes make no submodule (a graph starting with a splitting op has no `submod_0`).
    """
    subgraph_id = 0
    node_to_subgraph_id: dict[fx.Node, int] = {}
    split_op_graphs: list[int] = []
    for node in graph.graph.nodes:
        if node.op in ("output", "placeholder"):
            continue
        # A getitem on a tuple produced in this graph stays with its producer, so no submodule takes a
        # whole tuple as input (standalone_compile and AOTAutograd refuse that).
        if node.op == "call_function" and node.target == operator.getitem:
            producer = node.args[0]
            assert isinstance(producer, fx.Node)
            if producer.op != "placeholder":
                node_to_subgraph_id[node] = node_to_subgraph_id[producer]
                continue
        if should_split(node, splitting_ops):
            subgraph_id += 1
            node_to_subgraph_id[node] = subgraph_id
            split_op_graphs.append(subgraph_id)
            subgraph_id += 1
        else:
            node_to_subgraph_id[node] = subgraph_id

    # keep_original_order matters: reordering would change the meaning of graphs with mutations.
    split_gm = split_module(graph, None, lambda node: node_to_subgraph_id[node], keep_original_order=True)  # type: ignore[arg-type]  # torch's stub wants a root module; None is its documented default

    items = []
    for name, module in split_gm.named_children():
        graph_id = int(name.replace("submod_", ""))
        assert isinstance(module, fx.GraphModule)  # split_module makes every piece a GraphModule
        items.append(SplitItem(name, graph_id, graph_id in split_op_graphs, module))
    items.sort(key=lambda item: item.graph_id)
    return split_gm, items
