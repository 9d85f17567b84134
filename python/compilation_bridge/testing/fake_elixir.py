"""The part of Snakepit's Elixir BridgeServer that a worker calls back: Ping, sessions and Heartbeat.

One fake for every test and benchmark that needs Snakepit's side of the wire (docs/wire.md#heartbeat).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc

from compilation_bridge.transport.generated import snakepit_bridge_pb2 as pb
from compilation_bridge.transport.generated import snakepit_bridge_pb2_grpc as pb_grpc


class ElixirBridgeServer(pb_grpc.BridgeServiceServicer):
    """Serves on a loopback port from construction until `stop()`; records what the worker sent."""

    def __init__(self) -> None:
        self.sessions: list[str] = []  # every InitializeSession, in order: a test can see repeats
        self.heartbeats: list[str] = []  # the session id of every Heartbeat
        # Without SO_REUSEPORT (grpc's default sets it): no other server can share this port unnoticed.
        self.server = grpc.server(
            ThreadPoolExecutor(max_workers=4, thread_name_prefix="fake-elixir"),
            options=[("grpc.so_reuseport", 0)],
        )
        pb_grpc.add_BridgeServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(0).wait(2)

    def Ping(self, request: pb.PingRequest, context: grpc.ServicerContext) -> pb.PingResponse:
        return pb.PingResponse(message=f"pong: {request.message}")

    def InitializeSession(
        self, request: pb.InitializeSessionRequest, context: grpc.ServicerContext
    ) -> pb.InitializeSessionResponse:
        self.sessions.append(request.session_id)
        return pb.InitializeSessionResponse(success=True)

    def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.ServicerContext) -> pb.HeartbeatResponse:
        self.heartbeats.append(request.session_id)
        response = pb.HeartbeatResponse(session_valid=request.session_id in self.sessions)
        response.server_time.GetCurrentTime()
        return response
