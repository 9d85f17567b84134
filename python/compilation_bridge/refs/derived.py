"""Fields the config model computes from its other fields, which the ref state does not store.

`CompilationConfig.bs_to_padded_graph_size` has one entry per batch size up to
`max_cudagraph_capture_size`: a request of a few bytes (a large maximum) would otherwise make a state of
megabytes in the store. It is recomputed by the config's own method, on a scratch copy.
"""

from __future__ import annotations

import copy
from typing import Any

from compilation_bridge.refs.state import register_derived
from compilation_bridge.vllm_config import CompilationConfig


def padded_graph_sizes(config: CompilationConfig) -> Any:
    scratch = copy.copy(config)
    scratch.compute_bs_to_padded_graph_size()
    return scratch.bs_to_padded_graph_size


register_derived(CompilationConfig, "bs_to_padded_graph_size", padded_graph_sizes)
