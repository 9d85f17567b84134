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
end
