"""SnakeBridge 0.16's runtime for one session, over one worker's stub.

`SnakeBridgeSession` builds exactly the payloads SnakeBridge sends (docs/wire.md#tools) and decodes replies
as Elixir does; `snakebridge_payload` and `wire_ref` are the pieces a test needs to build its own.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc

STRING_VALUE_URL = "type.googleapis.com/google.protobuf.StringValue"


def wire_ref(ref: dict[str, Any]) -> dict[str, Any]:
    """A ref as SnakeBridge sends it back (`SnakeBridge.Ref.to_wire_format/1`: no type_name)."""
    keys = ("id", "session_id", "python_module", "library")
    return {"__type__": "ref", "__schema__": 1, **{k: ref[k] for k in keys if ref.get(k) is not None}}


class CallError(Exception):
    """A `success=false` reply; `.error` is the decoded error payload."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('type')}: {error.get('message')}")
        self.error = error


def snakebridge_payload(
    session_id: str, python_module: str = "vllm.config", library: str = "vllm", **fields: Any
) -> dict[str, Any]:
    """The fields SnakeBridge 0.16's runtime puts in every `snakebridge.call` payload, plus `fields`."""
    payload: dict[str, Any] = {
        "protocol_version": 1,
        "min_supported_version": 1,
        "library": library,
        "python_module": python_module,
        "args": [],
        "kwargs": {},
        "idempotent": False,
        "session_id": session_id,
    }
    payload.update(fields)
    return payload


class SnakeBridgeSession:
    """SnakeBridge.Runtime for one session, over one worker's stub."""

    def __init__(
        self,
        stub: pb_grpc.BridgeServiceStub,
        worker_session: str,
        session_id: str | None = None,
        library: str = "vllm",
        timeout_s: float = 598.8,
    ) -> None:
        self.stub = stub
        self.worker_session = worker_session
        self.session_id = session_id or f"auto_<0.{os.getpid() % 1000}.0>_{int(time.time() * 1000)}"
        self.library = library
        self.timeout_s = timeout_s

    # requests ---------------------------------------------------------------------------------
    def request(self, tool: str, payload: dict[str, Any]) -> pb.ExecuteToolRequest:
        return pb.ExecuteToolRequest(
            session_id=self.worker_session,
            tool_name=tool,
            parameters={
                key: {"type_url": STRING_VALUE_URL, "value": json.dumps(value).encode()}
                for key, value in payload.items()
            },
            metadata={"correlation_id": uuid.uuid4().hex},
        )

    def execute(self, tool: str, payload: dict[str, Any]) -> Any:
        response = self.stub.ExecuteTool(self.request(tool, payload), timeout=self.timeout_s)
        if not response.success:
            raise CallError(json.loads(response.error_message))
        return json.loads(response.result.value) if response.HasField("result") else None

    def stream(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        """`SnakeBridge.Runtime.stream`: every chunk, decoded like Snakepit's `build_payload`."""
        request = self.request("snakebridge.stream", payload)
        request.stream = True
        chunks = []
        for chunk in self.stub.ExecuteStreamingTool(request, timeout=self.timeout_s):
            data = json.loads(chunk.data) if chunk.data else {}
            item = data if isinstance(data, dict) else {"data": data}
            chunks.append({**item, "is_final": chunk.is_final})
        return chunks

    # payloads (SB runtime/payload.ex) -----------------------------------------------------------
    def base(
        self, python_module: str, function: str, args: list[Any], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        return snakebridge_payload(
            self.session_id, python_module, self.library, function=function, args=args, kwargs=kwargs
        )

    def for_ref(
        self, ref: dict[str, Any], function: str, args: list[Any], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        payload = self.base(ref.get("python_module") or ref["library"], function, args, kwargs)
        payload["library"] = ref.get("library", self.library)
        payload["session_id"] = ref.get("session_id", self.session_id)
        payload["instance"] = wire_ref(ref)
        return payload

    def call(self, module: str, function: str, args: list[Any] | None = None, **kwargs: Any) -> Any:
        return self.execute("snakebridge.call", self.base(module, function, args or [], kwargs))

    def call_class(self, module: str, cls: str, args: list[Any] | None = None, **kwargs: Any) -> Any:
        payload = self.base(module, "__init__", args or [], kwargs)
        payload.update(call_type="class", **{"class": cls})
        return self.execute("snakebridge.call", payload)

    def call_method(
        self, ref: dict[str, Any], method: str, args: list[Any] | None = None, **kwargs: Any
    ) -> Any:
        payload = self.for_ref(ref, method, args or [], kwargs)
        payload["call_type"] = "method"
        return self.execute("snakebridge.call", payload)

    def get_attr(self, ref: dict[str, Any], attr: str) -> Any:
        payload = self.for_ref(ref, attr, [], {})
        payload.update(call_type="get_attr", attr=attr)
        return self.execute("snakebridge.call", payload)

    def set_attr(self, ref: dict[str, Any], attr: str, value: Any) -> Any:
        payload = self.for_ref(ref, attr, [value], {})
        payload.update(call_type="set_attr", attr=attr)
        return self.execute("snakebridge.call", payload)

    def module_attr(self, module: str, attr: str) -> Any:
        payload = self.base(module, attr, [], {})
        payload.update(call_type="module_attr", attr=attr)
        return self.execute("snakebridge.call", payload)

    def release_ref(self, ref: dict[str, Any]) -> Any:
        payload = {"protocol_version": 1, "min_supported_version": 1, "ref": wire_ref(ref)}
        payload["session_id"] = ref.get("session_id", self.session_id)
        return self.execute("snakebridge.release_ref", payload)

    def release_session(self) -> Any:
        payload = {"protocol_version": 1, "min_supported_version": 1, "session_id": self.session_id}
        return self.execute("snakebridge.release_session", payload)
