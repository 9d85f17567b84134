defmodule CompilationBridge.Pool do
  @moduledoc """
  A pool of Python workers: who is free, who waits, and which worker holds which session.

  Start one with `start_link/1` (a supervisor: this manager plus the workers, see
  `CompilationBridge.Pool.Supervisor`); the application starts the `:default` pool on boot.
  `execute/3` is the runtime client `SnakeBridge.Runtime` calls (Snakepit's `execute/3` shape).

  Rules:
    * one request at a time per worker; callers beyond that wait in a FIFO queue for at most
      `:queue_timeout` ms (then `{:error, :queue_timeout}`);
    * session affinity (option `:session_affinity`, default on): the first call of a session picks a
      free worker and the session stays on it, so its calls run in order on a worker that holds its
      objects already; later calls wait for that worker. Refs are in the workers' shared ref store, so
      with affinity off every call takes the first free worker and any worker serves any ref;
    * a worker that stops frees its sessions (their refs live on in the ref store: the next call of
      such a session gets another worker, which restores them); the caller of its request in flight
      gets `{:error, {:worker_exit, reason}}`; its supervisor restarts it and the new process
      registers itself;
    * when workers fail to start and none is running, every waiting caller and every new call is
      answered at once with `{:error, {:no_worker_can_start, cause}}` (the cause is the Python's own
      error where there is one) instead of waiting out its queue timeout; restarts back off (1 s,
      doubling to 30 s) and the cause is logged once per minute, or when it changes;
    * `snakebridge.release_session` goes to the session's worker (with affinity off, to any worker;
      with it on, a session no worker holds is answered 0 at once) and ends the affinity.
  """

  use GenServer

  require Logger

  alias CompilationBridge.Worker

  @release_session "snakebridge.release_session"
  # Added to a caller's wait so that the pool's own timers always fire first.
  @call_margin 5_000
  # Pause before a worker's next start after failed ones: doubling from the first to the last.
  @first_backoff 1_000
  @max_backoff 30_000
  # The same start failure is logged at most once in this many ms.
  @log_every 60_000

  @doc "Starts a pool (manager and workers under one supervisor). Options: `CompilationBridge.Pool.Options`."
  @spec start_link(keyword()) :: Supervisor.on_start()
  def start_link(opts), do: CompilationBridge.Pool.Supervisor.start_link(opts)

  @doc false
  def child_spec(opts) do
    name = Keyword.get(opts, :name, :default)
    %{id: {__MODULE__, name}, start: {__MODULE__, :start_link, [opts]}, type: :supervisor}
  end

  @doc "The registered name of pool `name`'s manager."
  @spec server(atom()) :: atom()
  def server(name), do: Module.concat(__MODULE__, Atom.to_string(name))

  @doc """
  Runs `tool` with `payload` on a worker of the pool `opts[:pool_name]` (default `:default`).

  Options: `:pool_name`, `:timeout` (ms for the request once on a worker, default app env
  `:call_timeout`), `:queue_timeout`. The session is the payload's `"session_id"`.
  Returns `{:ok, result}` or `{:error, reason}` with an internal reason (`SnakeBridge.Runtime` turns
  it into a `%Snakepit.Error{}`).
  """
  @spec execute(String.t(), map(), keyword()) :: {:ok, term()} | {:error, term()}
  def execute(tool, payload, opts \\ []) do
    name = Keyword.get(opts, :pool_name) || :default

    timeout =
      Keyword.get(opts, :timeout) ||
        Application.get_env(:compilation_bridge, :call_timeout, 600_000)

    queue_timeout = Keyword.get(opts, :queue_timeout)
    request = {:execute, tool, payload, Map.get(payload, "session_id"), timeout, queue_timeout}

    try do
      GenServer.call(server(name), request, wait_limit(name, timeout, queue_timeout))
    catch
      :exit, {:noproc, _} -> {:error, {:pool_not_found, name}}
      :exit, {:timeout, _} -> {:error, :worker_timeout}
      :exit, reason -> {:error, {:worker_exit, reason}}
    end
  end

  # The caller waits a little longer than the pool's own queue and request timers, which answer first.
  defp wait_limit(_name, :infinity, _queue), do: :infinity

  defp wait_limit(_name, timeout, queue) when is_integer(queue),
    do: timeout + queue + @call_margin

  defp wait_limit(name, timeout, nil) do
    timeout + :persistent_term.get({__MODULE__, name, :queue_timeout}, 60_000) + @call_margin
  end

  @doc "A snapshot for tests and operators: workers (index, pid, OS pid, busy), queue length, sessions."
  @spec info(atom()) :: map()
  def info(name \\ :default), do: GenServer.call(server(name), :info)

  @doc "Called by a worker once its Python process is ready."
  @spec register(atom(), non_neg_integer(), pid(), integer() | nil) :: :ok
  def register(pool, index, pid, os_pid),
    do: GenServer.cast(pool, {:register, index, pid, os_pid})

  @doc "Called by a worker when the request it ran has been answered."
  @spec checkin(atom(), non_neg_integer()) :: :ok
  def checkin(pool, index), do: GenServer.cast(pool, {:checkin, index, self()})

  @doc "Called by a worker whose Python did not start, with the cause a person can act on."
  @spec start_failed(atom(), non_neg_integer(), String.t()) :: :ok
  def start_failed(pool, index, cause), do: GenServer.cast(pool, {:start_failed, index, cause})

  @doc "Called by a starting worker: how long to wait before starting Python (0 unless it failed)."
  @spec start_delay(atom(), non_neg_integer()) :: non_neg_integer()
  def start_delay(pool, index), do: GenServer.call(pool, {:start_delay, index})

  # ------------------------------------------------------------------------------------ callbacks

  @impl true
  def init(%{} = options) do
    :persistent_term.put({__MODULE__, options.name, :queue_timeout}, options.queue_timeout)

    {:ok,
     %{
       options: options,
       workers: %{},
       idle: :queue.new(),
       sessions: %{},
       queue: :queue.new(),
       # consecutive failed starts per worker slot, and the last cause with when it was logged
       failures: %{},
       start_failure: nil
     }}
  end

  @impl true
  def handle_call({:execute, tool, payload, session, timeout, queue_timeout}, from, state) do
    entry = %{
      from: from,
      tool: tool,
      payload: payload,
      session: session,
      timeout: timeout,
      ref: make_ref()
    }

    cond do
      tool == @release_session and state.options.session_affinity and
          not Map.has_key?(state.sessions, session) ->
        {:reply, {:ok, 0}, state}

      no_worker_can_start?(state) ->
        {:reply, {:error, {:no_worker_can_start, state.start_failure.cause}}, state}

      true ->
        timer_ms = queue_timeout || state.options.queue_timeout
        Process.send_after(self(), {:queue_timeout, entry.ref}, timer_ms)
        {:noreply, drain(%{state | queue: :queue.in(entry, state.queue)})}
    end
  end

  def handle_call({:start_delay, index}, _from, state) do
    {:reply, backoff(Map.get(state.failures, index, 0)), state}
  end

  def handle_call(:info, _from, state) do
    workers =
      for {index, w} <- Enum.sort(state.workers) do
        %{index: index, pid: w.pid, os_pid: w.os_pid, busy: w.busy != nil}
      end

    {:reply, %{workers: workers, queued: :queue.len(state.queue), sessions: state.sessions},
     state}
  end

  @impl true
  def handle_cast({:register, index, pid, os_pid}, state) do
    ref = Process.monitor(pid)
    worker = %{pid: pid, os_pid: os_pid, monitor: ref, busy: nil}

    state = %{
      state
      | workers: Map.put(state.workers, index, worker),
        idle: :queue.in(index, state.idle),
        failures: Map.delete(state.failures, index),
        start_failure: nil
    }

    {:noreply, drain(state)}
  end

  def handle_cast({:checkin, index, pid}, state) do
    case state.workers do
      %{^index => %{pid: ^pid} = worker} ->
        workers = Map.put(state.workers, index, %{worker | busy: nil})
        {:noreply, drain(%{state | workers: workers, idle: :queue.in(index, state.idle)})}

      _ ->
        {:noreply, state}
    end
  end

  def handle_cast({:start_failed, index, cause}, state) do
    failures = Map.update(state.failures, index, 1, &(&1 + 1))
    state = %{state | failures: failures}

    if map_size(state.workers) == 0 do
      state = note_start_failure(state, cause, backoff(failures[index]))
      {:noreply, fail_waiting(state, {:no_worker_can_start, cause})}
    else
      {:noreply, state}
    end
  end

  @impl true
  def handle_info({:queue_timeout, ref}, state) do
    {timed_out, rest} = :queue.to_list(state.queue) |> Enum.split_with(&(&1.ref == ref))
    Enum.each(timed_out, &GenServer.reply(&1.from, {:error, :queue_timeout}))
    {:noreply, %{state | queue: :queue.from_list(rest)}}
  end

  def handle_info({:DOWN, ref, :process, _pid, reason}, state) do
    case Enum.find(state.workers, fn {_index, w} -> w.monitor == ref end) do
      {index, worker} -> {:noreply, state |> drop_worker(index, worker, reason) |> drain()}
      nil -> {:noreply, state}
    end
  end

  def handle_info(_other, state), do: {:noreply, state}

  # ------------------------------------------------------------------------------------ start failures

  defp no_worker_can_start?(state),
    do: state.start_failure != nil and map_size(state.workers) == 0

  defp backoff(0), do: 0

  defp backoff(failures),
    do: min(@max_backoff, @first_backoff * Integer.pow(2, min(failures - 1, 10)))

  # Logged when the cause is new or @log_every has passed: one line, however many workers fail.
  defp note_start_failure(state, cause, delay) do
    now = System.monotonic_time(:millisecond)
    last = state.start_failure

    logged_at =
      if last == nil or last.cause != cause or now - last.logged_at >= @log_every do
        Logger.error(
          "compilation-bridge pool #{state.options.name}: no worker can start: #{cause} " <>
            "(retrying in #{div(delay, 1000)} s; callers are answered with this error meanwhile)"
        )

        now
      else
        last.logged_at
      end

    %{state | start_failure: %{cause: cause, logged_at: logged_at}}
  end

  defp fail_waiting(state, reason) do
    state.queue |> :queue.to_list() |> Enum.each(&GenServer.reply(&1.from, {:error, reason}))
    %{state | queue: :queue.new()}
  end

  # ------------------------------------------------------------------------------------ scheduling

  defp drop_worker(state, index, worker, reason) do
    if worker.busy, do: GenServer.reply(worker.busy, {:error, {:worker_exit, reason}})
    sessions = Map.reject(state.sessions, fn {_session, i} -> i == index end)

    %{
      state
      | workers: Map.delete(state.workers, index),
        idle: :queue.delete(index, state.idle),
        sessions: sessions
    }
  end

  # Hands queued requests to free workers, oldest first; a request whose session is held by a busy
  # worker keeps its place without blocking the requests behind it.
  defp drain(state) do
    if :queue.is_empty(state.idle) or :queue.is_empty(state.queue) do
      state
    else
      {kept, state} =
        state.queue
        |> :queue.to_list()
        |> Enum.reduce({[], state}, fn entry, {kept, state} ->
          case pick(state, entry) do
            nil -> {[entry | kept], state}
            index -> {kept, start(state, entry, index)}
          end
        end)

      %{state | queue: :queue.from_list(Enum.reverse(kept))}
    end
  end

  defp pick(state, entry) do
    cond do
      :queue.is_empty(state.idle) -> nil
      not state.options.session_affinity -> first_idle(state)
      true -> pick_for_session(state, entry)
    end
  end

  defp pick_for_session(state, entry) do
    case Map.fetch(state.sessions, entry.session) do
      {:ok, index} ->
        if :queue.member(index, state.idle), do: index

      :error ->
        if entry.tool == @release_session, do: :nothing_to_release, else: first_idle(state)
    end
  end

  defp first_idle(state), do: :queue.get(state.idle)

  # The session's worker was replaced while this release waited: nothing is left to release.
  defp start(state, %{tool: @release_session} = entry, :nothing_to_release) do
    GenServer.reply(entry.from, {:ok, 0})
    state
  end

  defp start(state, entry, index) do
    worker = Map.fetch!(state.workers, index)
    Worker.dispatch(worker.pid, entry.from, entry.tool, entry.payload, entry.timeout)

    %{
      state
      | workers: Map.put(state.workers, index, %{worker | busy: entry.from}),
        idle: :queue.delete(index, state.idle),
        sessions: track_session(state.sessions, entry, index, state.options.session_affinity)
    }
  end

  defp track_session(sessions, _entry, _index, false), do: sessions
  defp track_session(sessions, %{session: nil}, _index, true), do: sessions

  defp track_session(sessions, %{tool: @release_session, session: s}, _index, true),
    do: Map.delete(sessions, s)

  defp track_session(sessions, %{session: session}, index, true),
    do: Map.put(sessions, session, index)
end
