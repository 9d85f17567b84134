defmodule CompilationBridge.Application do
  @moduledoc """
  Starts the session manager and, unless `config :compilation_bridge, start_default_pool: false`,
  the `:default` pool (size `:pool_size`; Python from `COMPILATION_BRIDGE_PYTHON` or the project's
  `.venv`), so `mix run`, `iex -S mix` and `mix test` can call the generated modules at once.
  """

  use Application

  @impl true
  def start(_type, _args) do
    children = [SnakeBridge.SessionManager | default_pool()]
    Supervisor.start_link(children, strategy: :one_for_one, name: CompilationBridge.Supervisor)
  end

  defp default_pool do
    if Application.get_env(:compilation_bridge, :start_default_pool, true) do
      [
        {CompilationBridge.Pool,
         name: Application.get_env(:compilation_bridge, :default_pool, :default)}
      ]
    else
      []
    end
  end
end
