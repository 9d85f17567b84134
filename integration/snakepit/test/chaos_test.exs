defmodule RealClient.ChaosTest do
  @moduledoc """
  Workers killed while callers are busy (the launcher recipe, `pool_size: 2`): eight callers, each in a
  session of its own, run the standard workload while workers are kill -9'd one at a time, and then
  while a long compile runs and its worker is killed. No answer may be wrong, every failed call must be
  a Snakepit worker or connection error (the call was on the worker that died), refs made before a kill
  answer after it, and the pool ends with two healthy workers. The fraction of calls that failed, and
  why, is printed.

  Not part of the normal suite yet: under Snakepit 0.13 it takes the BEAM down (see "Known limits" in the
  README: after a kill, Snakepit hands queued calls to the busy replacement, and its GRPCWorker's queued
  calls capture each other, so the BEAM's memory doubles with each one). Run it with
  `scripts/realclient_test.sh --only chaos`.
  """
  use ExUnit.Case, async: false

  alias RealClient.{Chaos, Pool}
  alias SnakeBridge.Runtime
  alias Vllm.Config.CompilationConfig, as: CC

  @moduletag :chaos
  @moduletag timeout: 900_000
  # The crash reports of deliberately killed workers would only hide real failures.
  @moduletag capture_log: true
  @callers 8
  @kills 4
  # Bounds on the callers' rounds: they stop when the killer is done, or at this many rounds.
  @max_rounds 5_000

  setup_all do
    {:ok, instance: Pool.start_pair!("my_app_chaos")}
  end

  test "#{@callers} callers while #{@kills} workers are killed: nothing wrong, nothing lost", %{
    instance: instance
  } do
    :ok = Chaos.recovered!(instance)
    callers = start_callers(@callers)

    witnesses = Chaos.killer(instance, @kills)
    tally = stop_callers(callers)
    Chaos.report("#{@callers} callers", tally, @kills)
    Chaos.assert_clean!(tally)

    # Every kill meets at most one call in flight (one per worker) and the calls already sent to it.
    assert length(tally.failed) <= @kills * @callers
    :ok = Chaos.recovered!(instance)
    assert Enum.all?(witnesses, &Chaos.witness_intact?/1)
    assert length(Pool.worker_pids(instance)) == 2
  end

  test "a long compile's worker killed: other sessions keep their answers, a retry compiles", %{
    instance: instance
  } do
    :ok = Chaos.recovered!(instance)
    # A model size no other test compiles, so nothing comes from the compile cache: Inductor runs.
    hidden = 256 + 8 * :rand.uniform(64)
    compile = Task.async(fn -> compile_and_run(hidden) end)
    callers = start_callers(4)

    # The worker that holds the compile (or its first run) for seconds on end; the callers' calls take
    # milliseconds.
    {:ok, compiling} = Chaos.retry(fn -> found(Pool.long_call_worker(3_000)) end, 300_000)
    during = rounds_done(callers)
    assert Pool.eventually(fn -> rounds_done(callers) >= during + 20 end, 60_000)

    assert Pool.long_call_worker(1_000) == compiling,
           "the compile ended before its worker was killed"

    Pool.kill!(compiling)

    assert {:error, %Snakepit.Error{} = error} = Task.await(compile, 600_000)
    assert Chaos.worker_died?(error), inspect(error)
    :ok = Chaos.recovered!(instance)
    assert {:ok, run} = compile_and_run(hidden)
    assert run["num_tokens"] == 8 and run["max_abs_diff_vs_eager"] < 1.0e-4

    tally = stop_callers(callers)
    Chaos.report("4 callers beside a compile", tally, 1)
    Chaos.assert_clean!(tally)
    assert length(Pool.worker_pids(instance)) == 2
  end

  # Callers running until stop_callers/1, each counting its rounds that succeeded in full.
  defp start_callers(count) do
    progress = :counters.new(1, [])
    stop = :atomics.new(1, [])
    stop? = fn -> :atomics.get(stop, 1) == 1 end

    tasks =
      for id <- 1..count, do: Task.async(fn -> Chaos.caller(id, progress, stop?, @max_rounds) end)

    %{tasks: tasks, progress: progress, stop: stop}
  end

  defp rounds_done(callers), do: :counters.get(callers.progress, 1)

  # Tells the callers to stop after their round and sums their tallies.
  defp stop_callers(callers) do
    :atomics.put(callers.stop, 1, 1)
    callers.tasks |> Task.await_many(600_000) |> Chaos.total()
  end

  defp found(nil), do: :none
  defp found(os_pid), do: {:ok, os_pid}

  defp compile_and_run(hidden) do
    opts = [__runtime__: [session_id: "chaos-compile", timeout: 600_000]]

    with {:ok, cc} <- CC.new(nil, 3, nil, opts),
         {:ok, model} <-
           Runtime.call(
             "compilation_bridge.compile",
             "compile_model",
             [cc],
             [max_num_tokens: 64, hidden_size: hidden, num_layers: 4] ++ opts
           ) do
      Runtime.call_method(model, :run, [8], opts)
    end
  end
end
