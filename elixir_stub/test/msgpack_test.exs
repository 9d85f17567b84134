defmodule CompilationBridge.MsgPackTest do
  use ExUnit.Case, async: true

  alias CompilationBridge.{Frame, MsgPack}

  defp roundtrip(term), do: term |> MsgPack.encode!() |> IO.iodata_to_binary() |> MsgPack.decode()

  test "values round-trip across every size class" do
    ints = [0, 127, 128, 255, 256, 65_535, 65_536, 4_294_967_295, 4_294_967_296, 2 ** 64 - 1]

    negatives = [
      -1,
      -32,
      -33,
      -128,
      -129,
      -32_768,
      -32_769,
      -2_147_483_648,
      -2_147_483_649,
      -(2 ** 63)
    ]

    for term <-
          ints ++
            negatives ++ [nil, true, false, 1.5, -0.25, "", "é", String.duplicate("x", 70_000)] do
      assert roundtrip(term) == {:ok, term}
    end

    assert roundtrip([1, [2, %{"a" => [nil]}]]) == {:ok, [1, [2, %{"a" => [nil]}]]}
    assert roundtrip(Map.new(1..20, &{"k#{&1}", &1})) == {:ok, Map.new(1..20, &{"k#{&1}", &1})}
    assert roundtrip(Enum.to_list(1..20)) == {:ok, Enum.to_list(1..20)}
    assert roundtrip(:atom) == {:ok, "atom"}
    assert roundtrip(<<255, 0>>) == {:ok, <<255, 0>>}
  end

  test "what cannot be encoded raises or returns an error" do
    assert_raise ArgumentError, fn -> MsgPack.encode!(2 ** 64) end
    assert {:error, %ArgumentError{}} = MsgPack.encode({:tuple})
  end

  test "bad input decodes to errors, never raises" do
    assert MsgPack.decode(<<0xC1>>) == {:error, :reserved_byte}
    assert MsgPack.decode(<<0xA5, "ab">>) == {:error, :truncated}
    assert MsgPack.decode(<<0xA2, 0xFF, 0xFE>>) == {:error, :invalid_utf8}
    assert MsgPack.decode(<<0x01, 0x02>>) == {:error, {:trailing_bytes, 1}}
    assert MsgPack.decode(<<0xDD, 0xFF, 0xFF, 0xFF, 0xFF>>) == {:error, :truncated}
    assert MsgPack.decode(<<0xCB, 0x7F, 0xF0, 0, 0, 0, 0, 0, 0>>) == {:error, :non_finite_float}
    assert MsgPack.decode(<<>>) == {:error, :truncated}
    assert MsgPack.decode(<<0xD4, 1, 2>>) == {:ok, {:ext, 1, <<2>>}}
  end

  test "frames classify the worker's messages" do
    body = fn map -> map |> MsgPack.encode!() |> IO.iodata_to_binary() end
    assert {:ready, %{"pid" => 1}} = Frame.decode(body.(%{"event" => "ready", "pid" => 1}))

    assert {:reply, 3, {:ok, [1]}} =
             Frame.decode(body.(%{"id" => 3, "ok" => true, "result" => [1]}))

    assert {:reply, nil, {:error, %{}}} =
             Frame.decode(body.(%{"id" => nil, "ok" => false, "error" => %{}}))

    assert {:chunk, 3, "x"} = Frame.decode(body.(%{"id" => 3, "chunk" => "x"}))
    assert {:corrupt, {:not_a_map, [1]}} = Frame.decode(body.([1]))
    assert {:corrupt, {:unexpected_message, %{"x" => 1}}} = Frame.decode(body.(%{"x" => 1}))
    assert {:corrupt, :reserved_byte} = Frame.decode(<<0xC1>>)
  end
end
