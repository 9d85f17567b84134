defmodule SnakeBridge.Types do
  @moduledoc """
  SnakeBridge's tagged value encoding (schema 1), both directions, as pure functions.

  Elixir to Python: JSON-shaped values pass as they are; tuples, `MapSet`s, atoms, non-UTF-8 binaries,
  special floats, dates and maps with non-string keys become `%{"__type__" => ..., "__schema__" => 1}`
  maps; refs become their wire shape. Python to Elixir: the same tags decode back, a `ref` becomes a
  `%SnakeBridge.Ref{}` and a `stream_ref` a `%SnakeBridge.StreamRef{}`.
  """

  alias SnakeBridge.{Ref, SerializationError, StreamRef}

  @schema 1
  # Atoms the decoder may create from `atom` tags; any other name stays a string.
  @atom_allowlist ~w(ok error)

  # ------------------------------------------------------------------------------------ encoding

  @doc "Encodes an argument; raises `SnakeBridge.SerializationError` for pids, ports, functions, ..."
  @spec encode(term()) :: term()
  def encode(value) when is_nil(value) or is_boolean(value) or is_number(value), do: value
  def encode(:infinity), do: special_float("infinity")
  def encode(:neg_infinity), do: special_float("neg_infinity")
  def encode(:nan), do: special_float("nan")
  def encode(atom) when is_atom(atom), do: tag("atom", %{"value" => Atom.to_string(atom)})

  def encode(bin) when is_binary(bin) do
    if String.valid?(bin), do: bin, else: tag("bytes", %{"data" => Base.encode64(bin)})
  end

  def encode(list) when is_list(list), do: Enum.map(list, &encode/1)
  def encode(tuple) when is_tuple(tuple), do: tag("tuple", elements(Tuple.to_list(tuple)))
  def encode(%Ref{} = ref), do: Ref.to_wire_format(ref)
  def encode(%StreamRef{} = ref), do: StreamRef.to_wire_format(ref)
  def encode(%MapSet{} = set), do: tag("set", elements(MapSet.to_list(set)))
  def encode(%DateTime{} = dt), do: tag("datetime", %{"value" => DateTime.to_iso8601(dt)})
  def encode(%Date{} = d), do: tag("date", %{"value" => Date.to_iso8601(d)})
  def encode(%Time{} = t), do: tag("time", %{"value" => Time.to_iso8601(t)})

  def encode(%{__struct__: module} = value),
    do: unencodable(value, "struct #{inspect(module)} has no SnakeBridge encoding")

  def encode(map) when is_map(map) do
    if Enum.all?(Map.keys(map), &string_key?/1) do
      Map.new(map, fn {k, v} -> {key_string(k), encode(v)} end)
    else
      tag("dict", %{"pairs" => Enum.map(map, fn {k, v} -> [encode(k), encode(v)] end)})
    end
  end

  def encode(other), do: unencodable(other, "#{inspect(other)} has no SnakeBridge encoding")

  defp string_key?(key), do: is_binary(key) or (is_atom(key) and key not in [nil, true, false])
  defp key_string(key) when is_atom(key), do: Atom.to_string(key)
  defp key_string(key), do: key
  defp elements(items), do: %{"elements" => Enum.map(items, &encode/1)}
  defp special_float(value), do: tag("special_float", %{"value" => value})
  defp tag(type, fields), do: Map.merge(%{"__type__" => type, "__schema__" => @schema}, fields)

  defp unencodable(value, message),
    do: raise(SerializationError, message: message, value: value)

  # ------------------------------------------------------------------------------------ decoding

  @doc "Decodes a result from the worker (tags to Elixir terms, refs to structs)."
  @spec decode(term()) :: term()
  def decode(list) when is_list(list), do: Enum.map(list, &decode/1)
  def decode(%{"__type__" => type} = map) when is_binary(type), do: decode_tag(type, map)
  def decode(map) when is_map(map), do: Map.new(map, fn {k, v} -> {k, decode(v)} end)
  def decode(value), do: value

  defp decode_tag("ref", map), do: Ref.from_wire_format(map)
  defp decode_tag("stream_ref", map), do: StreamRef.from_wire_format(map)
  defp decode_tag("tuple", map), do: map |> items() |> List.to_tuple()
  defp decode_tag("set", map), do: map |> items() |> MapSet.new()
  defp decode_tag("frozenset", map), do: map |> items() |> MapSet.new()
  defp decode_tag("special_float", %{"value" => v}), do: special_float_atom(v)
  defp decode_tag("complex", %{"real" => r, "imag" => i}), do: %{real: r, imag: i}

  defp decode_tag("atom", %{"value" => name}) when name in @atom_allowlist,
    do: String.to_atom(name)

  defp decode_tag("atom", %{"value" => name}), do: name
  defp decode_tag("stop_iteration", _map), do: :stop_iteration

  defp decode_tag("bytes", %{"data" => data} = map) do
    case Base.decode64(data) do
      {:ok, bytes} -> bytes
      :error -> Map.get(map, "data")
    end
  end

  defp decode_tag("dict", %{"pairs" => pairs}) when is_list(pairs),
    do: Map.new(pairs, fn [k, v] -> {decode(k), decode(v)} end)

  defp decode_tag("datetime", %{"value" => v}) do
    case DateTime.from_iso8601(v) do
      {:ok, dt, _offset} -> dt
      _ -> v
    end
  end

  defp decode_tag("date", %{"value" => v}), do: parsed(Date.from_iso8601(v), v)
  defp decode_tag("time", %{"value" => v}), do: parsed(Time.from_iso8601(v), v)
  defp decode_tag(_unknown, map), do: Map.new(map, fn {k, v} -> {k, decode(v)} end)

  defp items(map), do: Enum.map(map["elements"] || map["value"] || [], &decode/1)
  defp parsed({:ok, value}, _raw), do: value
  defp parsed(_error, raw), do: raw

  defp special_float_atom("infinity"), do: :infinity
  defp special_float_atom("neg_infinity"), do: :neg_infinity
  defp special_float_atom("nan"), do: :nan
  defp special_float_atom(other), do: other
end
