"""Tool dispatch: one decoded SnakeBridge payload plus the caller's session id in, a `Reply` out.

Transport-agnostic: the gRPC servicer and the Erlang-port loop both call `Dispatcher.execute` /
`Dispatcher.stream`. Failures never escape as exceptions from `execute`: they become error payloads.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from compilation_bridge.protocol import codec, streams
from compilation_bridge.protocol.calls import HANDLERS, Call
from compilation_bridge.protocol.codec import ref_identity
from compilation_bridge.protocol.errors import (
    SnakeBridgeProtocolError,
    error_context,
    error_payload,
    fallback_payload,
)
from compilation_bridge.protocol.sessionids import check_session_id
from compilation_bridge.refs.compiled import recording
from compilation_bridge.refs.local import LocalRefTable
from compilation_bridge.refs.table import Origin, RefTable
from compilation_bridge.settings import legacy_protocol_allowed
from compilation_bridge.surface import Surface, default_surface

log = logging.getLogger("compilation_bridge.protocol")

PROTOCOL_VERSION = 1
MIN_SUPPORTED_VERSION = 1
CALL_TOOL = "snakebridge.call"
STREAM_TOOL = "snakebridge.stream"
RELEASE_REF_TOOL = "snakebridge.release_ref"
RELEASE_SESSION_TOOL = "snakebridge.release_session"
HELPERS_TOOL = "snakebridge.helpers"
STREAM_CALL_TYPES = {None: "function", "function": "function", "dynamic_stream": "dynamic"}
# Calls that cannot change the refs they name: their refs are not encoded again afterwards (with a shared
# ref table that is the per-call cost of a change check). Everything else may change an argument or the
# instance (set_attr, post_init_cudagraph_sizes, a constructor's __post_init__ writing into a config).
READ_ONLY_CALLS = frozenset({"get_attr", "module_attr", "helper"})
READ_ONLY_METHODS = frozenset({"compute_hash", "__repr__", "__str__", "__len__", "__contains__"})


@dataclass(frozen=True)
class Reply:
    success: bool
    result: Any = None  # codec-encoded, JSON-ready
    error: dict[str, Any] | None = None


def check_protocol(payload: dict[str, Any]) -> None:
    version = payload.get("protocol_version")
    minimum = payload.get("min_supported_version")
    if type(version) is int and type(minimum) is int and version >= 1 and minimum <= PROTOCOL_VERSION:
        return  # the common case, checked first because every call pays for it
    if version is None and minimum is None and legacy_protocol_allowed():
        return
    version = 0 if version is None else version
    minimum = 0 if minimum is None else minimum
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (version, minimum))
    if numeric and version >= MIN_SUPPORTED_VERSION and minimum <= PROTOCOL_VERSION:
        return
    raise SnakeBridgeProtocolError(
        "SnakeBridge protocol version mismatch "
        f"(caller_protocol_version={version}, caller_min_supported_version={minimum}, "
        f"adapter_protocol_version={PROTOCOL_VERSION}, "
        f"adapter_min_supported_version={MIN_SUPPORTED_VERSION}). "
        "Ensure Elixir and Python SnakeBridge versions are compatible.",
        details={"caller_protocol_version": version, "caller_min_supported_version": minimum},
    )


def session_of(payload: dict[str, Any], request_session_id: str) -> str:
    """Refs are scoped by the payload's session id (SnakeBridge's), else the request's (Snakepit's)."""
    session = payload.get("session_id")
    if session is None or session == "":
        return request_session_id
    if not isinstance(session, str):
        raise TypeError(f"session_id must be a string, not {type(session).__name__}")
    return check_session_id(session)


class Dispatcher:
    def __init__(self, surface: Surface | None = None, refs: RefTable | None = None) -> None:
        # compile_model records what each model was built from, for the ref store (refs/compiled.py)
        self.surface = surface or default_surface(wrap_compile=recording)
        self.refs: RefTable = refs or LocalRefTable()

    # ---------------------------------------------------------------------------------- entry points
    def execute(self, tool_name: str, payload: Any, request_session_id: str) -> Reply:
        try:
            return Reply(True, self._execute(tool_name, payload, request_session_id))
        except Exception as exc:
            return self.error_reply(exc, tool_name, payload, request_session_id)

    def error_reply(self, exc: BaseException, tool_name: str, payload: Any, request_session_id: str) -> Reply:
        """The in-band reply for `exc`; never raises, whatever `exc` or the payload hold."""
        try:
            error = error_payload(exc, error_context(tool_name, request_session_id, payload))
        except Exception:
            error = fallback_payload(exc)
        if log.isEnabledFor(logging.INFO):
            # From the payload, not `exc`: its text is already bounded and known to be printable.
            log.info(
                "%s failed: %s: %s", error["context"].get("tool_name", "?"), error["type"], error["message"]
            )
        return Reply(False, error=error)

    def release_session_soon(self, request_session_id: str) -> int:
        """CleanupSession: the session's refs go without waiting for the store (never raises)."""
        if not request_session_id:
            return 0
        try:
            return self.refs.release_session_soon(check_session_id(request_session_id))
        except Exception as exc:  # an id we refuse, or a table that could not queue the release
            log.warning("CleanupSession: %s: %s", type(exc).__name__, exc)
            return 0

    def stream(self, tool_name: str, payload: Any, request_session_id: str) -> Iterator[Any]:
        """Encoded items for ExecuteStreamingTool. Raises on bad input (before the first item)."""
        if tool_name != STREAM_TOOL:
            yield self._execute(tool_name, payload, request_session_id)
            return
        check_session_id(request_session_id)
        payload = _payload_dict(payload)
        check_protocol(payload)
        session = session_of(payload, request_session_id)
        call_type = payload.get("call_type")
        if call_type not in STREAM_CALL_TYPES:
            raise ValueError(f"Unsupported call_type for {STREAM_TOOL}: {call_type!r}")
        call = self._decode_call(STREAM_CALL_TYPES[call_type], payload, session)
        try:
            yield from self._stream_call(call, session, payload)
        finally:
            self.refs.sync(session, call.used_refs)

    def _stream_call(self, call: Call, session: str, payload: dict[str, Any]) -> Iterator[Any]:
        module = (
            call.text("module_path", required="snakebridge.stream requires module_path")
            if (call.call_type == "dynamic")
            else call.text("python_module", "module", required="snakebridge.stream requires python_module")
        )
        function = call.text("function", required="snakebridge.stream requires function")
        target = self.surface.module_attr(module, function)
        hook = self.surface.progress_hook(module)
        encode = self._encoder(session, payload)
        if hook is None:
            for item in streams.iterate_result(target(*call.args, **call.kwargs)):
                yield encode(item)
            return
        for kind, value in streams.with_progress(lambda: target(*call.args, **call.kwargs), hook):
            yield encode(value) if kind == "event" else {"event": "result", "result": encode(value)}

    # ---------------------------------------------------------------------------------- tools
    def _execute(self, tool_name: str, payload: Any, request_session_id: str) -> Any:
        check_session_id(request_session_id)
        if tool_name == HELPERS_TOOL:
            return []  # no helper pack here; the 0.16 runtime never asks
        if tool_name not in (CALL_TOOL, STREAM_TOOL, RELEASE_REF_TOOL, RELEASE_SESSION_TOOL):
            raise AttributeError(f"Tool '{tool_name}' not supported by SnakeBridgeAdapter")
        payload = _payload_dict(payload)
        check_protocol(payload)
        session = session_of(payload, request_session_id)
        if tool_name == RELEASE_REF_TOOL:
            if payload.get("ref") is None:
                raise ValueError("snakebridge.release_ref requires ref")
            return self.refs.release(session, ref_identity(payload["ref"], session))
        if tool_name == RELEASE_SESSION_TOOL:
            return self.refs.release_session(session) if session else 0
        call_type = payload.get("call_type") or "function"
        if not isinstance(call_type, str) or call_type not in HANDLERS:
            raise ValueError(f"Unsupported call_type: {call_type!r}")
        call = self._decode_call(call_type, payload, session)
        try:
            result = HANDLERS[call_type](call, self.surface)
        finally:
            if _may_change_refs(call):
                self.refs.sync(session, call.used_refs)
        return self._encoder(session, payload, _origin(call))(result)

    def _decode_call(self, call_type: str, payload: dict[str, Any], session: str) -> Call:
        args = payload.get("args")
        kwargs = payload.get("kwargs")
        args = [] if args is None else args
        kwargs = {} if kwargs is None else kwargs
        if not isinstance(args, list):
            raise TypeError(f"args must be a list, not {type(args).__name__}")
        if not isinstance(kwargs, dict):
            raise TypeError(f"kwargs must be an object, not {type(kwargs).__name__}")

        used: list[str] = []

        def resolve(ref: Any) -> Any:
            ref_id = ref_identity(ref, session)
            obj = self.refs.get(session, ref_id)
            used.append(ref_id)
            return obj

        call = Call(call_type, payload, codec.decode(args, resolve), codec.decode(kwargs, resolve), resolve)
        call.used_refs = used
        return call

    def _encoder(self, session: str, payload: dict[str, Any], origin: Origin | None = None) -> Any:
        """encode(result) for this call: non-data objects become refs in the caller's session. `origin`:
        the result is the attribute `origin[1]` of the ref `origin[0]` (a get_attr)."""
        module = payload.get("python_module") or payload.get("module_path") or payload.get("library")
        library = payload.get("library") or (module.split(".")[0] if isinstance(module, str) else None)

        def encode(result: Any) -> Any:
            created: list[str] = []

            def make_ref(obj: Any, stream_type: str | None) -> dict[str, Any]:
                ref_id = self.refs.put(session, obj, origin if obj is result else None)
                created.append(ref_id)
                return wire_ref(ref_id, session, module, library, obj, stream_type)

            try:
                return codec.Encoder(make_ref).encode(result)
            except Exception:
                # Safety net (as the reference): drop partial refs, hand the whole result back as one ref.
                for ref_id in created:
                    self.refs.release(session, ref_id)
                return make_ref(result, None)

        return encode


