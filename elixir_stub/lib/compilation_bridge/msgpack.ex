defmodule CompilationBridge.MsgPack do
  @moduledoc """
  A small MessagePack codec, enough for the port frames (and nothing else: no hex dependency).

  Encoding: `nil`, booleans, integers (-2^63 .. 2^64-1), floats (always 64-bit), binaries (valid
  UTF-8 becomes `str`, anything else `bin`), other atoms (as their name), lists and maps.
  Decoding accepts every MessagePack type; extension values decode to `{:ext, type, data}`.
  Both directions are pure functions; decoding never raises on bad input.
  """

  @type value ::
          nil
          | boolean()
          | integer()
          | float()
          | binary()
          | atom()
          | [value()]
          | %{optional(value()) => value()}
          | {:ext, integer(), binary()}

  # ------------------------------------------------------------------------------------ encoding

  @doc "Encodes `term` as iodata; raises `ArgumentError` for what MessagePack cannot carry."
  @spec encode!(value()) :: iodata()
  def encode!(nil), do: <<0xC0>>
  def encode!(false), do: <<0xC2>>
  def encode!(true), do: <<0xC3>>
  def encode!(int) when is_integer(int), do: encode_int(int)
  def encode!(float) when is_float(float), do: <<0xCB, float::float-64>>
  def encode!(atom) when is_atom(atom), do: encode_string(Atom.to_string(atom))

  def encode!(bin) when is_binary(bin) do
    if String.valid?(bin), do: encode_string(bin), else: encode_binary(bin)
  end

  def encode!(list) when is_list(list) do
    [array_header(length(list)) | Enum.map(list, &encode!/1)]
  end

  def encode!(map) when is_map(map) and not is_struct(map) do
    [map_header(map_size(map)) | Enum.map(map, fn {k, v} -> [encode!(k), encode!(v)] end)]
  end

  def encode!(other) do
    raise ArgumentError, "cannot encode #{inspect(other)} as MessagePack"
  end

  @doc "Encodes `term` to a binary: `{:ok, binary}` or `{:error, %ArgumentError{}}`."
  @spec encode(value()) :: {:ok, binary()} | {:error, Exception.t()}
  def encode(term) do
    {:ok, IO.iodata_to_binary(encode!(term))}
  rescue
    error in ArgumentError -> {:error, error}
  end

  defp encode_int(i) when i >= 0 and i < 128, do: <<i>>
  defp encode_int(i) when i < 0 and i >= -32, do: <<i::signed-8>>
  defp encode_int(i) when i >= 0 and i < 0x100, do: <<0xCC, i>>
  defp encode_int(i) when i >= 0 and i < 0x10000, do: <<0xCD, i::16>>
  defp encode_int(i) when i >= 0 and i < 0x100000000, do: <<0xCE, i::32>>
  defp encode_int(i) when i >= 0 and i < 0x10000000000000000, do: <<0xCF, i::64>>
  defp encode_int(i) when i >= 0, do: raise(ArgumentError, "integer #{i} does not fit in 64 bits")
  defp encode_int(i) when i >= -0x80, do: <<0xD0, i::signed-8>>
  defp encode_int(i) when i >= -0x8000, do: <<0xD1, i::signed-16>>
  defp encode_int(i) when i >= -0x80000000, do: <<0xD2, i::signed-32>>
  defp encode_int(i) when i >= -0x8000000000000000, do: <<0xD3, i::signed-64>>
  defp encode_int(i), do: raise(ArgumentError, "integer #{i} does not fit in 64 bits")

  defp encode_string(s) do
    size = byte_size(s)

    header =
      cond do
        size < 32 -> <<0b101::3, size::5>>
        size < 0x100 -> <<0xD9, size>>
        size < 0x10000 -> <<0xDA, size::16>>
        true -> <<0xDB, size::32>>
      end

    [header, s]
  end

  defp encode_binary(b) do
    size = byte_size(b)

    header =
      cond do
        size < 0x100 -> <<0xC4, size>>
        size < 0x10000 -> <<0xC5, size::16>>
        true -> <<0xC6, size::32>>
      end

    [header, b]
  end

  defp array_header(n) when n < 16, do: <<0b1001::4, n::4>>
  defp array_header(n) when n < 0x10000, do: <<0xDC, n::16>>
  defp array_header(n), do: <<0xDD, n::32>>

  defp map_header(n) when n < 16, do: <<0b1000::4, n::4>>
  defp map_header(n) when n < 0x10000, do: <<0xDE, n::16>>
  defp map_header(n), do: <<0xDF, n::32>>

  # ------------------------------------------------------------------------------------ decoding

  @doc """
  Decodes exactly one value that fills `binary`.

  Returns `{:error, reason}` for truncated input, reserved bytes, invalid UTF-8 in a `str` and
  trailing bytes.
  """
  @spec decode(binary()) :: {:ok, value()} | {:error, term()}
  def decode(binary) when is_binary(binary) do
    case value(binary) do
      {:ok, term, <<>>} -> {:ok, term}
      {:ok, _term, rest} -> {:error, {:trailing_bytes, byte_size(rest)}}
      {:error, _} = error -> error
    end
  end

  defp value(<<0xC0, rest::binary>>), do: {:ok, nil, rest}
  defp value(<<0xC2, rest::binary>>), do: {:ok, false, rest}
  defp value(<<0xC3, rest::binary>>), do: {:ok, true, rest}
  defp value(<<0::1, i::7, rest::binary>>), do: {:ok, i, rest}
  defp value(<<0b111::3, _::5, _::binary>> = b), do: neg_fixint(b)
  defp value(<<0xCC, i, rest::binary>>), do: {:ok, i, rest}
  defp value(<<0xCD, i::16, rest::binary>>), do: {:ok, i, rest}
  defp value(<<0xCE, i::32, rest::binary>>), do: {:ok, i, rest}
  defp value(<<0xCF, i::64, rest::binary>>), do: {:ok, i, rest}
  defp value(<<0xD0, i::signed-8, rest::binary>>), do: {:ok, i, rest}
  defp value(<<0xD1, i::signed-16, rest::binary>>), do: {:ok, i, rest}
  defp value(<<0xD2, i::signed-32, rest::binary>>), do: {:ok, i, rest}
  defp value(<<0xD3, i::signed-64, rest::binary>>), do: {:ok, i, rest}
  defp value(<<0xCA, f::binary-4, rest::binary>>), do: float(f, rest)
  defp value(<<0xCB, f::binary-8, rest::binary>>), do: float(f, rest)
  defp value(<<0b101::3, n::5, rest::binary>>), do: string(n, rest)
  defp value(<<0xD9, n, rest::binary>>), do: string(n, rest)
  defp value(<<0xDA, n::16, rest::binary>>), do: string(n, rest)
  defp value(<<0xDB, n::32, rest::binary>>), do: string(n, rest)
  defp value(<<0xC4, n, rest::binary>>), do: bytes(n, rest)
  defp value(<<0xC5, n::16, rest::binary>>), do: bytes(n, rest)
  defp value(<<0xC6, n::32, rest::binary>>), do: bytes(n, rest)
  defp value(<<0b1001::4, n::4, rest::binary>>), do: array(n, rest, [])
  defp value(<<0xDC, n::16, rest::binary>>), do: array(n, rest, [])
  defp value(<<0xDD, n::32, rest::binary>>), do: array(n, rest, [])
  defp value(<<0b1000::4, n::4, rest::binary>>), do: map(n, rest, [])
  defp value(<<0xDE, n::16, rest::binary>>), do: map(n, rest, [])
  defp value(<<0xDF, n::32, rest::binary>>), do: map(n, rest, [])
  defp value(<<0xD4, t::signed-8, d::binary-1, rest::binary>>), do: {:ok, {:ext, t, d}, rest}
  defp value(<<0xD5, t::signed-8, d::binary-2, rest::binary>>), do: {:ok, {:ext, t, d}, rest}
  defp value(<<0xD6, t::signed-8, d::binary-4, rest::binary>>), do: {:ok, {:ext, t, d}, rest}
  defp value(<<0xD7, t::signed-8, d::binary-8, rest::binary>>), do: {:ok, {:ext, t, d}, rest}
  defp value(<<0xD8, t::signed-8, d::binary-16, rest::binary>>), do: {:ok, {:ext, t, d}, rest}
  defp value(<<0xC7, n, t::signed-8, rest::binary>>), do: ext(n, t, rest)
  defp value(<<0xC8, n::16, t::signed-8, rest::binary>>), do: ext(n, t, rest)
  defp value(<<0xC9, n::32, t::signed-8, rest::binary>>), do: ext(n, t, rest)
  defp value(<<0xC1, _::binary>>), do: {:error, :reserved_byte}
  defp value(<<>>), do: {:error, :truncated}
  defp value(<<_, _::binary>>), do: {:error, :truncated}

  defp neg_fixint(<<i::signed-8, rest::binary>>), do: {:ok, i, rest}

  # MessagePack floats may be NaN or infinite, which the BEAM cannot hold: refuse them.
  defp float(<<f::float-32>>, rest), do: {:ok, f, rest}
  defp float(<<f::float-64>>, rest), do: {:ok, f, rest}
  defp float(_bits, _rest), do: {:error, :non_finite_float}

  defp string(n, rest) do
    case rest do
      <<s::binary-size(n), rest::binary>> ->
        if String.valid?(s), do: {:ok, s, rest}, else: {:error, :invalid_utf8}

      _ ->
        {:error, :truncated}
    end
  end

  defp bytes(n, rest) do
    case rest do
      <<b::binary-size(n), rest::binary>> -> {:ok, b, rest}
      _ -> {:error, :truncated}
    end
  end

  defp ext(n, type, rest) do
    case rest do
      <<d::binary-size(n), rest::binary>> -> {:ok, {:ext, type, d}, rest}
      _ -> {:error, :truncated}
    end
  end

  defp array(0, rest, acc), do: {:ok, Enum.reverse(acc), rest}

  defp array(n, rest, acc) do
    case value(rest) do
      {:ok, item, rest} -> array(n - 1, rest, [item | acc])
      error -> error
    end
  end

  defp map(0, rest, acc), do: {:ok, Map.new(acc), rest}

  defp map(n, rest, acc) do
    with {:ok, key, rest} <- value(rest),
         {:ok, val, rest} <- value(rest) do
      map(n - 1, rest, [{key, val} | acc])
    end
  end
end
