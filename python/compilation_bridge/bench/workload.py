"""The standard workload every RPC benchmark sends: construct -> get_attr -> compute_hash -> release_ref.

The payloads are exactly those SnakeBridge 0.16 sends for `CompilationConfig.new/4`, `mode/1`,
`compute_hash/2` and the ref's release (docs/wire.md#tools), so every transport is timed on the same calls.
"""

from __future__ import annotations

from typing import Any

from compilation_bridge.testing.session import snakebridge_payload, wire_ref

STEPS = ("construct", "get_attr", "compute_hash", "release_ref")
Call = tuple[str, dict[str, Any]]  # (tool, payload)


def construct(session_id: str) -> Call:
    """The first step: a new CompilationConfig (its reply is the ref the other steps use)."""
    payload = {
        **snakebridge_payload(session_id),
        "call_type": "class",
        "class": "CompilationConfig",
        "function": "__init__",
        "args": [None, None, None],
        "kwargs": {"cache_dir": "/tmp/bench"},
    }
    return "snakebridge.call", payload


def on_ref(session_id: str, ref: dict[str, Any]) -> list[Call]:
    """The three steps on the constructed ref, as SnakeBridge sends a ref back (no type_name)."""
    base = snakebridge_payload(session_id)
    instance = wire_ref(ref)
    return [
        (
            "snakebridge.call",
            {**base, "call_type": "get_attr", "function": "mode", "attr": "mode", "instance": instance},
        ),
        (
            "snakebridge.call",
            {**base, "call_type": "method", "function": "compute_hash", "instance": instance},
        ),
        (
            "snakebridge.release_ref",
            {
                "protocol_version": 1,
                "min_supported_version": 1,
                "ref": instance,
                "session_id": ref["session_id"],
            },
        ),
    ]
