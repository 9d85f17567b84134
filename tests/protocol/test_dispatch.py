"""Dispatch of every SnakeBridge tool and call type, in-process, with the real surface."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from tests.workers import construct, payload

from compilation_bridge.protocol.dispatch import Dispatcher


def call(dispatcher: Dispatcher, session: str = "S", tool: str = "snakebridge.call", **fields: Any) -> Any:
    reply = dispatcher.execute(tool, payload(session, **fields), "worker-session")
    assert reply.success, reply.error
    return reply.result


def error(dispatcher: Dispatcher, session: str = "S", tool: str = "snakebridge.call", **fields: Any) -> dict:
    reply = dispatcher.execute(tool, payload(session, **fields), "worker-session")
    assert not reply.success, reply.result
    assert set(reply.error) == {"type", "message", "stacktrace", "traceback", "context"}
    return reply.error


def instance(ref: dict[str, Any]) -> dict[str, Any]:
    return {k: ref[k] for k in ("__type__", "__schema__", "id", "session_id", "python_module", "library")}


def test_construct_returns_the_reference_ref_shape(dispatcher: Dispatcher) -> None:
    ref = construct(dispatcher, "S", None, None, None, cache_dir="/var/cache/vc")
    assert ref == {
        "__type__": "ref",
        "__schema__": 1,
        "id": ref["id"],
        "session_id": "S",
        "python_module": "vllm.config",
        "library": "vllm",
        "type_name": "CompilationConfig",
        "__type_name__": "CompilationConfig",
    }
    assert len(ref["id"]) == 32


def test_constructor_is_exactly_cls_args_kwargs(dispatcher: Dispatcher) -> None:
    err = error(
        dispatcher,
        call_type="class",
        function="__init__",
        args=[None, None, None],
        kwargs={"mode": 3},
        **{"class": "CompilationConfig"},
    )
    assert err["type"] == "ValidationError" and "Got multiple values for argument" in err["message"]
    assert err["context"]["call_type"] == "class" and err["context"]["function"] == "__init__"
    positional = construct(dispatcher, "S", None, 3, None)
    assert (
        call(dispatcher, call_type="get_attr", attr="mode", function="mode", instance=instance(positional))
        == 3
    )
    keyword_only = construct(dispatcher, "S", mode=2)
    assert (
        call(dispatcher, call_type="get_attr", attr="mode", function="mode", instance=instance(keyword_only))
        == 2
    )


def test_ints_stay_ints_and_none_is_null(dispatcher: Dispatcher) -> None:
    ref = instance(construct(dispatcher, "S", None, 3, None))
    mode = call(dispatcher, call_type="get_attr", attr="mode", function="mode", instance=ref)
    assert mode == 3 and type(mode) is int
    level = call(dispatcher, call_type="get_attr", attr="level", function="level", instance=ref)
    assert level is None


def test_methods_attributes_and_refs(dispatcher: Dispatcher) -> None:
    ref = instance(construct(dispatcher))
    digest = call(dispatcher, call_type="method", function="compute_hash", instance=ref)
    assert isinstance(digest, str) and len(digest) == 64
    assert call(dispatcher, call_type="method", function="splitting_ops_contain_attention", instance=ref) in (
        True,
        False,
    )
    pass_config = call(
        dispatcher, call_type="get_attr", attr="pass_config", function="pass_config", instance=ref
    )
    assert pass_config["__type__"] == "ref" and pass_config["type_name"] == "PassConfig"
    text = call(dispatcher, call_type="method", function="__repr__", instance=ref)
    assert text.startswith("{'level': None")
    text = call(dispatcher, call_type="method", function="__str__", instance=instance(pass_config))
    assert text.startswith("PassConfig(")


def test_set_attr_writes_one_instance(dispatcher: Dispatcher) -> None:
    first, second = instance(construct(dispatcher)), instance(construct(dispatcher))
    assert call(
        dispatcher, call_type="set_attr", attr="cache_dir", function="cache_dir", args=["/x"], instance=first
    )
    assert (
        call(dispatcher, call_type="get_attr", attr="cache_dir", function="cache_dir", instance=first) == "/x"
    )
    assert (
        call(dispatcher, call_type="get_attr", attr="cache_dir", function="cache_dir", instance=second) == ""
    )


def test_set_attr_refuses_classes_methods_and_huge_sizes(dispatcher: Dispatcher) -> None:
    cls = call(dispatcher, call_type="module_attr", attr="CompilationConfig", function="CompilationConfig")
    err = error(dispatcher, call_type="set_attr", attr="backend", args=["x"], instance=instance(cls))
    assert err["type"] == "PermissionError" and "cannot be set" in err["message"]
    ref = instance(construct(dispatcher))
    err = error(dispatcher, call_type="set_attr", attr="compute_hash", args=[1], instance=ref)
    assert err["type"] == "PermissionError"
    err = error(
        dispatcher, call_type="set_attr", attr="max_cudagraph_capture_size", args=[2**30], instance=ref
    )
    assert err["type"] == "ValueError" and "max_cudagraph_capture_size" in err["message"]
    err = error(dispatcher, call_type="set_attr", attr="compile_sizes", args=[[1, 2**25]], instance=ref)
    assert err["type"] == "ValueError"
    # Runtime state is the worker's: traced_files names files that compilation reads.
    err = error(dispatcher, call_type="set_attr", attr="traced_files", args=[["/etc/shadow"]], instance=ref)
    assert err["type"] == "PermissionError" and "not a field that can be set" in err["message"]


def test_exposure_rules(dispatcher: Dispatcher) -> None:
    ref = instance(construct(dispatcher))
    missing = error(dispatcher, call_type="get_attr", attr="no_such", function="no_such", instance=ref)
    assert missing["type"] == "AttributeError"
    assert missing["message"] == "'CompilationConfig' object has no attribute 'no_such'"
    for hidden in ("__class__", "__dict__", "__init__", "_resolve_inductor_passes"):
        err = error(dispatcher, call_type="get_attr", attr=hidden, function=hidden, instance=ref)
        assert err["type"] == "PermissionError", hidden
        assert "not exposed" in err["message"]
    err = error(dispatcher, call_type="method", function="__reduce_ex__", args=[2], instance=ref)
    assert err["type"] == "PermissionError"
    attention = call(
        dispatcher, call_type="get_attr", attr="_attention_ops", function="_attention_ops", instance=ref
    )
    assert "vllm::unified_attention" in attention


def test_unknown_modules_import_nothing(dispatcher: Dispatcher) -> None:
    before = set(sys.modules)
    for module in ("os", "subprocess", "vllm.engine", "vllm.lora", "compilation_bridge.settings"):
        err = error(dispatcher, python_module=module, function="system", args=["true"])
        assert err["type"] == "ImportError" and "not exposed" in err["message"]
        err = error(dispatcher, call_type="dynamic", module_path=module, function="getcwd")
        assert err["type"] == "ImportError"
    # vLLM's top level is served for SamplingParams; its other names are refused, and import nothing either
    err = error(dispatcher, python_module="vllm", function="system", args=["true"])
    assert err["type"] == "AttributeError" and "serves vLLM's configuration" in err["message"]
    assert not {m for m in set(sys.modules) - before if m.split(".")[0] in ("subprocess", "vllm")}
    err = error(dispatcher, call_type="module_attr", attr="ConfigType", function="ConfigType")
    assert err["type"] == "PermissionError"
    err = error(dispatcher, call_type="module_attr", attr="Nope", function="Nope")
    assert err == {**err, "type": "AttributeError", "message": "module 'vllm.config' has no attribute 'Nope'"}


def test_module_attr_and_enum_refs(dispatcher: Dispatcher) -> None:
    enum_cls = call(dispatcher, call_type="module_attr", attr="CUDAGraphMode", function="CUDAGraphMode")
    member = call(dispatcher, call_type="get_attr", attr="FULL_AND_PIECEWISE", instance=instance(enum_cls))
    assert member["type_name"] == "CUDAGraphMode"
    assert (
        call(dispatcher, call_type="get_attr", attr="name", instance=instance(member)) == "FULL_AND_PIECEWISE"
    )
    value = call(dispatcher, call_type="get_attr", attr="value", instance=instance(member))
    assert value == {"__type__": "tuple", "__schema__": 1, "elements": [2, 1]}
    mode = call(dispatcher, call_type="module_attr", attr="CompilationMode", function="CompilationMode")
    assert call(dispatcher, call_type="get_attr", attr="VLLM_COMPILE", instance=instance(mode)) == 3


def test_function_call_type_constructs_through_the_module(dispatcher: Dispatcher) -> None:
    ref = call(dispatcher, function="PassConfig", kwargs={"fuse_norm_quant": False})
    assert ref["type_name"] == "PassConfig"
    dynamic = call(
        dispatcher, call_type="dynamic", module_path="vllm.config.compilation", function="Range", args=[1, 8]
    )
    assert dynamic["type_name"] == "Range"


def test_iteration_protocol_and_stream_next(dispatcher: Dispatcher) -> None:
    ref = instance(construct(dispatcher, "S", None, None, None, compile_ranges_split_points=[8]))
    ranges = call(dispatcher, call_type="method", function="get_compile_ranges", instance=ref)
    assert isinstance(ranges, list)
    rng = call(dispatcher, function="Range", python_module="vllm.config.compilation", args=[1, 4])
    assert (
        call(dispatcher, call_type="method", function="__contains__", args=[2], instance=instance(rng))
        is True
    )
    modes = call(dispatcher, call_type="module_attr", attr="CUDAGraphMode", function="CUDAGraphMode")
    it = call(dispatcher, call_type="method", function="__iter__", instance=instance(modes))
    assert it["__type__"] == "stream_ref" and it["stream_type"] in ("generator", "iterator")
    stream = instance({**it, "__type__": "ref"})
    names = []
    for _ in range(10):
        item = call(dispatcher, call_type="stream_next", stream_ref=stream)
        if item == {"__type__": "stop_iteration", "__schema__": 1}:
            break
        names.append(call(dispatcher, call_type="get_attr", attr="name", instance=instance(item)))
    assert names == ["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
    err = error(dispatcher, call_type="method", function="__next__", instance=stream)
    assert err["type"] == "StopIteration"


def test_sessions_are_isolated(dispatcher: Dispatcher) -> None:
    ref = construct(dispatcher, "A")
    err = error(dispatcher, "B", call_type="method", function="compute_hash", instance=instance(ref))
    assert (err["type"], err["message"]) == ("ValueError", "SnakeBridge reference session mismatch")
    forged = {**instance(ref), "session_id": "B"}
    err = error(dispatcher, "B", call_type="method", function="compute_hash", instance=forged)
    assert (err["type"], err["message"]) == ("KeyError", f"'Unknown SnakeBridge reference: {ref['id']}'")


def test_release_ref_and_session(dispatcher: Dispatcher) -> None:
    first, second = construct(dispatcher, "R"), construct(dispatcher, "R")
    release = {"protocol_version": 1, "min_supported_version": 1, "session_id": "R"}
    reply = dispatcher.execute("snakebridge.release_ref", {**release, "ref": instance(first)}, "w")
    assert reply.success and reply.result is True
    reply = dispatcher.execute("snakebridge.release_ref", {**release, "ref": instance(first)}, "w")
    assert reply.success and reply.result is False
    err = error(dispatcher, "R", call_type="method", function="compute_hash", instance=instance(first))
    assert err["type"] == "KeyError"
    reply = dispatcher.execute("snakebridge.release_session", release, "w")
    assert reply.success and reply.result == 1
    assert dispatcher.refs.count("R") == 0 and second


def test_payload_session_falls_back_to_request_session(dispatcher: Dispatcher) -> None:
    body = payload("S", call_type="class", function="__init__", **{"class": "CompilationConfig"})
    del body["session_id"]
    reply = dispatcher.execute("snakebridge.call", body, "worker-session")
    assert reply.success and reply.result["session_id"] == "worker-session"


@pytest.mark.parametrize(
    ("tool", "fields", "kind", "text"),
    [
        ("snakebridge.nope", {}, "AttributeError", "Tool 'snakebridge.nope' not supported"),
        ("snakebridge.call", {"call_type": "teleport"}, "ValueError", "Unsupported call_type"),
        (
            "snakebridge.call",
            {"protocol_version": 0},
            "SnakeBridgeProtocolError",
            "protocol version mismatch",
        ),
        ("snakebridge.call", {"min_supported_version": 2}, "SnakeBridgeProtocolError", "version mismatch"),
        (
            "snakebridge.call",
            {"python_module": None, "function": "f"},
            "ValueError",
            "requires python_module",
        ),
        ("snakebridge.call", {"args": "x", "function": "PassConfig"}, "TypeError", "args must be a list"),
        (
            "snakebridge.call",
            {"kwargs": [1], "function": "PassConfig"},
            "TypeError",
            "kwargs must be an object",
        ),
        ("snakebridge.call", {"call_type": "method", "function": "f"}, "ValueError", "requires instance"),
        (
            "snakebridge.call",
            {"call_type": "method", "function": "f", "instance": 3},
            "ValueError",
            "Invalid",
        ),
        (
            "snakebridge.call",
            {"call_type": "helper", "helper": "g.x"},
            "SnakeBridgeHelperNotFoundError",
            "'g.x'",
        ),
        ("snakebridge.release_ref", {}, "ValueError", "requires ref"),
        ("snakebridge.call", {"session_id": 5}, "TypeError", "session_id must be a string"),
    ],
)
def test_bad_input_is_an_error_payload(
    dispatcher: Dispatcher, tool: str, fields: dict, kind: str, text: str
) -> None:
    err = error(dispatcher, tool=tool, **fields)
    assert err["type"] == kind and text in err["message"], err
    assert err["context"]["tool_name"] == tool


def test_wrong_arity_is_pythons_type_error(dispatcher: Dispatcher) -> None:
    ref = instance(construct(dispatcher))
    err = error(dispatcher, call_type="method", function="compute_hash", args=[1, 2], instance=ref)
    assert err["type"] == "TypeError" and "positional argument" in err["message"]
    err = error(dispatcher, call_type="method", function="is_custom_op_enabled", instance=ref)
    assert err["type"] == "TypeError" and "missing 1 required positional argument" in err["message"]


def test_non_dict_payload(dispatcher: Dispatcher) -> None:
    reply = dispatcher.execute("snakebridge.call", [1, 2], "w")
    assert not reply.success and reply.error["type"] == "TypeError"


def test_legacy_protocol_switch(dispatcher: Dispatcher, monkeypatch: pytest.MonkeyPatch) -> None:
    body = payload("S", function="PassConfig")
    del body["protocol_version"], body["min_supported_version"]
    assert not dispatcher.execute("snakebridge.call", body, "w").success
    monkeypatch.setenv("SNAKEBRIDGE_ALLOW_LEGACY_PROTOCOL", "1")
    assert dispatcher.execute("snakebridge.call", body, "w").success


def test_stream_of_a_plain_function(dispatcher: Dispatcher) -> None:
    items = list(
        dispatcher.stream(
            "snakebridge.stream",
            payload("S", function="Range", args=[1, 2], python_module="vllm.config.compilation"),
            "w",
        )
    )
    assert len(items) == 1 and items[0]["type_name"] == "Range"


def test_surface_warm_up_runs_only_when_asked() -> None:
    from compilation_bridge.surface import ExposedModule, Surface

    calls: list[str] = []
    surface = Surface([ExposedModule("m", lambda: {"x": 1}, warm=lambda: calls.append("warm"))])
    surface.load_module("m")
    assert calls == [] and surface.module_attr("m", "x") == 1
    surface.load_module("m", warm=True)
    assert calls == ["warm"]
