defmodule RealClient.Pool do
  @moduledoc "Starts and stops the real Snakepit application with a recipe's configuration, and finds its workers."

  alias RealClient.ReadmeRecipe

  @apps [:vllm, :snakebridge, :snakepit]

  @doc """
  Installs `config` (from a README recipe) as the application environment and starts the stack the
  way a user's application does. `extra_env` goes into each pool's `adapter_env` (test-only settings).
  """
  def start!(config, extra_env \\ %{}) do
    stop()

    for {key, _} <- Application.get_all_env(:snakepit), do: Application.delete_env(:snakepit, key)

    config =
      update_in(config, [:snakepit, :pools], fn pools ->
        Enum.map(
          pools,
          &Map.update(&1, :adapter_env, extra_env, fn env -> Map.merge(env, extra_env) end)
        )
      end)

    Application.put_all_env(config)
    {:ok, _} = Application.ensure_all_started(:vllm)
    :ok = Snakepit.Pool.await_ready(Snakepit.Pool, 60_000)
    config
  end

  def stop do
    for app <- @apps, do: Application.stop(app)
    :ok
  end

  @doc """
  Starts the launcher recipe with `pool_size` workers under `instance_name` (the other modules count
  their workers by instance name), `overrides` merged into its pool's configuration, `extra_env` in its
  workers' environment, `snakepit_env` in Snakepit's application environment, and a ref store of its
  own (its quotas and contents start empty); on the caller's exit stops it, kills any worker still
  there (a replacement may still be starting) and removes the store. Call from `setup_all`; returns the
  instance name.
  """
  def start_isolated!(
        instance_name,
        pool_size,
        overrides \\ %{},
        extra_env \\ %{},
        snakepit_env \\ []
      ) do
    config =
      :launcher
      |> RealClient.Recipes.config!()
      |> update_in([:snakepit, :pools], fn pools ->
        Enum.map(pools, &Map.merge(%{&1 | pool_size: pool_size}, overrides))
      end)
      |> put_in([:snakepit, :instance_name], instance_name)
      |> update_in([:snakepit], &Keyword.merge(&1, snakepit_env))

    state =
      Path.join(RealClient.Recipes.cache_root(), "state-#{System.unique_integer([:positive])}")

    start!(config, Map.put(extra_env, "COMPILATION_BRIDGE_STATE_DIR", state))

    ExUnit.Callbacks.on_exit(fn ->
      stop()

      eventually(fn -> worker_pids(instance_name) == [] end, 10_000) ||
        Enum.each(worker_pids(instance_name), &kill!/1)

      File.rm_rf(state)
    end)

    instance_name
  end

  @doc "kill -9 of one OS process."
  def kill!(os_pid), do: {_, 0} = System.cmd("kill", ["-9", Integer.to_string(os_pid)])

  @doc """
  kill -9 of the worker with this OS pid while Snakepit's heartbeat has no ping in flight, its heartbeat
  monitor held until the `GRPCWorker` has seen the exit. Snakepit 0.13 never replaces a worker killed
  during a ping (docs/worker.md, "Known limits"): that is Snakepit's bug, not what a test of this worker's
  recovery is about, and a loaded machine widens its window from milliseconds to seconds.
  """
  def kill_between_heartbeats!(os_pid) do
    case Enum.find(grpc_workers(), &(:sys.get_state(&1, 60_000).process_pid == os_pid)) do
      nil ->
        kill!(os_pid)

      worker ->
        monitor = :sys.get_state(worker, 60_000).heartbeat_monitor
        ref = Process.monitor(worker)
        hold_between_pings(monitor)
        kill!(os_pid)

        receive do
          {:DOWN, ^ref, :process, _, _} -> :ok
        after
          60_000 -> :ok
        end

        release(monitor)
    end
  end

  # Suspended, the monitor sends no ping; it is suspended only once no ping task of its own is running.
  defp hold_between_pings(nil), do: :ok

  defp hold_between_pings(monitor) do
    :ok = :sys.suspend(monitor, 60_000)

    unless :sys.get_state(monitor, 60_000).ping_task_ref == nil do
      :ok = :sys.resume(monitor, 60_000)
      Process.sleep(20)
      hold_between_pings(monitor)
    end
  catch
    :exit, _ -> :ok
  end

  defp release(nil), do: :ok

  defp release(monitor) do
    if Process.alive?(monitor), do: :sys.resume(monitor, 60_000)
    :ok
  catch
    :exit, _ -> :ok
  end

  @doc "OS pids of this checkout's workers started under `instance_name`."
  def worker_pids(instance_name) do
    script = Path.join(ReadmeRecipe.repo_root(), "python/grpc_server.py")
    {out, 0} = System.cmd("ps", ["-eo", "pid=,args="])

    for line <- String.split(out, "\n", trim: true),
        String.contains?(line, script),
        String.contains?(line <> " ", "--snakepit-instance-name #{instance_name} "),
        do: line |> String.trim() |> String.split(" ", parts: 2) |> hd() |> String.to_integer()
  end

  def alive?(os_pid), do: File.exists?("/proc/#{os_pid}")

  @doc """
  Waits until every Snakepit worker process has finished its post-ready sequence, and returns.

  Snakepit 0.13's `GRPCWorker` sends InitializeSession to its Python worker from inside its own
  GenServer after reporting ready, with the client's execute timeout (30 s by default), and a worker
  killed while that RPC is in flight leaves the GenServer waiting for the whole timeout before it
  handles the exit: `Snakepit.Pool.await_ready/2` can return before that sequence ends on a loaded
  machine. `:sys.get_state/2` is answered only once the GenServer is back in its loop.
  """
  def settle(ms \\ 60_000) do
    for pid <- grpc_workers(), do: :sys.get_state(pid, ms)
    :ok
  end

  @doc """
  The OS pid of a worker that serves one RPC for the whole of `ms` (the same pending call in its
  `GRPCWorker` at both ends), or nil: how a test finds the worker running a long call.
  """
  def long_call_worker(ms) do
    before = pending_calls()
    Process.sleep(ms)

    Enum.find_value(pending_calls(), fn {os_pid, calls} ->
      if not MapSet.disjoint?(calls, Map.get(before, os_pid, MapSet.new())), do: os_pid
    end)
  end

  defp pending_calls do
    for state <- grpc_worker_states(), into: %{} do
      {state.process_pid, state |> Map.get(:pending_rpc_calls, %{}) |> Map.keys() |> MapSet.new()}
    end
  end

  @doc "Snakepit's pool and worker bookkeeping in one line, for a failure message."
  def describe do
    pools =
      for {name, pool} <- :sys.get_state(Snakepit.Pool, 10_000).pools do
        "pool #{name}: workers #{inspect(pool.workers)}, available #{inspect(pool.available)}, " <>
          "loads #{inspect(pool.worker_loads)}, queued #{:queue.len(pool.request_queue)}"
      end

    # Each worker's supervisor (Snakepit's Worker.Starter) and what it holds: a GRPCWorker pid, or
    # :undefined when its worker ended in a way the supervisor does not restart.
    starters =
      for id <- Snakepit.Pool.Worker.StarterRegistry.list_starters() do
        case Snakepit.Pool.Worker.StarterRegistry.get_starter_pid(id) do
          {:ok, pid} -> "#{id} #{inspect(Supervisor.which_children(pid))}"
          error -> "#{id} #{inspect(error)}"
        end
      end

    Enum.join(pools ++ ["starters: " <> Enum.join(starters, "; ")], "; ")
  end

  @doc "The states of this BEAM's Snakepit `GRPCWorker` GenServers (each answers once back in its loop)."
  def grpc_worker_states, do: Enum.map(grpc_workers(), &:sys.get_state(&1, 60_000))

  @doc "This BEAM's Snakepit `GRPCWorker` processes."
  def grpc_workers, do: Enum.filter(Process.list(), &grpc_worker?/1)

  defp grpc_worker?(pid) do
    case Process.info(pid, :dictionary) do
      {:dictionary, dictionary} ->
        dictionary[:"$initial_call"] == {Snakepit.GRPCWorker, :init, 1}

      nil ->
        false
    end
  end

  @doc "Polls `fun` every 100 ms until it returns true or `ms` of wall-clock time pass; returns its last answer."
  def eventually(fun, ms) do
    poll_until(fun, System.monotonic_time(:millisecond) + ms)
  end

  defp poll_until(fun, deadline) do
    cond do
      fun.() -> true
      System.monotonic_time(:millisecond) >= deadline -> false
      true -> Process.sleep(100) && poll_until(fun, deadline)
    end
  end
end
