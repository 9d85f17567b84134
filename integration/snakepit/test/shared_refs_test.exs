defmodule RealClient.SharedRefsTest do
  @moduledoc """
  Refs on a real Snakepit 0.13 pool of two workers (the launcher recipe with `pool_size: 2`, Snakepit's
  default affinity): Snakepit may send a session's next call to either worker, and a worker may die;
  the workers' shared ref store must make neither visible to the caller.
  """
  use ExUnit.Case, async: false

  alias RealClient.Pool
  alias SnakeBridge.Runtime
  alias Vllm.Config.CompilationConfig, as: CC

  @moduletag timeout: 600_000
  # kill -9 of the workers is deliberate: Snakepit's crash reports would only hide real failures.
  @moduletag capture_log: true
  @callers 8
  @rounds 5

  setup_all do
    {:ok, instance: Pool.start_isolated!("my_app_shared_refs", 2)}
  end

  test "#{@callers} concurrent callers, #{@rounds} rounds each, lose no ref", %{
    instance: instance
  } do
    assert length(Pool.worker_pids(instance)) == 2

    failures =
      1..@callers
      |> Task.async_stream(fn _caller -> rounds(@rounds) end,
        max_concurrency: @callers,
        timeout: 300_000
      )
      |> Enum.flat_map(fn {:ok, failed} -> failed end)

    assert failures == []
  end

  test "kill -9 of the worker that made a ref: the next call, on another worker, succeeds", %{
    instance: instance
  } do
    {:ok, cc} = CC.new(nil, 3, nil, cache_dir: "/tmp/outlives-its-worker")
    {:ok, true} = Runtime.set_attr(cc, :compilation_time, 2.5)
    {:ok, hash} = CC.compute_hash(cc)

    # Kill only workers that are serving, not in Snakepit's post-ready sequence (docs/worker.md, "Known limits").
    :ok = Pool.settle()
    before = Pool.worker_pids(instance)

    # Both workers: whichever made the ref is certainly gone; the next calls run on their replacements.
    for pid <- before, do: Pool.kill_between_heartbeats!(pid)

    assert Pool.eventually(
             fn ->
               pids = Pool.worker_pids(instance)
               length(pids) == 2 and Enum.all?(pids, &(&1 not in before))
             end,
             60_000
           ),
           "killed #{inspect(before)}; now #{inspect(Pool.worker_pids(instance))}; " <>
             Pool.describe()

    assert Pool.eventually(fn -> match?({:ok, _}, CC.mode(cc)) end, 60_000)

    assert {:ok, "/tmp/outlives-its-worker"} = CC.cache_dir(cc)
    assert {:ok, 2.5} = CC.compilation_time(cc)
    assert {:ok, ^hash} = CC.compute_hash(cc)
  end

  # One caller (a process, so a session of its own): new, mode, compute_hash, release_ref, `count`
  # times; returns what failed.
  defp rounds(count) do
    Enum.flat_map(1..count, fn round ->
      with {:ok, cc} <- CC.new(nil, 3, nil, []),
           {:ok, 3} <- CC.mode(cc),
           {:ok, <<_::binary-size(64)>>} <- CC.compute_hash(cc),
           :ok <- Runtime.release_ref(cc) do
        []
      else
        failure -> [{round, failure}]
      end
    end)
  end
end
