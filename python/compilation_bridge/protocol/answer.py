"""One rule for every reply a transport sends: a result travels when it encodes within the size cap;
when it cannot be encoded, or is larger than the cap, the caller gets an in-band error instead (never a
transport failure, never a truncated result). Both transports encode through `encode_answer`, each
with its own encoding (JSON for gRPC, msgpack frames for the port).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compilation_bridge.protocol.dispatch import Reply

Encode = Callable[[Any], bytes]


@dataclass(frozen=True)
class Answer:
    success: bool
    data: bytes  # the encoded result, or the encoded error payload
    result: Any = None  # the result that was encoded (for its kind), None on an error


def encode_answer(
    reply: Reply,
    *,
    encode_result: Encode,
    encode_error: Encode,
    max_bytes: int,
    explain: Callable[[BaseException], Reply],
) -> Answer:
    """`reply` encoded: its result when it encodes within `max_bytes`, else the error that `explain`
    gives for why not (the transport's `Dispatcher.error_reply`, which never raises)."""
    if reply.success:
        try:
            data = encode_result(reply.result)
        except Exception as exc:  # e.g. an int beyond 64 bits for msgpack, or nesting beyond its limit
            reply = explain(exc)
        else:
            if len(data) <= max_bytes:
                return Answer(True, data, reply.result)
            reply = explain(ValueError(f"result too large: {len(data)} bytes (limit {max_bytes})"))
    return Answer(False, encode_error(reply.error))
