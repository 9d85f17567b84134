"""Tools that drive a worker the way Snakepit 0.13 and SnakeBridge 0.16 do: for tests, benchmarks and demos.

Shipped beside the product (as `starlette.testclient` is), never part of it: no module of the worker imports
this package, except the surface's loader of the test hooks, and only when an operator switches them on
(`COMPILATION_BRIDGE_TEST_HOOKS`). Importing the package itself loads nothing.

- `worker_process`: spawn and supervise a worker exactly as Snakepit's GRPCWorker does.
- `fake_elixir`: the part of Snakepit's Elixir BridgeServer a worker calls back (sessions, heartbeats).
- `session`: SnakeBridge's runtime for one session: the payloads it sends, replies decoded as Elixir does.
- `hooks`: long-running functions that the conformance suite calls through the worker.
"""
