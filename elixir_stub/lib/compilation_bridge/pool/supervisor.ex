defmodule CompilationBridge.Pool.Supervisor do
  @moduledoc """
  Supervises one pool: the manager (`CompilationBridge.Pool`) and, after it, one
  `CompilationBridge.Worker` per slot.

  `:rest_for_one`: if the manager dies, the workers restart too (a new manager knows none of them);
  a worker that dies is restarted alone and registers itself again. Restarts are allowed generously
  (a Python killed from outside is routine, not a reason to take the pool down).
  """

  use Supervisor

  alias CompilationBridge.Pool.Options
  alias CompilationBridge.{Pool, Worker}

  @doc "Validates the options (raises `ArgumentError` with a clear message) and starts the pool."
  @spec start_link(keyword()) :: Supervisor.on_start()
  def start_link(opts) do
    options = Options.validate!(opts)

    Supervisor.start_link(__MODULE__, options,
      name: Module.concat(Pool.server(options.name), Supervisor)
    )
  end

  @impl true
  def init(options) do
    manager = Pool.server(options.name)

    workers =
      for index <- 0..(options.size - 1) do
        {Worker, pool: manager, index: index, options: options}
      end

    children = [
      %{id: Pool, start: {GenServer, :start_link, [Pool, options, [name: manager]]}},
      %{
        id: :workers,
        type: :supervisor,
        start:
          {Supervisor, :start_link,
           [
             workers,
             [strategy: :one_for_one, max_restarts: 10 * options.size + 10, max_seconds: 10]
           ]}
      }
    ]

    Supervisor.init(children, strategy: :rest_for_one)
  end
end
