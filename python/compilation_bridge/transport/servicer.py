"""The Snakepit 0.13 `BridgeService`, served by this worker (docs/wire.md, RPCs).

Tool RPCs decode the JSON in each parameter's `Any.value` (whatever its type_url) into one payload dict
and hand it to the transport-agnostic `Dispatcher`; results go back as JSON bytes in `result.value`,
failures as `success=false` plus a JSON error payload, never as a gRPC status. Heartbeat, Ping and the
session RPCs are answered locally in microseconds: they never wait for tool work, which runs on its
own bounded set of threads.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

import grpc

from compilation_bridge.observability import hub
from compilation_bridge.observability.telemetry_stream import TelemetryStream
from compilation_bridge.protocol.admission import Admission
from compilation_bridge.protocol.answer import encode_answer
from compilation_bridge.protocol.dispatch import Dispatcher, Reply, session_of
from compilation_bridge.protocol.errors import WorkerBusyError, fallback_payload
from compilation_bridge.protocol.sessionids import check_session_id, is_too_long
from compilation_bridge.transport import jsonio
from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc
from compilation_bridge.transport.logcontext import correlation_id
from compilation_bridge.transport.telemetry import stream_events

log = logging.getLogger("compilation_bridge.transport")

TYPE_URL = "type.googleapis.com/snakepit."
MAX_TELEMETRY_STREAMS = 2  # Elixir opens one per worker; each open stream holds a server thread
MAX_SESSIONS = 10_000  # InitializeSession ids remembered (callers choose them: keep the memory bounded)


def _result_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return {dict: "map", str: "string", int: "integer", float: "float", list: "list"}.get(type(value), "any")


class BridgeServicer(pb_grpc.BridgeServiceServicer):
    def __init__(
        self,
        dispatcher: Dispatcher,
        max_request_bytes: int,
        max_response_bytes: int,
        max_concurrent_calls: int,
        max_session_calls: int | None = None,
        telemetry: TelemetryStream | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        # What StreamTelemetry sends: the events that observers (transport/server.py) put there.
        self.telemetry = telemetry if telemetry is not None else TelemetryStream()  # empty is falsy
        self.max_request_bytes = max_request_bytes
        self.max_response_bytes = max_response_bytes
        self._admission = Admission(max_concurrent_calls, max_session_calls or max_concurrent_calls)
        self._telemetry_slots = threading.BoundedSemaphore(MAX_TELEMETRY_STREAMS)
        self._sessions_lock = threading.Lock()
        self.sessions: OrderedDict[str, float] = OrderedDict()
        # The session Elixir initializes for this worker right after it is ready (Snakepit's post-ready
        # sequence). Later InitializeSession calls never replace it: the heartbeat to Elixir carries it,
        # and any caller's id there would create sessions in Elixir's store on that caller's behalf.
        self.worker_session_id = ""

    # -------------------------------------------------------------------- health and sessions
    def Ping(self, request: pb.PingRequest, context: grpc.ServicerContext) -> pb.PingResponse:
        response = pb.PingResponse(message=f"Pong from Python: {request.message}")
        response.server_time.GetCurrentTime()
        return response

    def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.ServicerContext) -> pb.HeartbeatResponse:
        # Answered locally: a live worker is a valid session for Snakepit's HeartbeatMonitor.
        response = pb.HeartbeatResponse(session_valid=True)
        response.server_time.GetCurrentTime()
        return response

    def InitializeSession(
        self, request: pb.InitializeSessionRequest, context: grpc.ServicerContext
    ) -> pb.InitializeSessionResponse:
        try:
            session_id = check_session_id(request.session_id)
        except ValueError as exc:
            reply = self.dispatcher.error_reply(exc, "InitializeSession", None, request.session_id)
            return pb.InitializeSessionResponse(success=False, error_message=_error_json(reply))
        with self._sessions_lock:
            self.sessions.setdefault(session_id, time.time())
            while len(self.sessions) > MAX_SESSIONS:
                self.sessions.popitem(last=False)
            if not self.worker_session_id:
                self.worker_session_id = session_id
        return pb.InitializeSessionResponse(success=True)

    def GetSession(
        self, request: pb.GetSessionRequest, context: grpc.ServicerContext
    ) -> pb.GetSessionResponse:
        if is_too_long(request.session_id):
            return pb.GetSessionResponse()  # unknown by construction; never echo an over-long id
        response = pb.GetSessionResponse(session_id=request.session_id)
        with self._sessions_lock:
            created = self.sessions.get(request.session_id)
        if created is not None:
            response.created_at.FromNanoseconds(int(created * 1e9))
        return response

    def CleanupSession(
        self, request: pb.CleanupSessionRequest, context: grpc.ServicerContext
    ) -> pb.CleanupSessionResponse:
        if is_too_long(request.session_id):
            return pb.CleanupSessionResponse(success=False)
        with self._sessions_lock:
            self.sessions.pop(request.session_id, None)
        # Never a store round trip here: this runs on the threads kept for the control path.
        released = self.dispatcher.release_session_soon(request.session_id) if request.session_id else 0
        return pb.CleanupSessionResponse(success=True, resources_cleaned=released)

    # -------------------------------------------------------------------- Python -> Elixir RPCs
    def RegisterTools(
        self, request: pb.RegisterToolsRequest, context: grpc.ServicerContext
    ) -> pb.RegisterToolsResponse:
        return pb.RegisterToolsResponse(
            success=False, error_message="tool registration is served by Elixir, not by a Python worker"
        )

    def GetExposedElixirTools(
        self, request: pb.GetExposedElixirToolsRequest, context: grpc.ServicerContext
    ) -> pb.GetExposedElixirToolsResponse:
        return pb.GetExposedElixirToolsResponse()

    def ExecuteElixirTool(
        self, request: pb.ExecuteElixirToolRequest, context: grpc.ServicerContext
    ) -> pb.ExecuteElixirToolResponse:
        error = {"type": "NotImplementedError", "message": "Elixir tools are not served by a Python worker"}
        return pb.ExecuteElixirToolResponse(success=False, error_message=jsonio.dumps(error).decode())

    def StreamTelemetry(
        self, request_iterator: Iterator[pb.TelemetryControl], context: grpc.ServicerContext
    ) -> Iterator[pb.TelemetryEvent]:
        """The worker's telemetry events until the call ends, under Elixir's controls (telemetry.py)."""
        if not self._telemetry_slots.acquire(blocking=False):
            return
        try:
            context.send_initial_metadata(())  # a client may wait for the headers until the first event
            yield from stream_events(self.telemetry, request_iterator, context)
        finally:
            self._telemetry_slots.release()

    # -------------------------------------------------------------------- tools
    def ExecuteTool(
        self, request: pb.ExecuteToolRequest, context: grpc.ServicerContext
    ) -> pb.ExecuteToolResponse:
        watchers = hub.watchers()
        if not watchers:
            return self._answer(request, context)
        with hub.observed(_observed_call(request, streaming=False), watchers) as call:
            response = self._answer(request, context)
            if not response.success:
                call.error_type, call.error_message = _error_of(response.error_message)
            return response

    def _answer(
        self, request: pb.ExecuteToolRequest, context: grpc.ServicerContext
    ) -> pb.ExecuteToolResponse:
        started = time.perf_counter()
        try:
            return self._tool_response(self._reply(request, context), request, started)
        except Exception as exc:  # a failure while answering is still answered in-band, never a status
            return self._last_resort(exc, request, started)

    def _reply(self, request: pb.ExecuteToolRequest, context: grpc.ServicerContext) -> Reply:
        remaining = context.time_remaining()
        if remaining is not None and remaining <= 0:
            # The caller gave up while the call waited for a thread: do not run work nobody awaits.
            late = TimeoutError("the call's deadline passed before it started")
            return self.dispatcher.error_reply(late, request.tool_name, None, request.session_id)
        return self._run_tool(request)

    def _last_resort(
        self, exc: Exception, request: pb.ExecuteToolRequest, started: float
    ) -> pb.ExecuteToolResponse:
        log.error("answering tool %s failed: %s", request.tool_name[:256], type(exc).__name__)
        return pb.ExecuteToolResponse(
            success=False,
            error_message=jsonio.dumps(fallback_payload(exc)).decode(),
            execution_time_ms=int((time.perf_counter() - started) * 1000),
        )

    def _run_tool(self, request: pb.ExecuteToolRequest) -> Reply:
        payload: Any = None
        try:
            self._admission.enter_worker()  # before decoding: the cap bounds that work too
        except WorkerBusyError as busy:
            return self.dispatcher.error_reply(busy, request.tool_name, None, request.session_id)
        try:
            payload = self._payload(request)
            share = _share(payload, request.session_id)
            self._admission.enter_session(share)
            try:
                return self.dispatcher.execute(request.tool_name, payload, request.session_id)
            finally:
                self._admission.leave_session(share)
        except Exception as exc:  # a bad payload, or the session's share is full
            return self.dispatcher.error_reply(exc, request.tool_name, payload, request.session_id)
        finally:
            self._admission.leave_worker()

    def _payload(self, request: pb.ExecuteToolRequest) -> dict[str, Any]:
        size = request.ByteSize()
        if size > self.max_request_bytes:
            raise ValueError(f"request too large: {size} bytes (limit {self.max_request_bytes})")
        payload: dict[str, Any] = {}
        parameters = request.parameters
        for key in parameters:
            try:
                payload[key] = jsonio.loads(parameters[key].value)
            except ValueError as exc:
                raise ValueError(f"parameter {key!r} is not valid JSON: {exc}") from None
        if request.binary_parameters:
            for key, data in request.binary_parameters.items():
                payload[key] = bytes(data)  # raw bytes override a JSON parameter (docs/wire.md#executetool)
        _described(payload)  # where the request is decoded, an observed call is named
        return payload

    def _tool_response(
        self, reply: Reply, request: pb.ExecuteToolRequest, started: float
    ) -> pb.ExecuteToolResponse:
        answer = encode_answer(
            reply,
            encode_result=jsonio.dumps,
            encode_error=jsonio.dumps,
            max_bytes=self.max_response_bytes,
            explain=lambda exc: self.dispatcher.error_reply(exc, request.tool_name, None, request.session_id),
        )
        response = pb.ExecuteToolResponse(success=answer.success)
        if answer.success:
            response.result.type_url = TYPE_URL + _result_kind(answer.result)
            response.result.value = answer.data
        else:
            response.error_message = answer.data.decode()
        response.execution_time_ms = int((time.perf_counter() - started) * 1000)
        return response

    def ExecuteStreamingTool(
        self, request: pb.ExecuteToolRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.ToolChunk]:
        watchers = hub.watchers()
        if not watchers:
            yield from self._stream(request, context, None)
            return
        with hub.observed(_observed_call(request, streaming=True), watchers) as call:
            yield from self._stream(request, context, call)

    def _stream(
        self, request: pb.ExecuteToolRequest, context: grpc.ServicerContext, call: hub.Call | None
    ) -> Iterator[pb.ToolChunk]:
        try:
            self._admission.enter_worker()
        except WorkerBusyError as busy:
            self._abort(
                context, self.dispatcher.error_reply(busy, request.tool_name, None, request.session_id), call
            )
        try:
            yield from self._stream_chunks(request, context, call)
        finally:
            self._admission.leave_worker()

    def _stream_chunks(
        self, request: pb.ExecuteToolRequest, context: grpc.ServicerContext, call: hub.Call | None
    ) -> Iterator[pb.ToolChunk]:
        tool = request.tool_name
        payload: Any = None
        count = 0
        try:
            payload = self._payload(request)
            share = _share(payload, request.session_id)
            self._admission.enter_session(share)
            try:
                for item in self.dispatcher.stream(tool, payload, request.session_id):
                    if not context.is_active():
                        return  # the caller cancelled: stop producing
                    count += 1
                    yield pb.ToolChunk(chunk_id=f"{tool}-{count}", data=jsonio.dumps(item))
            finally:
                self._admission.leave_session(share)
        except Exception as exc:
            self._abort(context, self.dispatcher.error_reply(exc, tool, payload, request.session_id), call)
        yield pb.ToolChunk(chunk_id=f"{tool}-{count + 1}", data=b"", is_final=True)

    @staticmethod
    def _abort(context: grpc.ServicerContext, reply: Reply, call: hub.Call | None) -> None:
        # Streams report failures as INTERNAL with the JSON error payload as details (docs/wire.md#streaming).
        if call is not None and reply.error is not None:
            call.error_type = str(reply.error.get("type", "Exception"))[: hub.MAX_NAME_CHARS]
            call.error_message = str(reply.error.get("message", ""))[: hub.MAX_MESSAGE_CHARS]
        context.abort(grpc.StatusCode.INTERNAL, _error_json(reply))


def _share(payload: dict[str, Any], request_session_id: str) -> str:
    """The session whose share a call takes: the one its refs live in (an id the dispatcher will refuse
    counts as the request's own session, and is refused there)."""
    try:
        return session_of(payload, request_session_id)
    except Exception:
        return request_session_id


def _error_json(reply: Reply) -> str:
    return jsonio.dumps(reply.error).decode()


def _observed_call(request: pb.ExecuteToolRequest, streaming: bool) -> hub.Call:
    # What the call does is named once its request is decoded (_described); until then, and for a call
    # refused before that, the call can find it in the request's parameters.
    return hub.Call(
        request.tool_name[: hub.MAX_NAME_CHARS],
        None,
        request.session_id[: hub.MAX_NAME_CHARS],
        correlation_id.get(),
        streaming=streaming,
        describe=partial(_operation_in, request.parameters),
    )


def _described(payload: dict[str, Any]) -> None:
    """Names what the observed call on this thread, if any, does, from its decoded request."""
    call = hub.current()
    if call is not None:
        call.described(hub.operation_of(payload))


# The keys that name what a call does: only these are decoded from a request that was not.
_OPERATION_KEYS = ("call_type", "python_module", "module_path", "class", "function", "attr")


def _operation_in(parameters: Mapping[str, Any]) -> str:
    named: dict[str, Any] = {}
    for key in _OPERATION_KEYS:
        if key in parameters:
            with contextlib.suppress(ValueError):  # the call itself says what is wrong with it
                named[key] = jsonio.loads(parameters[key].value)
    return hub.operation_of(named)


def _error_of(error_message: str) -> tuple[str, str]:
    """The type and message of an in-band error payload, for observers."""
    try:
        error = jsonio.loads(error_message.encode())
        message = str(error.get("message", ""))
        return str(error["type"])[: hub.MAX_NAME_CHARS], message[: hub.MAX_MESSAGE_CHARS]
    except Exception:
        return "Exception", error_message[: hub.MAX_MESSAGE_CHARS]
