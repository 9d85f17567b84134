defmodule CompilationBridge.Worker.InFlightTest do
  @moduledoc "What the caller of the request in flight gets, without a Python process."
  use ExUnit.Case, async: true

  alias CompilationBridge.Worker.InFlight

  @from {:caller, :tag}

  test "a plain reply is the result" do
    assert InFlight.result(InFlight.new(1, @from, nil), {:ok, 42}) == {:ok, 42}
  end

  test "a stream's chunks are the result, in the order they came; its final reply only counts them" do
    in_flight =
      InFlight.new(2, @from, nil)
      |> InFlight.add_chunk("first")
      |> InFlight.add_chunk("second")

    assert InFlight.result(in_flight, {:ok, 2}) == {:ok, ["first", "second"]}
  end

  test "a Python error is tagged :python, chunks or not" do
    error = %{"type" => "ValueError", "message" => "bad"}

    assert InFlight.result(InFlight.new(3, @from, nil), {:error, error}) ==
             {:error, {:python, error}}

    in_flight = InFlight.new(4, @from, nil) |> InFlight.add_chunk(1)
    assert InFlight.result(in_flight, {:error, error}) == {:error, {:python, error}}
  end

  test "it remembers its caller and timer" do
    timer = make_ref()

    assert %InFlight{id: 5, from: @from, timer: ^timer, chunks: []} =
             InFlight.new(5, @from, timer)
  end
end
