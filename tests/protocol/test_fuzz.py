"""Random payloads through the real server: every reply is well-formed and the worker keeps serving.

Hypothesis builds SnakeBridge-shaped payloads with wrong types, missing keys, unknown call types,
random refs and raw non-JSON parameter bytes; after each, a control session's ref must still answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compilation_bridge.testing.session import STRING_VALUE_URL, SnakeBridgeSession
from compilation_bridge.testing.worker_process import WorkerProcess
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb

pytestmark = pytest.mark.timeout(300)

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
tags = st.sampled_from(
    [
        "ref",
        "stream_ref",
        "tuple",
        "set",
        "bytes",
        "dict",
        "atom",
        "special_float",
        "datetime",
        "callback",
        "?",
    ]
)
tagged = st.fixed_dictionaries(
    {"__type__": tags},
    optional={
        "id": st.one_of(st.text(max_size=32), st.integers()),
        "session_id": st.text(max_size=8),
        "elements": json_value,
        "value": json_value,
        "data": st.text(max_size=12),
        "pairs": json_value,
    },
)
anything = st.one_of(json_value, tagged, st.lists(tagged, max_size=3))
names = st.sampled_from(
    [
        "CompilationConfig",
        "compute_hash",
        "mode",
        "__class__",
        "__init__",
        "_attention_ops",
        "system",
        "",
        "x",
    ]
)
modules = st.sampled_from(["vllm.config", "vllm.config.compilation", "os", "vllm", "", "compilation_bridge"])
payloads = st.fixed_dictionaries(
    {},
    optional={
        "protocol_version": st.one_of(st.just(1), json_leaf),
        "min_supported_version": st.one_of(st.just(1), json_leaf),
        "call_type": st.one_of(
            st.sampled_from(
                ["class", "method", "get_attr", "set_attr", "module_attr", "dynamic", "function"]
            ),
            st.sampled_from(["stream_next", "helper", "bogus"]),
            json_leaf,
        ),
        "python_module": st.one_of(modules, json_leaf),
        "module_path": modules,
        "class": st.one_of(names, json_leaf),
        "function": st.one_of(names, json_leaf),
        "attr": st.one_of(names, json_leaf),
        "args": anything,
        "kwargs": st.one_of(st.dictionaries(st.text(max_size=12), anything, max_size=3), anything),
        "instance": anything,
        "stream_ref": anything,
        "ref": anything,
        "session_id": st.one_of(st.just("fuzz"), json_leaf),
        "library": st.one_of(st.just("vllm"), json_leaf),
    },
)
tools = st.sampled_from(
    ["snakebridge.call", "snakebridge.call", "snakebridge.release_ref", "snakebridge.release_session", "x"]
)


@pytest.fixture(scope="module")
def fuzz_worker() -> Iterator[tuple[WorkerProcess, SnakeBridgeSession, dict[str, Any]]]:
    worker = WorkerProcess.spawn()
    control = SnakeBridgeSession(worker.stub, worker.session_id, session_id="control")
    ref = control.call_class("vllm.config", "CompilationConfig", [None, None, None])
    yield worker, control, ref
    worker.terminate()


def check_reply(response: pb.ExecuteToolResponse) -> None:
    if response.success:
        json.loads(response.result.value)
        return
    error = json.loads(response.error_message)
    assert isinstance(error["type"], str) and isinstance(error["message"], str)
    assert isinstance(error["stacktrace"], list) and isinstance(error["context"], dict)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tool=tools,
    payload=payloads,
    raw=st.dictionaries(st.sampled_from(["args", "kwargs", "x"]), st.binary(max_size=16), max_size=2),
)
def test_random_payloads(fuzz_worker: Any, tool: str, payload: dict[str, Any], raw: dict[str, bytes]) -> None:
    worker, control, ref = fuzz_worker
    request = pb.ExecuteToolRequest(
        session_id="fuzz-worker", tool_name=tool, metadata={"correlation_id": "fuzz"}
    )
    for key, value in payload.items():
        request.parameters[key].type_url = STRING_VALUE_URL
        request.parameters[key].value = json.dumps(value).encode()
    for key, value in raw.items():
        request.parameters[key].value = value
    check_reply(worker.stub.ExecuteTool(request, timeout=30))
    assert worker.process.poll() is None
    assert len(control.call_method(ref, "compute_hash")) == 64
