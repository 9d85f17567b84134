"""Transports: the Snakepit 0.13 gRPC BridgeService (and, later, the Erlang port).

A transport only turns wire messages into (tool name, payload dict, session id) and `Reply`s back into
wire messages; all SnakeBridge semantics live in `compilation_bridge.protocol`.
"""
