defmodule SnakeBridge.Runtime do
  @moduledoc """
  Stand-in for SnakeBridge 0.16's runtime: what generated modules call.

  Each function builds the payload SnakeBridge builds (string keys, `protocol_version` 1, `args`,
  `kwargs`, `call_type`, `instance` ...), sends it through the runtime client
  (`config :snakebridge, :runtime_client`, default `CompilationBridge.Pool`) and returns
  `{:ok, decoded}` or `{:error, %Snakepit.Error{}}`.

  Options, as in SnakeBridge: `:__runtime__` (keyword: `:session_id`, `:pool_name`, `:timeout`,
  `:queue_timeout`), `:idempotent`, `:__args__` (extra positional arguments); every other key is a
  Python keyword argument.

  Sessions: `__runtime__[:session_id]`, else the ref's session, else the process's current session
  (`with_session/2`), else an automatic session per process, released when the process exits.
  """

  alias SnakeBridge.{Ref, SessionManager, StreamRef, Types}
  alias Snakepit.Error.PythonTranslation

  @call_tool "snakebridge.call"
  @stream_tool "snakebridge.stream"
  @protocol %{"protocol_version" => 1, "min_supported_version" => 1}
  @session_key :snakebridge_session_id
  @auto_key :snakebridge_auto_session

  @type opts :: keyword()
  @type result :: {:ok, term()} | {:error, Snakepit.Error.t()}

  # ------------------------------------------------------------------------------------ calls

  @doc "Calls a module function (`module` a generated module, or a dotted Python module path)."
  @spec call(module() | String.t(), atom() | String.t(), list(), opts()) :: result()
  def call(module, function, args \\ [], opts \\ [])

  def call(module_path, function, args, opts) when is_binary(module_path) do
    {args, kwargs, idempotent, runtime} = split(args, opts)

    payload =
      base(module_path, first_segment(module_path), function, args, kwargs, idempotent)
      |> Map.delete("python_module")
      |> Map.merge(%{"call_type" => "dynamic", "module_path" => module_path})

    run(@call_tool, payload, nil, runtime)
  end

  def call(module, function, args, opts) when is_atom(module) do
    {args, kwargs, idempotent, runtime} = split(args, opts)
    payload = base(python_module(module), library(module), function, args, kwargs, idempotent)
    run(@call_tool, payload, nil, runtime)
  end

  @doc "Constructs the generated module's Python class: `cls(*args, **kwargs)`."
  @spec call_class(module(), atom(), list(), opts()) :: result()
  def call_class(module, function, args \\ [], opts \\ []) do
    {args, kwargs, idempotent, runtime} = split(args, opts)

    payload =
      base(python_module(module), library(module), function, args, kwargs, idempotent)
      |> Map.merge(%{"call_type" => "class", "class" => python_class(module)})

    run(@call_tool, payload, nil, runtime)
  end

  @doc "Calls a method of the object behind `ref`."
  @spec call_method(Ref.t(), atom() | String.t(), list(), opts()) :: result()
  def call_method(%Ref{} = ref, function, args \\ [], opts \\ []) do
    {args, kwargs, idempotent, runtime} = split(args, opts)

    payload =
      base_for_ref(ref, function, args, kwargs, idempotent)
      |> Map.merge(%{"call_type" => "method", "instance" => Ref.to_wire_format(ref)})

    run(@call_tool, payload, ref, runtime)
  end

  @doc "Reads an attribute of the object behind `ref`."
  @spec get_attr(Ref.t(), atom() | String.t(), opts()) :: result()
  def get_attr(%Ref{} = ref, attr, opts \\ []) do
    {_args, _kwargs, idempotent, runtime} = split([], opts)

    payload =
      base_for_ref(ref, attr, [], %{}, idempotent)
      |> Map.merge(%{
        "call_type" => "get_attr",
        "instance" => Ref.to_wire_format(ref),
        "attr" => to_string(attr)
      })

    run(@call_tool, payload, ref, runtime)
  end

  @doc "Sets an attribute of the object behind `ref` (config fields only; the worker refuses others)."
  @spec set_attr(Ref.t(), atom() | String.t(), term(), opts()) :: result()
  def set_attr(%Ref{} = ref, attr, value, opts \\ []) do
    {_args, _kwargs, idempotent, runtime} = split([], opts)

    payload =
      base_for_ref(ref, attr, [Types.encode(value)], %{}, idempotent)
      |> Map.merge(%{
        "call_type" => "set_attr",
        "instance" => Ref.to_wire_format(ref),
        "attr" => to_string(attr)
      })

    run(@call_tool, payload, ref, runtime)
  end

  @doc "Reads a module attribute (for a generated class module: its Python module's attribute)."
  @spec get_module_attr(module() | String.t(), atom() | String.t(), opts()) :: result()
  def get_module_attr(module, attr, opts \\ []) do
    {_args, _kwargs, idempotent, runtime} = split([], opts)
    {python_module, library} = module_names(module)

    payload =
      base(python_module, library, attr, [], %{}, idempotent)
      |> Map.merge(%{"call_type" => "module_attr", "attr" => to_string(attr)})

    run(@call_tool, payload, nil, runtime)
  end

  @doc """
  Runs a streaming module function and returns its items as a list (the port delivers them as
  chunk frames before the final reply).
  """
  @spec stream(module(), atom() | String.t(), list(), opts()) :: result()
  def stream(module, function, args \\ [], opts \\ []) when is_atom(module) do
    {args, kwargs, idempotent, runtime} = split(args, opts)
    payload = base(python_module(module), library(module), function, args, kwargs, idempotent)
    run(@stream_tool, payload, nil, runtime)
  end

  @doc "Releases the object behind `ref` in its worker (idempotent)."
  @spec release_ref(Ref.t() | StreamRef.t(), opts()) :: :ok | {:error, Snakepit.Error.t()}
  def release_ref(ref, opts \\ []) do
    runtime = Keyword.get(opts, :__runtime__, [])
    wire = Types.encode(ref)
    session = Keyword.get(runtime, :session_id) || ref.session_id
    payload = Map.merge(@protocol, %{"ref" => wire, "session_id" => session})
    runtime = Keyword.put_new(runtime, :pool_name, ref.pool_name)

    with {:ok, _released} <- execute("snakebridge.release_ref", payload, session, runtime),
         do: :ok
  end

  @doc "Releases every object of `session_id` in its worker."
  @spec release_session(String.t(), opts()) :: :ok | {:error, Snakepit.Error.t()}
  def release_session(session_id, opts \\ []) when is_binary(session_id) do
    runtime = Keyword.get(opts, :__runtime__, [])
    payload = Map.put(@protocol, "session_id", session_id)

    with {:ok, _count} <- execute("snakebridge.release_session", payload, session_id, runtime),
         do: :ok
  end

  @doc """
  SnakeBridge's argument convention for optional parameters: when `opts` is empty and `args` is a
  keyword list, the caller meant options (`f(ref, x, mode: 3)`).
  """
  @spec normalize_args_opts(term(), keyword()) :: {list(), keyword()}
  def normalize_args_opts(args, []) when is_list(args) and args != [] do
    if Keyword.keyword?(args), do: {[], args}, else: {args, []}
  end

  def normalize_args_opts(args, opts), do: {List.wrap(args), opts}

  # ------------------------------------------------------------------------------------ sessions

  @doc "Runs `fun` with `session_id` as this process's current session."
  @spec with_session(String.t(), (() -> result)) :: result when result: term()
  def with_session(session_id, fun) when is_binary(session_id) and is_function(fun, 0) do
    previous = Process.put(@session_key, session_id)

    try do
      fun.()
    after
      if previous, do: Process.put(@session_key, previous), else: Process.delete(@session_key)
    end
  end

  @doc "This process's current session id (creating the automatic one if needed)."
  @spec current_session() :: String.t()
  def current_session, do: Process.get(@session_key) || auto_session()

  defp auto_session do
    case Process.get(@auto_key) do
      nil ->
        id = "auto_#{inspect(self())}_#{System.system_time(:millisecond)}"
        Process.put(@auto_key, id)
        id

      id ->
        id
    end
  end

  # The automatic session is released when this process exits: register it once per pool.
  defp register_auto_session(session, pool) do
    key = {@auto_key, :pools}
    pools = Process.get(key, MapSet.new())

    if session == Process.get(@auto_key) and not MapSet.member?(pools, pool) do
      :ok = SessionManager.register(session, self(), pool)
      Process.put(key, MapSet.put(pools, pool))
    end

    :ok
  end

  # ------------------------------------------------------------------------------------ plumbing

  defp split(args, opts) do
    runtime = Keyword.get(opts, :__runtime__, [])
    idempotent = Keyword.get(opts, :idempotent, false)
    extra = Keyword.get(opts, :__args__, [])

    kwargs =
      opts
      |> Keyword.drop([:__runtime__, :idempotent, :__args__])
      |> Map.new(fn {k, v} -> {to_string(k), Types.encode(v)} end)

    {Enum.map(List.wrap(args) ++ extra, &Types.encode/1), kwargs, idempotent, runtime}
  end

  defp base(python_module, library, function, args, kwargs, idempotent) do
    Map.merge(@protocol, %{
      "library" => library,
      "python_module" => python_module,
      "function" => to_string(function),
      "args" => args,
      "kwargs" => kwargs,
      "idempotent" => idempotent
    })
  end

  defp base_for_ref(ref, function, args, kwargs, idempotent) do
    python_module = ref.python_module || ref.library
    library = ref.library || first_segment(python_module || "")
    base(python_module, library, function, args, kwargs, idempotent)
  end

  defp run(tool, payload, ref, runtime) do
    session = Keyword.get(runtime, :session_id) || (ref && ref.session_id) || current_session()
    pool = Keyword.get(runtime, :pool_name) || (ref && ref.pool_name) || default_pool()
    register_auto_session(session, pool)
    runtime = Keyword.put(runtime, :pool_name, pool)

    with {:ok, result} <- execute(tool, Map.put(payload, "session_id", session), session, runtime) do
      {:ok, result |> Types.decode() |> attach_pool(pool)}
    end
  end

  defp execute(tool, payload, session, runtime) do
    pool = Keyword.get(runtime, :pool_name) || default_pool()

    opts =
      [pool_name: pool, session_id: session] ++ Keyword.take(runtime, [:timeout, :queue_timeout])

    metadata = %{command: tool, pool: CompilationBridge.Pool, pool_name: pool}

    tool
    |> client().execute(payload, opts)
    |> translate_python_error()
    |> Snakepit.Error.normalize_public_result(metadata)
  end

  defp translate_python_error({:error, {:python, payload}}),
    do: {:error, PythonTranslation.from_error_payload(payload)}

  defp translate_python_error(other), do: other

  defp attach_pool(%Ref{pool_name: nil} = ref, pool), do: %{ref | pool_name: pool}
  defp attach_pool(%StreamRef{pool_name: nil} = ref, pool), do: %{ref | pool_name: pool}
  defp attach_pool(list, pool) when is_list(list), do: Enum.map(list, &attach_pool(&1, pool))

  defp attach_pool(tuple, pool) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> attach_pool(pool) |> List.to_tuple()

  defp attach_pool(map, pool) when is_map(map) and not is_struct(map),
    do: Map.new(map, fn {k, v} -> {k, attach_pool(v, pool)} end)

  defp attach_pool(value, _pool), do: value

  defp client, do: Application.get_env(:snakebridge, :runtime_client, CompilationBridge.Pool)
  defp default_pool, do: Application.get_env(:compilation_bridge, :default_pool, :default)

  defp python_module(module) do
    if exported?(module, :__snakebridge_python_name__),
      do: module.__snakebridge_python_name__(),
      else: module |> Module.split() |> Enum.map_join(".", &Macro.underscore/1)
  end

  defp exported?(module, function) do
    Code.ensure_loaded?(module) and function_exported?(module, function, 0)
  end

  defp library(module) do
    if exported?(module, :__snakebridge_library__),
      do: module.__snakebridge_library__(),
      else: first_segment(python_module(module))
  end

  defp python_class(module) do
    if exported?(module, :__snakebridge_python_class__),
      do: module.__snakebridge_python_class__(),
      else: module |> Module.split() |> List.last()
  end

  defp module_names(path) when is_binary(path), do: {path, first_segment(path)}
  defp module_names(module) when is_atom(module), do: {python_module(module), library(module)}

  defp first_segment(path), do: path |> String.split(".") |> hd()
end
