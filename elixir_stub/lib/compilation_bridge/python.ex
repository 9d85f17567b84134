defmodule CompilationBridge.Python do
  @moduledoc """
  Which Python interpreter runs the workers, and how a worker is started.

  Order: the `:python` option, the `COMPILATION_BRIDGE_PYTHON` environment variable, the project's
  own virtual environment (`.venv/bin/python` in the current directory or its parent, which is where
  it is when this Mix project sits inside the compilation-bridge repository), then `python3` on PATH.
  Each worker runs `<python> -m compilation_bridge port`.
  """

  @env_var "COMPILATION_BRIDGE_PYTHON"

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
end
