defmodule CompilationBridge.TestSupport do
  @moduledoc "Helpers for the integration tests: pool readiness, fake workers, unwrapping errors."

  alias CompilationBridge.Pool

  @doc "Waits (up to `timeout` ms) until pool `name` has `count` registered workers; returns them."
  def await_workers(name, count, timeout \\ 90_000) do
    deadline = System.monotonic_time(:millisecond) + timeout
    await(name, count, deadline)
  end

  defp await(name, count, deadline) do
    workers = Pool.info(name).workers

    cond do
      length(workers) >= count ->
        workers

      System.monotonic_time(:millisecond) > deadline ->
        raise "pool #{inspect(name)} has #{length(workers)} of #{count} workers"

      true ->
        Process.sleep(50)
        await(name, count, deadline)
    end
  end

  @doc "The Python exception struct inside a `%Snakepit.Error{}`."
  def python_reason({:error, %Snakepit.Error{details: %{reason: reason}}}), do: reason

  @doc "Command line of a fake worker (test/support/fake_worker.py) that behaves as `mode` says."
  def fake_worker(mode) do
    python = CompilationBridge.Python.interpreter()
    [python, Path.expand("fake_worker.py", __DIR__), mode]
  end

  @doc "Sends SIGKILL to an OS process."
  def kill9(os_pid), do: System.cmd("kill", ["-9", Integer.to_string(os_pid)])

  @doc "Waits (up to `timeout` ms) until `check` returns true; fails the test otherwise."
  def wait_until(check, timeout \\ 30_000) do
    deadline = System.monotonic_time(:millisecond) + timeout

    Stream.repeatedly(fn ->
      check.() ||
        (System.monotonic_time(:millisecond) > deadline &&
           ExUnit.Assertions.flunk("condition not met")) ||
        Process.sleep(20)
    end)
    |> Enum.find(&(&1 == true))
  end

  @doc "The pid of worker `index` of pool `name`, whether it has registered or is still starting."
  def worker_pid(name, index \\ 0) do
    supervisor = Module.concat(Pool.server(name), Supervisor)
    {:workers, workers, _, _} = List.keyfind(Supervisor.which_children(supervisor), :workers, 0)

    {_, pid, _, _} =
      List.keyfind(Supervisor.which_children(workers), {CompilationBridge.Worker, index}, 0)

    pid
  end

  @doc "Whether an OS process is alive (`kill -0`)."
  def os_process_alive?(os_pid) do
    match?({_, 0}, System.cmd("kill", ["-0", Integer.to_string(os_pid)], stderr_to_stdout: true))
  end
end
