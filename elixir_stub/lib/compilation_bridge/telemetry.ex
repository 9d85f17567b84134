defmodule CompilationBridge.Telemetry do
  @moduledoc """
  The `:telemetry` library's API for the stub's own events, without the hex package.

  Handlers have `:telemetry`'s signature, `fun(event, measurements, metadata, config)`, and run in
  the process that emits the event (for the pool's calls: the caller's). A handler that raises,
  throws or exits is detached and logged, as `:telemetry` does; the emitting call goes on. The
  handlers live in one `:persistent_term` (attaching and detaching are rare; reading is free), so
  an event nobody listens to costs one lookup.

  When the real `:telemetry` module is loaded, every event is also passed to
  `:telemetry.execute/3`, so a program that uses the library sees the stub's events with its own
  handlers (a program that attached one through `:telemetry` has loaded it).

  Spans follow `:telemetry.span/3`: `prefix ++ [:start]` with `%{system_time, monotonic_time}`,
  then `prefix ++ [:stop]` with `%{duration, monotonic_time}` or `prefix ++ [:exception]` with the
  same measurements and `kind`, `reason`, `stacktrace` in the metadata; all three carry the start
  metadata and one `telemetry_span_context` reference. `start/2`, `stop/3` and `exception/6` are the
  pieces of `span/3`, for a caller whose failures arrive as values rather than raises.
  """

  require Logger

  @compile {:no_warn_undefined, :telemetry}
  @key __MODULE__

  @type event_name :: [atom(), ...]
  @type handler_id :: term()
  @type handler_function :: (event_name(), map(), map(), term() -> any())
  @typedoc "A started span (nil when nobody listens to it)."
  @opaque span :: {event_name(), integer(), map()} | nil

  @doc "Attaches `fun` to `event` under `id` (unique across all events)."
  @spec attach(handler_id(), event_name(), handler_function(), term()) ::
          :ok | {:error, :already_exists}
  def attach(id, event, fun, config), do: attach_many(id, [event], fun, config)

  @doc "Attaches `fun` to each of `events` under one `id`."
  @spec attach_many(handler_id(), [event_name()], handler_function(), term()) ::
          :ok | {:error, :already_exists}
  def attach_many(id, events, fun, config) when is_list(events) and is_function(fun, 4) do
    update(fn handlers ->
      if attached?(handlers, id) do
        {{:error, :already_exists}, handlers}
      else
        handler = {id, fun, config}

        {:ok,
         Enum.reduce(events, handlers, &Map.update(&2, &1, [handler], fn l -> l ++ [handler] end))}
      end
    end)
  end

  @doc "Detaches the handler `id` from every event."
  @spec detach(handler_id()) :: :ok | {:error, :not_found}
  def detach(id) do
    update(fn handlers ->
      if attached?(handlers, id) do
        handlers = Map.new(handlers, fn {event, list} -> {event, List.keydelete(list, id, 0)} end)
        {:ok, Map.reject(handlers, fn {_event, list} -> list == [] end)}
      else
        {{:error, :not_found}, handlers}
      end
    end)
  end

  @doc "Runs the handlers attached to `event` (and `:telemetry.execute/3` when it is loaded)."
  @spec execute(event_name(), map(), map()) :: :ok
  def execute(event, measurements, metadata \\ %{}) do
    case :persistent_term.get(@key, %{}) do
      %{^event => list} -> Enum.each(list, &invoke(&1, event, measurements, metadata))
      _none -> :ok
    end

    if forwarding?(), do: :telemetry.execute(event, measurements, metadata)
    :ok
  end

  @doc """
  Runs `fun` inside a span, as `:telemetry.span/3`: `fun` returns `{result, stop_metadata}` or
  `{result, extra_measurements, stop_metadata}`, and a raise, throw or exit is reported as
  `:exception` and re-raised.
  """
  @spec span(event_name(), map(), (() -> {term(), map()} | {term(), map(), map()})) :: term()
  def span(prefix, metadata, fun) do
    span = start(prefix, metadata)

    try do
      fun.()
    catch
      kind, reason ->
        exception(span, kind, reason, __STACKTRACE__)
        :erlang.raise(kind, reason, __STACKTRACE__)
    else
      {result, stop_metadata} ->
        stop(span, %{}, stop_metadata)
        result

      {result, extra, stop_metadata} ->
        stop(span, extra, stop_metadata)
        result
    end
  end

  @doc """
  Emits `prefix ++ [:start]` and returns the span, or nil (and emits nothing) when no handler listens
  to any event of the span. `metadata` may be a function, called only when someone listens.
  """
  @spec start(event_name(), map() | (() -> map())) :: span()
  def start(prefix, metadata) do
    if listening?(prefix) do
      metadata = if is_function(metadata, 0), do: metadata.(), else: metadata
      metadata = Map.put_new(metadata, :telemetry_span_context, make_ref())
      now = System.monotonic_time()

      execute(
        prefix ++ [:start],
        %{system_time: System.system_time(), monotonic_time: now},
        metadata
      )

      {prefix, now, metadata}
    end
  end

  @doc "Emits `:stop` for `span`: `measurements` and `metadata` are added to the span's own."
  @spec stop(span(), map(), map()) :: :ok
  def stop(nil, _measurements, _metadata), do: :ok

  def stop({prefix, started, start_metadata}, measurements, metadata) do
    emit(prefix ++ [:stop], started, measurements, Map.merge(start_metadata, metadata))
  end

  @doc "Emits `:exception` for `span` with `kind`, `reason` and `stacktrace` in the metadata."
  @spec exception(span(), atom(), term(), list(), map(), map()) :: :ok
  def exception(span, kind, reason, stacktrace, measurements \\ %{}, metadata \\ %{})
  def exception(nil, _kind, _reason, _stacktrace, _measurements, _metadata), do: :ok

  def exception({prefix, started, start_metadata}, kind, reason, stacktrace, measurements, meta) do
    metadata =
      start_metadata
      |> Map.merge(meta)
      |> Map.merge(%{kind: kind, reason: reason, stacktrace: stacktrace})

    emit(prefix ++ [:exception], started, measurements, metadata)
  end

  # ------------------------------------------------------------------------------------ internals

  defp emit(event, started, measurements, metadata) do
    now = System.monotonic_time()

    execute(
      event,
      Map.merge(measurements, %{duration: now - started, monotonic_time: now}),
      metadata
    )
  end

  defp listening?(prefix) do
    forwarding?() or
      case :persistent_term.get(@key, %{}) do
        none when map_size(none) == 0 ->
          false

        handlers ->
          Enum.any?([:start, :stop, :exception], &Map.has_key?(handlers, prefix ++ [&1]))
      end
  end

  # A BIF that loads nothing: true once some code has loaded the real library.
  defp forwarding?, do: function_exported?(:telemetry, :execute, 3)

  defp invoke({id, fun, config}, event, measurements, metadata) do
    fun.(event, measurements, metadata, config)
  catch
    kind, reason ->
      detach(id)

      Logger.error(
        "Handler #{inspect(id)} has failed and has been detached. " <>
          Exception.format(kind, reason, __STACKTRACE__)
      )
  end

  defp attached?(handlers, id),
    do: Enum.any?(handlers, fn {_event, list} -> List.keymember?(list, id, 0) end)

  # Writers take a lock, so concurrent attaches cannot lose each other's handlers.
  defp update(fun) do
    :global.trans(
      {@key, self()},
      fn ->
        {reply, handlers} = fun.(:persistent_term.get(@key, %{}))
        :persistent_term.put(@key, handlers)
        reply
      end,
      [node()]
    )
  end
end
