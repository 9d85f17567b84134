defmodule SnakeBridge.SessionManager do
  @moduledoc """
  Releases a session's Python objects when the process that owns the session exits.

  `SnakeBridge.Runtime` registers each (session, pool) pair it uses for a process's automatic
  session. When every registered owner of a session is gone, the manager sends
  `snakebridge.release_session` to that pool (in a separate task, so a busy worker never blocks it).
  """

  use GenServer

  @release_timeout 10_000

  @doc false
  def start_link(opts \\ []),
    do: GenServer.start_link(__MODULE__, :ok, name: Keyword.get(opts, :name, __MODULE__))

  @doc "Records that `owner` uses `session_id` on pool `pool_name`."
  @spec register(String.t(), pid(), atom()) :: :ok
  def register(session_id, owner, pool_name) do
    GenServer.call(__MODULE__, {:register, session_id, owner, pool_name})
  end

  @impl true
  def init(:ok), do: {:ok, %{owners: %{}}}

  @impl true
  def handle_call({:register, session, owner, pool}, _from, state) do
    entry =
      case state.owners do
        %{^owner => entry} -> entry
        _ -> %{monitor: Process.monitor(owner), sessions: MapSet.new()}
      end

    entry = %{entry | sessions: MapSet.put(entry.sessions, {session, pool})}
    {:reply, :ok, %{state | owners: Map.put(state.owners, owner, entry)}}
  end

  @impl true
  def handle_info({:DOWN, _ref, :process, owner, _reason}, state) do
    {entry, owners} = Map.pop(state.owners, owner)

    still_owned =
      owners |> Map.values() |> Enum.flat_map(&MapSet.to_list(&1.sessions)) |> MapSet.new()

    for {session, pool} <- (entry && entry.sessions) || [],
        not MapSet.member?(still_owned, {session, pool}) do
      Task.start(fn ->
        SnakeBridge.Runtime.release_session(session,
          __runtime__: [pool_name: pool, timeout: @release_timeout]
        )
      end)
    end

    {:noreply, %{state | owners: owners}}
  end

  def handle_info(_other, state), do: {:noreply, state}
end
