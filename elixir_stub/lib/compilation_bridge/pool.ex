defmodule CompilationBridge.Pool do
  @moduledoc """
  A pool of Python workers: who is free, who waits, and which worker holds which session.

  Start one with `start_link/1` (a supervisor: this manager plus the workers, see
  `CompilationBridge.Pool.Supervisor`); the application starts the `:default` pool on boot.
  `execute/3` is the runtime client `SnakeBridge.Runtime` calls (Snakepit's `execute/3` shape).

  Rules:
    * one request at a time per worker; callers beyond that wait in a FIFO queue
      (`CompilationBridge.Pool.Queue`) for at most `:queue_timeout` ms, then get
      `{:error, :queue_timeout}`. Deadlines are absolute (monotonic time) and one timer runs, for
      the nearest; it is cancelled when no caller waits any more. A request past its deadline is
      never dispatched, even when its timer has not fired yet;
    * callers are monitored while they wait: a caller that exits is dropped from the queue, so no
      worker runs work nobody waits for (once dispatched, a request runs to its end);
    * session affinity (option `:session_affinity`, default on): the first call of a session picks a
      free worker and the session stays on it, so its calls run in order on a worker that holds its
      objects already; later calls wait for that worker. Refs are in the workers' shared ref store, so
      with affinity off every call takes the first free worker and any worker serves any ref;
    * a worker that stops frees its sessions (their refs live on in the ref store: the next call of
      such a session gets another worker, which restores them); the caller of its request in flight
      gets `{:error, reason}` (`{:worker_exit, reason}` when its Python exits); its supervisor
      restarts it and the new process registers itself. A worker that is about to stop tells the
      pool first (`retire/2`), so no queued request is handed to it in between;
    * when workers fail to start and none is running, every waiting caller and every new call is
      answered at once with `{:error, {:no_worker_can_start, cause}}` (the cause is the Python's own
      error where there is one) instead of waiting out its queue timeout; restarts back off (1 s,
      doubling to 30 s) and the cause is logged once per minute, or when it changes;
    * `snakebridge.release_session` goes to the session's worker (with affinity off, to any worker;
      with it on, a session no worker holds is answered 0 at once) and ends the affinity;
    * every `execute/3` is a telemetry span, `[:compilation_bridge, :call, :start | :stop |
      :exception]`, emitted in the caller's process through `CompilationBridge.Telemetry` (see
      `execute/3`).
  """

  use GenServer

  require Logger

  alias CompilationBridge.Pool.Queue
  alias CompilationBridge.{Telemetry, Worker}

  @release_session "snakebridge.release_session"
  @call_span [:compilation_bridge, :call]
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

  Telemetry (a span, in the caller's process; nothing is built when no handler listens):
    * `[:compilation_bridge, :call, :start]`: `%{system_time, monotonic_time}`;
    * `[:compilation_bridge, :call, :stop]`: `%{duration, monotonic_time}`, plus `worker_time` when a
      worker answered; metadata `result: :ok | :error` and, for `:error`, `error: reason` (a Python
      exception is `{:python, error_map}`; the pool's own refusals such as `:queue_timeout` too);
    * `[:compilation_bridge, :call, :exception]`: the worker failed under the call (its Python
      exited or was killed, timed out, sent a corrupt or fatal frame) or the caller's wait ended in
      an exit: `%{duration, monotonic_time}` (and `worker_time`), metadata `kind: :exit`, `reason`
      (the error reason the caller gets), `stacktrace: []`.
  All three carry `pool_name`, `tool`, `session_id`, `call_type`, `python_module`, `class`,
  `function` (from the payload; nil where it has none) and `telemetry_span_context`; `:stop` and
  `:exception` add `worker_id` and `worker_os_pid` when the call reached a worker. Durations are in
  native time units; `worker_time` runs from the worker's write to the port to its answer.
  """
  @spec execute(String.t(), map(), keyword()) :: {:ok, term()} | {:error, term()}
  def execute(tool, payload, opts \\ []) do
    name = Keyword.get(opts, :pool_name) || :default
    span = Telemetry.start(@call_span, fn -> call_metadata(name, tool, payload) end)

    timeout =
      Keyword.get(opts, :timeout) ||
        Application.get_env(:compilation_bridge, :call_timeout, 600_000)

    queue_timeout = Keyword.get(opts, :queue_timeout)
    request = {:execute, tool, payload, Map.get(payload, "session_id"), timeout, queue_timeout}

    try do
      GenServer.call(server(name), request, wait_limit(name, timeout, queue_timeout))
    catch
      :exit, {:noproc, _} -> {:error, {:pool_not_found, name}}
      :exit, {:timeout, _} -> {:worker_failure, {:error, :worker_timeout}, %{}}
      :exit, reason -> {:worker_failure, {:error, {:worker_exit, reason}}, %{}}
    end
    |> finish(span)
  end

  # A worker's answer carries the worker and its timing (`CompilationBridge.Worker.dispatch/5`);
  # the pool's own answers (queue timeout, no worker, nothing to release) are bare results.
  defp finish({tag, result, _worker}, nil) when tag in [:worker_reply, :worker_failure],
    do: result

  defp finish({:worker_reply, result, worker}, span) do
    {measurements, worker} = Map.split(worker, [:worker_time])
    Telemetry.stop(span, measurements, Map.merge(worker, outcome(result)))
    result
  end

  defp finish({:worker_failure, {:error, reason} = result, worker}, span) do
    {measurements, worker} = Map.split(worker, [:worker_time])
    Telemetry.exception(span, :exit, reason, [], measurements, worker)
    result
  end

  defp finish(result, span) do
    Telemetry.stop(span, %{}, outcome(result))
    result
  end

  defp outcome({:ok, _result}), do: %{result: :ok}
  defp outcome({:error, reason}), do: %{result: :error, error: reason}

  defp call_metadata(name, tool, payload) do
    %{
      pool_name: name,
      tool: tool,
      session_id: payload["session_id"],
      call_type: payload["call_type"],
      python_module: payload["python_module"] || payload["module_path"],
      class: payload["class"],
      function: payload["function"]
    }
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

  @doc """
  Called by a worker that is about to stop, after answering its request if it had one: the pool
  forgets it at once (its sessions too) and hands it no more work.
  """
  @spec retire(atom(), non_neg_integer()) :: :ok
  def retire(pool, index), do: GenServer.cast(pool, {:retire, index, self()})

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
       queue: Queue.new(),
       # {timer reference, deadline} of the one timer, for the queue's nearest deadline
       timer: nil,
       # consecutive failed starts per worker slot, and the last cause with when it was logged
       failures: %{},
       start_failure: nil
     }}
  end

  @impl true
  def handle_call({:execute, tool, _payload, session, _timeout, _queue} = request, from, state) do
    cond do
      tool == @release_session and state.options.session_affinity and
          not Map.has_key?(state.sessions, session) ->
        {:reply, {:ok, 0}, state}

      no_worker_can_start?(state) ->
        {:reply, {:error, {:no_worker_can_start, state.start_failure.cause}}, state}

      true ->
        state |> enqueue(request, from) |> drain() |> noreply()
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

    {:reply, %{workers: workers, queued: Queue.size(state.queue), sessions: state.sessions},
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

    state |> drain() |> noreply()
  end

  def handle_cast({:checkin, index, pid}, state) do
    case state.workers do
      %{^index => %{pid: ^pid} = worker} ->
        workers = Map.put(state.workers, index, %{worker | busy: nil})
        drain(%{state | workers: workers, idle: :queue.in(index, state.idle)}) |> noreply()

      _ ->
        {:noreply, state}
    end
  end

  def handle_cast({:retire, index, pid}, state) do
    case state.workers do
      %{^index => %{pid: ^pid} = worker} ->
        Process.demonitor(worker.monitor, [:flush])
        # Its caller has had the worker's own answer: nobody is left to tell.
        {:noreply, drop_worker(state, index, %{worker | busy: nil}, :retired)}

      _ ->
        {:noreply, state}
    end
  end

  def handle_cast({:start_failed, index, cause}, state) do
    failures = Map.update(state.failures, index, 1, &(&1 + 1))
    state = %{state | failures: failures}

    if map_size(state.workers) == 0 do
      state = note_start_failure(state, cause, backoff(failures[index]))
      state |> fail_waiting({:no_worker_can_start, cause}) |> noreply()
    else
      {:noreply, state}
    end
  end

  @impl true
  # Only the current timer counts: one cancelled too late names another deadline, and is ignored.
  def handle_info({:queue_deadline, deadline}, %{timer: {_ref, deadline}} = state) do
    %{state | timer: nil} |> expire_due() |> noreply()
  end

  def handle_info({:DOWN, ref, :process, _pid, reason}, state) do
    case Queue.take(state.queue, ref) do
      # A waiting caller exited: nobody waits for its answer, so its work is never dispatched.
      {%{}, queue} -> noreply(%{state | queue: queue})
      {nil, _queue} -> state |> worker_down(ref, reason) |> noreply()
    end
  end

  def handle_info(_other, state), do: {:noreply, state}

  defp worker_down(state, ref, reason) do
    case Enum.find(state.workers, fn {_index, w} -> w.monitor == ref end) do
      {index, worker} -> state |> drop_worker(index, worker, reason) |> drain()
      nil -> state
    end
  end

  # Every callback that changes the queue answers through here, so the timer always follows it.
  defp noreply(state), do: {:noreply, arm_timer(state)}

  # ------------------------------------------------------------------------------------ the queue

  # The monitor's reference is the entry's key: the caller's :DOWN names the entry to drop.
  defp enqueue(state, {:execute, tool, payload, session, timeout, queue_timeout}, from) do
    {caller, _tag} = from

    entry = %{
      key: Process.monitor(caller),
      from: from,
      tool: tool,
      payload: payload,
      session: session,
      timeout: timeout,
      deadline: now() + (queue_timeout || state.options.queue_timeout)
    }

    %{state | queue: Queue.push(state.queue, entry)}
  end

  # One timer, for the nearest deadline: kept while that deadline stays the nearest, cancelled when
  # it changes or no caller waits any more.
  defp arm_timer(state) do
    case {Queue.next_deadline(state.queue), state.timer} do
      {deadline, {_ref, deadline}} ->
        state

      {next, timer} ->
        if timer, do: Process.cancel_timer(elem(timer, 0))
        %{state | timer: next && {start_timer(next), next}}
    end
  end

  defp start_timer(deadline),
    do: Process.send_after(self(), {:queue_deadline, deadline}, deadline, abs: true)

  defp expire_due(state) do
    {expired, queue} = Queue.expire(state.queue, now())
    Enum.each(expired, &answer(&1, {:error, :queue_timeout}))
    %{state | queue: queue}
  end

  # Answers a caller that leaves the queue without being dispatched.
  defp answer(entry, reply) do
    Process.demonitor(entry.key, [:flush])
    GenServer.reply(entry.from, reply)
  end

  defp leave(state, entry) do
    Process.demonitor(entry.key, [:flush])
    {^entry, queue} = Queue.take(state.queue, entry.key)
    %{state | queue: queue}
  end

  defp now, do: System.monotonic_time(:millisecond)

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
    state.queue |> Queue.to_list() |> Enum.each(&answer(&1, {:error, reason}))
    %{state | queue: Queue.new()}
  end

  # ------------------------------------------------------------------------------------ scheduling

  defp drop_worker(state, index, worker, reason) do
    if worker.busy do
      failure = {:error, {:worker_exit, reason}}

      GenServer.reply(
        worker.busy,
        {:worker_failure, failure, %{worker_id: index, worker_os_pid: worker.os_pid}}
      )
    end

    sessions = Map.reject(state.sessions, fn {_session, i} -> i == index end)

    %{
      state
      | workers: Map.delete(state.workers, index),
        idle: :queue.delete(index, state.idle),
        sessions: sessions
    }
  end

  # Hands queued requests to free workers, oldest first; a request whose session is held by a busy
  # worker keeps its place without blocking the requests behind it. Requests past their deadline are
  # answered first, whether or not their timer has fired.
  defp drain(state) do
    state = expire_due(state)

    if :queue.is_empty(state.idle),
      do: state,
      else: Enum.reduce_while(Queue.to_list(state.queue), state, &dispatch_next/2)
  end

  defp dispatch_next(entry, state) do
    cond do
      :queue.is_empty(state.idle) -> {:halt, state}
      # Its :DOWN may still be behind us in the mailbox: the caller is gone all the same.
      not caller_alive?(entry.from) -> {:cont, leave(state, entry)}
      index = pick(state, entry) -> {:cont, state |> leave(entry) |> start(entry, index)}
      true -> {:cont, state}
    end
  end

  defp caller_alive?({pid, _tag}) when node(pid) == node(), do: Process.alive?(pid)
  defp caller_alive?(_remote), do: true

  defp pick(state, entry) do
    if state.options.session_affinity,
      do: pick_for_session(state, entry),
      else: first_idle(state)
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
