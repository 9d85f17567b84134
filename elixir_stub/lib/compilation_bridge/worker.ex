defmodule CompilationBridge.Worker do
  @moduledoc """
  A process that owns one Python worker behind an Erlang port and runs one request at a time.

  Life cycle: the port is opened after `init/1` returns (so a pool starts without waiting for
  Python), the worker waits for the `ready` event, then registers with its pool. From then on the
  pool hands it one request at a time (`dispatch/5`); the reply goes straight to the caller and the
  worker tells the pool it is free again.

  Whatever goes wrong with the Python side ends this process, and its supervisor starts a fresh one:
  the Python process exits (crash, `kill -9`), a request runs past its timeout (the Python process
  is killed: it cannot be interrupted and its state is unknown), or a frame cannot be decoded. The
  caller of the request in flight gets `{:error, reason}` first. On shutdown the port is closed, which
  the Python side sees as end of input; if it has not exited after `:shutdown_grace`, it is killed.
  """

  use GenServer, restart: :permanent

  require Logger

  alias CompilationBridge.{Frame, Pool}

  # How long the diagnosis of a Python that did not start may take (one `python -c "import ..."`).
  @diagnosis_timeout 30_000

  @type request :: %{
          id: non_neg_integer(),
          from: GenServer.from(),
          timer: reference(),
          chunks: list()
        }

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
  Sends a request; the reply (`{:ok, result}` or `{:error, reason}`) goes to `from`.
  Only the pool calls this, and only when the worker is free.
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

  defp open(state) do
    with {:ok, port} <- open_port(state.options),
         {:ok, ready} <- await_ready(port, state.options.startup_timeout) do
      # The port's own view of the OS pid: the process we must kill, whatever the frame claims.
      os_pid = os_pid_of(port) || ready["pid"]
      session = "port_worker_#{state.index}_#{System.unique_integer([:positive])}"
      Pool.register(state.pool, state.index, self(), os_pid)
      {:noreply, %{state | port: port, os_pid: os_pid, session: session}}
    else
      {:error, reason, port} ->
        abandon(%{state | port: port, os_pid: os_pid_of(port)})
        start_failed(state, reason)

      {:error, reason} ->
        start_failed(state, reason)
    end
  end

  # The pool hears why (it answers waiting callers with it, and logs it); the supervisor restarts us.
  defp start_failed(state, reason) do
    Pool.start_failed(state.pool, state.index, diagnose(reason, state.options))
    {:stop, {:shutdown, {:startup_failed, reason}}, state}
  end

  @doc false
  # A cause a person can act on: Python's own error where the interpreter ran at all.
  @spec diagnose(term(), map()) :: String.t()
  def diagnose({:cannot_spawn, exe, :enoent}, _options), do: "#{exe}: no such executable"

  def diagnose({:cannot_spawn, exe, reason}, _options),
    do: "cannot run #{exe}: #{inspect(reason)}"

  def diagnose({:exit_status, status}, options) do
    case python_error(options) do
      nil -> "the worker exited with status #{status} before it was ready"
      error -> "the worker exited with status #{status} before it was ready: #{error}"
    end
  end

  def diagnose(:startup_timeout, options),
    do: "the worker was not ready within #{options.startup_timeout} ms"

  def diagnose(other, _options), do: "the worker did not start: #{inspect(other, limit: 20)}"

  # The last line of what the interpreter says when asked to import the worker (a traceback's last
  # line is the exception), or nil when that import works or the command is not a Python worker.
  defp python_error(%{command: [exe | args]}) do
    if "compilation_bridge" in args do
      task =
        Task.async(fn ->
          System.cmd(exe, ["-c", "import compilation_bridge.transport.port"],
            stderr_to_stdout: true
          )
        end)

      case Task.yield(task, @diagnosis_timeout) || Task.shutdown(task, :brutal_kill) do
        {:ok, {output, status}} when status != 0 -> last_line(output)
        _ -> nil
      end
    end
  rescue
    ErlangError -> nil
  end

  defp last_line(output) do
    output |> String.split("\n", trim: true) |> List.last()
  end

  @impl true
  def handle_cast({:dispatch, from, tool, payload, timeout}, %{current: nil} = state) do
    id = state.next_id

    case encode_request(id, tool, payload, state.session, state.options.max_frame_bytes) do
      {:ok, body} ->
        Port.command(state.port, body)

        timer =
          if timeout != :infinity, do: Process.send_after(self(), {:request_timeout, id}, timeout)

        current = %{id: id, from: from, timer: timer, chunks: []}
        {:noreply, %{state | next_id: id + 1, current: current}}

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
  def handle_info({port, {:data, body}}, %{port: port} = state) do
    body |> Frame.decode() |> handle_frame(state)
  end

  def handle_info({port, {:exit_status, status}}, %{port: port} = state) do
    Logger.warning("compilation-bridge worker #{state.index} exited with status #{status}")
    state = finish(%{state | port: nil}, {:error, {:worker_exit, {:exit_status, status}}})
    {:stop, {:shutdown, {:exit_status, status}}, state}
  end

  def handle_info({:request_timeout, id}, %{current: %{id: id}} = state) do
    Logger.warning(
      "compilation-bridge worker #{state.index}: request #{id} timed out; replacing the worker"
    )

    {:stop, {:shutdown, :request_timeout},
     state |> abandon() |> finish({:error, :worker_timeout})}
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

  defp handle_frame({:reply, id, result}, %{current: %{id: id}} = state) do
    {:noreply, finish(state, translate(result, state.current))}
  end

  # A frame the Python side could not read is answered without an id: it belongs to our request.
  defp handle_frame({:reply, nil, {:error, error}}, %{current: %{}} = state) do
    {:noreply, finish(state, {:error, {:python, error}})}
  end

  defp handle_frame({:chunk, id, item}, %{current: %{id: id} = current} = state) do
    {:noreply, %{state | current: %{current | chunks: [item | current.chunks]}}}
  end

  defp handle_frame({:fatal, error}, state) do
    Logger.error(
      "compilation-bridge worker #{state.index} stopped reading: #{inspect(error["message"])}"
    )

    {:stop, {:shutdown, :fatal_frame}, finish(state, {:error, {:python, error}})}
  end

  defp handle_frame(other, state) do
    Logger.error(
      "compilation-bridge worker #{state.index} sent a corrupt frame: #{inspect(other, limit: 20)}"
    )

    {:stop, {:shutdown, :corrupt_frame},
     state |> abandon() |> finish({:error, {:corrupt_frame, other}})}
  end

  # A stream's chunks are the result; its final reply only counts them.
  defp translate({:ok, _count}, %{chunks: [_ | _] = chunks}), do: {:ok, Enum.reverse(chunks)}
  defp translate({:ok, result}, _current), do: {:ok, result}
  defp translate({:error, error}, _current), do: {:error, {:python, error}}

  defp finish(%{current: nil} = state, _result), do: state

  defp finish(%{current: current} = state, result) do
    if current.timer, do: Process.cancel_timer(current.timer)
    GenServer.reply(current.from, result)
    # The pool learns the worker is free before it can learn that it stopped (same sender).
    Pool.checkin(state.pool, state.index)
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

  defp await_ready(port, timeout) do
    receive do
      {^port, {:data, body}} ->
        case Frame.decode(body) do
          {:ready, ready} -> {:ok, ready}
          other -> {:error, {:unexpected_first_frame, other}, port}
        end

      {^port, {:exit_status, status}} ->
        {:error, {:exit_status, status}}
    after
      timeout -> {:error, :startup_timeout, port}
    end
  end

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
