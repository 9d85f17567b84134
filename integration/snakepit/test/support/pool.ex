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

  @doc "OS pids of this checkout's workers started under `instance_name`."
  def worker_pids(instance_name) do
    script = Path.join(ReadmeRecipe.repo_root(), "python/grpc_server.py")
    {out, 0} = System.cmd("ps", ["-eo", "pid=,args="])

    for line <- String.split(out, "\n", trim: true),
        String.contains?(line, script),
        String.contains?(line, "--snakepit-instance-name #{instance_name}"),
        do: line |> String.trim() |> String.split(" ", parts: 2) |> hd() |> String.to_integer()
  end

  def alive?(os_pid), do: File.exists?("/proc/#{os_pid}")

  @doc "Polls `fun` every 100 ms until it returns true or `ms` pass; returns its last answer."
  def eventually(fun, ms) do
    cond do
      fun.() -> true
      ms <= 0 -> false
      true -> Process.sleep(100) && eventually(fun, ms - 100)
    end
  end
end
