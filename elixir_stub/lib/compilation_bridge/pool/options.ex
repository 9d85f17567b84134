defmodule CompilationBridge.Pool.Options do
  @moduledoc """
  The options of a pool, validated once with clear messages (`validate!/1` raises `ArgumentError`).

    * `:name` - the pool's name, an atom (default `:default`); refs remember it.
    * `:size` - number of Python workers (default: app env `:pool_size`, else 2).
    * `:python` - interpreter path (default: see `CompilationBridge.Python`).
    * `:command` - full `[executable | args]` instead of `:python` (tests use it for fake workers).
    * `:env` - extra environment for the workers, `[{"NAME", "value"}]`.
    * `:startup_timeout` - ms a worker may take to announce readiness (default 60 000).
    * `:queue_timeout` - ms a call may wait for a worker (default: app env `:queue_timeout`, 60 000).
    * `:max_frame_bytes` - largest frame either side accepts (default 16 MiB).
    * `:shutdown_grace` - ms a worker gets to exit after its port closes, before SIGKILL (default 2 000).
    * `:session_affinity` - keep each session on the worker that first served it (default `true`).
      Workers share refs through their ref store, so `false` is safe: every call then goes to the
      first free worker, which spreads one busy session over the whole pool.
  """

  alias CompilationBridge.Python

  @type t :: %{
          name: atom(),
          size: pos_integer(),
          command: [String.t()],
          env: [{String.t(), String.t()}],
          startup_timeout: pos_integer(),
          queue_timeout: pos_integer(),
          max_frame_bytes: pos_integer(),
          shutdown_grace: non_neg_integer(),
          session_affinity: boolean()
        }

  @known [
    :name,
    :size,
    :python,
    :command,
    :env,
    :startup_timeout,
    :queue_timeout,
    :max_frame_bytes,
    :shutdown_grace,
    :session_affinity
  ]

  @doc "Validates `opts` and fills in defaults."
  @spec validate!(keyword()) :: t()
  def validate!(opts) when is_list(opts) do
    unknown = Keyword.keys(opts) -- @known

    unknown == [] ||
      raise ArgumentError, "unknown pool options #{inspect(unknown)}; known: #{inspect(@known)}"

    max_frame = positive!(opts, :max_frame_bytes, 16 * 1024 * 1024)

    %{
      name: atom!(opts, :name, :default),
      size: positive!(opts, :size, app_env(:pool_size, 2)),
      command: command!(opts, max_frame),
      env: env!(opts),
      startup_timeout: positive!(opts, :startup_timeout, 60_000),
      queue_timeout: positive!(opts, :queue_timeout, app_env(:queue_timeout, 60_000)),
      max_frame_bytes: max_frame,
      shutdown_grace: non_negative!(opts, :shutdown_grace, 2_000),
      session_affinity: boolean!(opts, :session_affinity, true)
    }
  end

  def validate!(other),
    do: raise(ArgumentError, "pool options must be a keyword list, got #{inspect(other)}")

  defp app_env(key, default), do: Application.get_env(:compilation_bridge, key, default)

  defp atom!(opts, key, default) do
    case Keyword.get(opts, key, default) do
      value when is_atom(value) and value not in [nil, true, false] ->
        value

      value ->
        raise ArgumentError, "pool option #{inspect(key)} must be an atom, got #{inspect(value)}"
    end
  end

  defp boolean!(opts, key, default) do
    case Keyword.get(opts, key, default) do
      value when is_boolean(value) ->
        value

      value ->
        raise ArgumentError,
              "pool option #{inspect(key)} must be a boolean, got #{inspect(value)}"
    end
  end

  defp positive!(opts, key, default) do
    case Keyword.get(opts, key, default) do
      value when is_integer(value) and value > 0 ->
        value

      value ->
        raise ArgumentError,
              "pool option #{inspect(key)} must be a positive integer, got #{inspect(value)}"
    end
  end

  defp non_negative!(opts, key, default) do
    case Keyword.get(opts, key, default) do
      value when is_integer(value) and value >= 0 ->
        value

      value ->
        raise ArgumentError,
              "pool option #{inspect(key)} must be a non-negative integer, got #{inspect(value)}"
    end
  end

  defp command!(opts, max_frame) do
    case Keyword.fetch(opts, :command) do
      {:ok, [exe | args] = command} when is_binary(exe) ->
        Enum.all?(args, &is_binary/1) ||
          raise ArgumentError, "pool option :command must be a list of strings"

        command

      {:ok, other} ->
        raise ArgumentError,
              "pool option :command must be a non-empty list of strings, got #{inspect(other)}"

      :error ->
        python =
          Python.interpreter(Keyword.get(opts, :python)) ||
            raise ArgumentError,
                  "no Python interpreter found: set COMPILATION_BRIDGE_PYTHON or the pool option :python"

        [python | Python.worker_args(max_frame)]
    end
  end

  defp env!(opts) do
    env = Keyword.get(opts, :env, [])

    valid? =
      is_list(env) and Enum.all?(env, &match?({k, v} when is_binary(k) and is_binary(v), &1))

    valid? ||
      raise ArgumentError,
            "pool option :env must be a list of {name, value} strings, got #{inspect(env)}"

    env
  end
end