def _origin(call: Call) -> Origin | None:
    """(instance ref id, attribute) of a get_attr: its result lives inside that ref's object."""
    if call.call_type != "get_attr" or len(call.used_refs) != 1:
        return None
    return call.used_refs[0], call.text("attr", "function") or ""


def _may_change_refs(call: Call) -> bool:
    if not call.used_refs or call.call_type in READ_ONLY_CALLS:
        return False
    return not (call.call_type == "method" and call.payload.get("function") in READ_ONLY_METHODS)


def wire_ref(
    ref_id: str, session: str, module: Any, library: Any, obj: Any, stream_type: str | None
) -> dict[str, Any]:
    type_name = type(obj).__name__
    ref: dict[str, Any] = {
        "__type__": "stream_ref" if stream_type else "ref",
        "__schema__": codec.SCHEMA,
        "id": ref_id,
        "session_id": session,
    }
    if isinstance(module, str):
        ref["python_module"] = module
    if isinstance(library, str):
        ref["library"] = library
    ref["type_name"] = type_name
    ref["__type_name__"] = type_name
    if stream_type:
        ref["stream_type"] = stream_type
    return ref


def _payload_dict(payload: Any) -> dict[str, Any]:
    if not isinstance(payload, dict):
        raise TypeError(f"tool parameters must be an object, not {type(payload).__name__}")
    return payload
