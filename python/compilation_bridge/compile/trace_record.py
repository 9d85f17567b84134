"""What the backend learns from Dynamo's one trace that a bundle needs to replay it without Dynamo.

Dynamo's generated code fills the graph's inputs from the forward's arguments and the module's
attributes, calls the graph, and builds the forward's result from the graph's outputs. A `TraceRecord`
writes those two steps down as plain JSON: where each graph input comes from (["local", name],
["attr", base, member], ["item", base, key], ["size", base, dim]), how the result is made ("single" or
"tuple"), and the dtype, rank and device of each tensor argument. What cannot be written down is kept
as `error`, the reason no bundle can be made.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.fx as fx


class NotReplayable(Exception):
    """Dynamo's code does something a bundle cannot describe; the message says what."""


@dataclasses.dataclass(frozen=True)
class TraceRecord:
    inputs: list[Any] | None = None  # where each input of Dynamo's graph comes from, in placeholder order
    input_meta: list[list[Any]] | None = None
    output: str | None = None  # how the forward's result is made from the graph's outputs
    error: str | None = None

    @classmethod
    def of_graph(cls, graph: fx.GraphModule) -> TraceRecord:
        """What Dynamo's graph says about its inputs (all a backend sees when Dynamo calls it)."""
        try:
            return cls(inputs=describe_inputs(graph))
        except NotReplayable as e:
            return cls(error=str(e))

    def with_result(self, example_args: tuple[Any, ...], forward_out: Any, graph_out: Any) -> TraceRecord:
        """This record completed once the traced forward has returned (Dynamo's epilogue has run)."""
        meta = input_meta(example_args)
        try:
            return dataclasses.replace(self, input_meta=meta, output=output_structure(forward_out, graph_out))
        except NotReplayable as e:
            return dataclasses.replace(self, input_meta=meta, error=self.error or str(e))

    def check_complete(self) -> None:
        """Raise `NotReplayable` unless the record says everything a bundle needs."""
        if self.error is not None:
            raise NotReplayable(self.error)
        if self.inputs is None or self.output is None:
            raise NotReplayable("the trace recorded no input sources or output structure")


def input_meta(args: tuple[Any, ...]) -> list[list[Any]]:
    """What a caller's arguments must look like: dtype, rank and device of each tensor."""
    return [[str(a.dtype), a.dim(), a.device.type] for a in args if isinstance(a, torch.Tensor)]


def _describe_source(source: Any) -> list[Any]:
    """A Dynamo source as plain JSON (["local", name], ["attr", base, member], ...)."""
    from torch._dynamo import source as s

    if isinstance(source, s.NNModuleSource):
        return _describe_source(source.base)  # marks how Dynamo treats the module, names the same object
    if isinstance(source, s.LocalSource):
        return ["local", source.local_name]
    if isinstance(source, s.AttrSource):
        return ["attr", _describe_source(source.base), source.member]
    if isinstance(source, (s.DictGetItemSource, s.GetItemSource)) and isinstance(source.index, (str, int)):
        return ["item", _describe_source(source.base), source.index]
    if isinstance(source, s.TensorPropertySource) and source.prop == s.TensorProperty.SIZE:
        return ["size", _describe_source(source.base), source.idx]
    raise NotReplayable(f"graph input from a {type(source).__name__} ({source.name}) cannot be replayed")


def describe_inputs(graph: fx.GraphModule) -> list[Any]:
    """Where each input of Dynamo's graph comes from, in placeholder order."""
    described = []
    for node in graph.graph.find_nodes(op="placeholder"):
        grapharg = node.meta.get("grapharg")
        if grapharg is None or grapharg.source is None:
            raise NotReplayable(f"graph input {node.name} has no source")
        described.append(_describe_source(grapharg.source))
    return described


def output_structure(forward_out: Any, graph_out: Any) -> str:
    """How the forward's return value is made from the graph's outputs (Dynamo's epilogue)."""
    if not isinstance(graph_out, (tuple, list)):
        raise NotReplayable("the graph did not return a tuple")
    if isinstance(forward_out, torch.Tensor) and len(graph_out) == 1 and graph_out[0] is forward_out:
        return "single"
    same = type(forward_out) is tuple and len(forward_out) == len(graph_out)
    if same and all(a is b for a, b in zip(forward_out, graph_out, strict=True)):
        return "tuple"
    raise NotReplayable("the forward's return value is not the graph's output as it is")
