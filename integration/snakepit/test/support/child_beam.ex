defmodule RealClient.ChildBeam do
  @moduledoc "A second BEAM running a recipe's pool, to be killed with SIGKILL."

  @doc "Starts it with its own `instance_name` (so its start-up cleanup spares this VM's workers)."
  def start!(recipe, instance) do
    ebins = Path.wildcard(Path.join(Mix.Project.build_path(), "lib/*/ebin"))
    code = "RealClient.ChildBeam.main(#{inspect(recipe)}, #{inspect(instance)})"
    args = Enum.flat_map(ebins, &["-pa", &1]) ++ ["-e", code]

    port =
      Port.open({:spawn_executable, System.find_executable("elixir")}, [
        :binary,
        :exit_status,
        :stderr_to_stdout,
        {:line, 4096},
        args: args
      ])

    %{port: port, os_pid: await_ready(port, 90_000)}
  end

  def kill!(%{port: port, os_pid: os_pid}) do
    RealClient.Pool.kill!(os_pid)

    receive do
      {^port, {:exit_status, _}} -> :ok
    after
      10_000 -> raise "the child BEAM did not die"
    end
  end

  defp await_ready(port, timeout) do
    receive do
      {^port, {:data, {:eol, "realclient-ready " <> pid}}} -> String.to_integer(pid)
      {^port, {:data, _}} -> await_ready(port, timeout)
      {^port, {:exit_status, status}} -> raise "the child BEAM exited with #{status}"
    after
      timeout -> raise "the child BEAM's pool was not ready in time"
    end
  end

  @doc false
  def main(recipe, instance) do
    config = put_in(RealClient.Recipes.config!(recipe), [:snakepit, :instance_name], instance)
    Application.put_all_env(config)
    {:ok, _} = Application.ensure_all_started(:vllm)
    :ok = Snakepit.Pool.await_ready(Snakepit.Pool, 60_000)
    IO.puts("realclient-ready #{System.pid()}")
    Process.sleep(:infinity)
  end
end
