"""SnakeBridge 0.16 semantics, independent of any transport.

A transport hands in a decoded payload (a dict) plus the caller's session id and gets back a
`Reply` (`dispatch.Dispatcher.execute`) or a stream of items (`Dispatcher.stream`). Everything the
caller may touch goes through `compilation_bridge.surface`.
"""
