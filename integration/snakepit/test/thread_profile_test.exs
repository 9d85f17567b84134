defmodule RealClient.ThreadProfileTest do
  @moduledoc """
  The thread profile, honestly (docs/worker.md, "Use the process profile"): a `worker_profile: :thread` pool of one
  worker through the launcher starts and answers, but Snakepit 0.13's `GRPCWorker` starts an RPC only
  when none of its own is pending, so concurrent calls to one worker run one at a time whatever
  `threads_per_worker` says. This pins that: while four calls are in flight, the worker's `GRPCWorker`
  holds one pending RPC and queues the other three, in Snakepit, before anything reaches Python. (The
  worker itself serves concurrent calls: tests/transport/test_starvation.py drives it over gRPC directly.)
  """
  use ExUnit.Case, async: false

  alias RealClient.Pool
  alias SnakeBridge.Runtime

  @moduletag timeout: 300_000
  @calls 4

  setup_all do
    thread_profile = %{worker_profile: :thread, threads_per_worker: 4}
    hooks = %{"COMPILATION_BRIDGE_TEST_HOOKS" => "1"}
    {:ok, instance: Pool.start_isolated!("my_app_thread_profile", 1, thread_profile, hooks)}
  end

  test "concurrent calls to one thread-profile worker wait in Snakepit's GRPCWorker, one RPC at a time",
       %{
         instance: instance
       } do
    assert [_] = Pool.worker_pids(instance)
    :ok = Pool.settle()

    calls =
      for _ <- 1..@calls do
        Task.async(fn ->
          Runtime.call("compilation_bridge.testing", "sleep", [2], __runtime__: [timeout: 60_000])
        end)
      end

    # Condition, not timing: wait until all four have reached the GRPCWorker, then look at its queue.
    assert Pool.eventually(fn -> rpc_counts() == {1, @calls - 1} end, 30_000),
           "the GRPCWorker held #{inspect(rpc_counts())} (pending, queued) RPCs"

    assert Enum.all?(Task.await_many(calls, 60_000), &match?({:ok, 2.0}, &1))
  end

  # {pending RPCs, queued requests} of the pool's one GRPCWorker.
  defp rpc_counts do
    [state] = Pool.grpc_worker_states()
    {map_size(Map.get(state, :pending_rpc_calls, %{})), :queue.len(state.rpc_request_queue)}
  end
end
