defmodule CompilationBridge.Python do
  @moduledoc """
  Which Python interpreter runs the workers, how a worker is started, and why one did not start.

  Order: the `:python` option, the `COMPILATION_BRIDGE_PYTHON` environment variable, the project's
  own virtual environment (`.venv/bin/python` in the current directory or its parent, which is where
  it is when this Mix project sits inside the compilation-bridge repository), then `python3` on PATH.
  Each worker runs `<python> -m compilation_bridge port`.
  """

  @env_var "COMPILATION_BRIDGE_PYTHON"
  # How long the diagnosis of a Python that did not start may take (one `python -c "import ..."`).
  @diagnosis_timeout 30_000

  @doc """
  The interpreter to use. An explicit choice (option or environment) is taken as given, so that a
  wrong path fails loudly when the worker starts instead of silently using another Python.
  """
  @spec interpreter(String.t() | nil) :: String.t() | nil
  def interpreter(explicit \\ nil) do
    env = System.get_env(@env_var)

    cond do
      present?(explicit) -> resolve(explicit)
      present?(env) -> resolve(env)
      venv = Enum.find(venv_candidates(), &File.regular?/1) -> venv
      true -> System.find_executable("python3")
    end
  end

  @doc "The arguments that make the interpreter a port worker."
  @spec worker_args(pos_integer()) :: [String.t()]
  def worker_args(max_frame_bytes) do
    ["-m", "compilation_bridge", "port", "--max-frame-bytes", Integer.to_string(max_frame_bytes)]
  end

  defp venv_candidates do
    cwd = File.cwd!()
    [Path.join(cwd, ".venv/bin/python"), Path.join(cwd, "../.venv/bin/python")]
  end

  defp present?(value), do: is_binary(value) and value != ""

  # A name without a slash is looked up on PATH, as a shell would; a path is kept (not resolved:
  # a virtual environment's python is a symlink that must be run through its own path).
  defp resolve(name) do
    if String.contains?(name, "/"),
      do: Path.expand(name),
      else: System.find_executable(name) || name
  end

  @doc """
  Why a worker did not start, as a cause a person can act on: Python's own error where the
  interpreter ran at all (the worker hands `reason`, the pool answers callers with the text).
  """
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
end
