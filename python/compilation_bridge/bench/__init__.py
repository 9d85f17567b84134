"""The benchmarks behind `compilation-bridge bench`: each measures ours against a baseline in one run.

Not part of the worker: they drive real worker processes through `compilation_bridge.testing`, print figures
and assert nothing (tests check their arithmetic, never their timings).

- `rpc`: the gRPC worker per call against a bare grpcio servicer (`bare`), on the standard `workload`.
- `port`: the Erlang-port transport against the gRPC path, on the same workload.
- `compile`: ours against plain `torch.compile`, cold and warm; compiled against eager; heartbeats.
- `store`: the ref store on and off, a pool against one worker, a cold start from Redis' remote caches.
- `table`: the markdown table of ratios; `stats`: the percentiles all of them report.
"""
