defmodule CompilationBridge.Worker do
  @moduledoc """
  A process that owns one Python worker behind an Erlang port and runs one request at a time.

  Life cycle: the port is opened after `init/1` returns (so a pool starts without waiting for
  Python). The worker is then `:starting`: it waits for the `ready` event as an ordinary message,
  under a `:startup_timeout` timer, so shutdown, `:sys` calls and other messages are served
  meanwhile, and a request dispatched to it already is refused at once with
  `{:error, :worker_starting}`. Once ready (`:ready`) it registers with its pool. From then on the
  pool hands it one request at a time (`dispatch/5`); the reply goes straight to the caller and the
  worker tells the pool it is free again. The request in flight is a
  `CompilationBridge.Worker.InFlight`.

  Whatever goes wrong with the Python side ends this process, and its supervisor starts a fresh one:
  the Python process exits (crash, `kill -9`), a request runs past its timeout (the Python process
  is killed: it cannot be interrupted and its state is unknown), or a frame cannot be decoded. The
  caller of the request in flight gets `{:error, reason}` first. On shutdown the port is closed, which
  the Python side sees as end of input; if it has not exited after `:shutdown_grace`, it is killed.
  """

  use GenServer, restart: :permanent

  require Logger

  alias CompilationBridge.{Frame, Pool, Python}
  alias CompilationBridge.Worker.InFlight

  @typedoc "`:starting` until Python's `ready` event, then `:ready`."
  @type phase :: :starting | :ready

  @doc false
  def child_spec(opts) do
    %{
      id: {__MODULE__, Keyword.fetch!(opts, :index)},
      start: {__MODULE__, :start_link, [opts]},
      restart: :permanent,
      # Enough for terminate/2 to close the port and wait out the grace period.
      shutdown: Keyword.fetch!(opts, :options).shutdown_grace + 1_000
    }
  end

  @doc "Starts a worker for pool `opts[:pool]` (the pool manager's name) with the pool's options."
  @spec start_link(keyword()) :: GenServer.on_start()
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts)

  @doc """
  Sends a request; the answer goes to `from`: `{:worker_reply, result, worker}` for the Python's
  reply (`result` is `{:ok, term}` or `{:error, reason}`), `{:worker_failure, {:error, reason},
  worker}` when the worker stops under the request (its Python exited, timed out or sent a corrupt
  or fatal frame). `worker` is `%{worker_id: index, worker_os_pid: os_pid, worker_time: native}`,
  `worker_time` being the time from sending the request to the port to its answer (the port's
  replies carry no timing of their own). `CompilationBridge.Pool.execute/3` unwraps it.
  Only the pool calls this, and only when the worker is free; a worker that is still starting
  answers `{:error, :worker_starting}`, a busy one `{:error, :worker_busy}`, and a request that
  cannot be encoded `{:error, reason}`: those never reached the Python.
  """
  @spec dispatch(pid(), GenServer.from(), String.t(), map(), timeout()) :: :ok
  def dispatch(worker, from, tool, payload, timeout) do
    GenServer.cast(worker, {:dispatch, from, tool, payload, timeout})
  end

  # ------------------------------------------------------------------------------------ callbacks

  @impl true
  def init(opts) do
    Process.flag(:trap_exit, true)

    state = %{
      pool: Keyword.fetch!(opts, :pool),
      index: Keyword.fetch!(opts, :index),
      options: Keyword.fetch!(opts, :options),
      phase: :starting,
      start_timer: nil,
      port: nil,
      os_pid: nil,
      session: nil,
      next_id: 1,
      current: nil
    }

    # After failed starts the pool asks for a pause (growing with each failure), so a broken
    # interpreter neither makes the supervisor spin nor floods the log.
    case Pool.start_delay(state.pool, state.index) do
      0 -> {:ok, state, {:continue, :open}}
      delay -> {:ok, state, {:continue, {:open_after, delay}}}
    end
  end

  @impl true
  def handle_continue({:open_after, delay}, state) do
    Process.send_after(self(), :open, delay)
    {:noreply, state}
  end

  def handle_continue(:open, state), do: open(state)

  # The port is opened and the `ready` event awaited in handle_info/2, never in a blocking receive:
  # a worker that waits for Python must still obey its supervisor and answer system messages.
  defp open(state) do
    case open_port(state.options) do
      {:ok, port} ->
        timer = Process.send_after(self(), :startup_timeout, state.options.startup_timeout)
        {:noreply, %{state | port: port, os_pid: os_pid_of(port), start_timer: timer}}

      {:error, reason} ->
        start_failed(state, reason)
    end
  end

  defp ready(state, ready) do
    Process.cancel_timer(state.start_timer)
    # The port's own view of the OS pid: the process we must kill, whatever the frame claims.
    os_pid = state.os_pid || ready["pid"]
    session = "port_worker_#{state.index}_#{System.unique_integer([:positive])}"
    Pool.register(state.pool, state.index, self(), os_pid)

    {:noreply, %{state | phase: :ready, start_timer: nil, os_pid: os_pid, session: session}}
  end

  # The pool hears why (it answers waiting callers with it, and logs it); the supervisor restarts us.
  defp start_failed(state, reason) do
    Pool.start_failed(state.pool, state.index, Python.diagnose(reason, state.options))
    {:stop, {:shutdown, {:startup_failed, reason}}, state}
  end

  @impl true
  # Only a caller that bypasses the pool can get here: the pool knows a worker once it is ready.
  def handle_cast({:dispatch, from, _tool, _payload, _timeout}, %{phase: :starting} = state) do
    GenServer.reply(from, {:error, :worker_starting})
    {:noreply, state}
  end

  def handle_cast({:dispatch, from, tool, payload, timeout}, %{current: nil} = state) do
    id = state.next_id

    case encode_request(id, tool, payload, state.session, state.options.max_frame_bytes) do
      {:ok, body} ->
        sent_at = System.monotonic_time()
        Port.command(state.port, body)

        timer =
          if timeout != :infinity, do: Process.send_after(self(), {:request_timeout, id}, timeout)

        {:noreply, %{state | next_id: id + 1, current: InFlight.new(id, from, timer, sent_at)}}

      {:error, reason} ->
        # Nothing was sent: the worker is still free.
        GenServer.reply(from, {:error, reason})
        Pool.checkin(state.pool, state.index)
        {:noreply, state}
    end
  end

  # The pool never sends a request to a busy worker; if one arrives anyway it is refused, not queued.
  def handle_cast({:dispatch, from, _tool, _payload, _timeout}, state) do
    GenServer.reply(from, {:error, :worker_busy})
    {:noreply, state}
  end

  @impl true
  def handle_info({port, {:data, body}}, %{port: port, phase: :starting} = state) do
    case Frame.decode(body) do
      {:ready, ready} -> ready(state, ready)
      other -> state |> abandon() |> start_failed({:unexpected_first_frame, other})
    end
  end

  def handle_info({port, {:data, body}}, %{port: port} = state) do
    body |> Frame.decode() |> handle_frame(state)
  end

  def handle_info({port, {:exit_status, status}}, %{port: port, phase: :starting} = state) do
    start_failed(%{state | port: nil}, {:exit_status, status})
  end

  def handle_info(:startup_timeout, %{phase: :starting} = state) do
    state |> abandon() |> start_failed(:startup_timeout)
  end

  def handle_info({port, {:exit_status, status}}, %{port: port} = state) do
    Logger.warning("compilation-bridge worker #{state.index} exited with status #{status}")
    state = stopping(%{state | port: nil}, {:error, {:worker_exit, {:exit_status, status}}})
    {:stop, {:shutdown, {:exit_status, status}}, state}
  end

  def handle_info({:request_timeout, id}, %{current: %{id: id}} = state) do
    Logger.warning(
      "compilation-bridge worker #{state.index}: request #{id} timed out; replacing the worker"
    )

    {:stop, {:shutdown, :request_timeout},
     state |> abandon() |> stopping({:error, :worker_timeout})}
  end

  def handle_info({:request_timeout, _stale}, state), do: {:noreply, state}
  def handle_info(:open, %{port: nil} = state), do: open(state)
  def handle_info({:EXIT, port, _reason}, %{port: port} = state), do: {:noreply, state}
  def handle_info({:EXIT, _pid, reason}, state), do: {:stop, reason, state}
  def handle_info(_other, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, state) do
    if state.port, do: close_and_wait(state)
    :ok
  end

  # ------------------------------------------------------------------------------------ frames

  defp handle_frame({:reply, id, result}, %{current: %InFlight{id: id} = current} = state) do
    {:noreply, finish(state, InFlight.result(current, result))}
  end

  # A frame the Python side could not read is answered without an id: it belongs to our request.
  defp handle_frame({:reply, nil, {:error, error}}, %{current: %{}} = state) do
    {:noreply, finish(state, {:error, {:python, error}})}
  end

  defp handle_frame({:chunk, id, item}, %{current: %InFlight{id: id} = current} = state) do
    {:noreply, %{state | current: InFlight.add_chunk(current, item)}}
  end

  defp handle_frame({:fatal, error}, state) do
    Logger.error(
      "compilation-bridge worker #{state.index} stopped reading: #{inspect(error["message"])}"
    )

    {:stop, {:shutdown, :fatal_frame}, stopping(state, {:error, {:python, error}})}
  end

  defp handle_frame(other, state) do
    Logger.error(
      "compilation-bridge worker #{state.index} sent a corrupt frame: #{inspect(other, limit: 20)}"
    )

    {:stop, {:shutdown, :corrupt_frame},
     state |> abandon() |> stopping({:error, {:corrupt_frame, other}})}
  end

  # The request is answered and the worker is free for the next one.
  defp finish(state, result) do
    state = answer(state, :worker_reply, result)
    Pool.checkin(state.pool, state.index)
    state
  end

  # The last answer of a worker about to stop: the pool forgets it now instead of at its :DOWN, so
  # it never hands queued work to a worker that cannot run it.
  defp stopping(state, result) do
    state = answer(state, :worker_failure, result)
    Pool.retire(state.pool, state.index)
    state
  end

  defp answer(%{current: nil} = state, _outcome, _result), do: state

  defp answer(%{current: current} = state, outcome, result) do
    if current.timer, do: Process.cancel_timer(current.timer)
    worker_time = System.monotonic_time() - current.sent_at
    worker = %{worker_id: state.index, worker_os_pid: state.os_pid, worker_time: worker_time}
    GenServer.reply(current.from, {outcome, result, worker})
    %{state | current: nil}
  end

  # ------------------------------------------------------------------------------------ the port

  # A frame over the limit would make the Python side stop reading (it cannot skip it safely), so it
  # is refused here and the worker stays usable.
  defp encode_request(id, tool, payload, session, max_bytes) do
    body = Frame.request!(id, tool, payload, session)

    if byte_size(body) <= max_bytes,
      do: {:ok, body},
      else: {:error, {:frame_too_large, byte_size(body), max_bytes}}
  rescue
    error in ArgumentError -> {:error, {:unencodable, Exception.message(error)}}
  end

  defp open_port(options) do
    [exe | args] = options.command

    port =
      Port.open({:spawn_executable, exe}, [
        {:packet, 4},
        {:args, args},
        {:env,
         Enum.map(options.env, fn {k, v} -> {String.to_charlist(k), String.to_charlist(v)} end)},
        :binary,
        :exit_status,
        :use_stdio
      ])

    {:ok, port}
  rescue
    error in ErlangError -> {:error, {:cannot_spawn, exe_name(options), error.original}}
  end

  defp os_pid_of(port) do
    case Port.info(port, :os_pid) do
      {:os_pid, os_pid} -> os_pid
      nil -> nil
    end
  end

  defp exe_name(options), do: hd(options.command)

  defp close_and_wait(state) do
    close_quietly(state.port)
    port = state.port

    receive do
      {^port, {:exit_status, _status}} -> :ok
    after
      state.options.shutdown_grace -> kill(state)
    end
  end

  # Kills the Python process and forgets the port, so terminate/2 has nothing left to wait for.
  defp abandon(state) do
    kill(state)
    close_quietly(state.port)
    %{state | port: nil}
  end

  defp close_quietly(port) do
    Port.close(port)
  rescue
    ArgumentError -> :ok
  end

  # SIGKILL by OS pid: closing the port is not enough for a Python that is busy or hung.
  defp kill(%{os_pid: os_pid}) when is_integer(os_pid) do
    System.cmd("kill", ["-KILL", Integer.to_string(os_pid)], stderr_to_stdout: true)
    :ok
  end

  defp kill(_state), do: :ok
end
