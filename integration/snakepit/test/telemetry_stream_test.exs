defmodule RealClient.TelemetryStreamTest do
  @moduledoc """
  The worker's telemetry reaches Snakepit as Snakepit's own Python side sends it (docs/wire.md,
  "Telemetry"): each tool call becomes `[:snakepit, :python, :tool, :execution, :start]` and `:stop`
  events in the BEAM, with the tool, the operation and the call's correlation id, and a failed call an
  `:exception` event with the Python error's type. Snakepit 0.13 ends the stream after its open timeout
  (5 s by default); this pool sets a long one, as the README says a user who wants the events does.
  """
  use ExUnit.Case, async: false

  alias RealClient.Pool
  alias Vllm.Config.CompilationConfig, as: CC

  @moduletag timeout: 300_000
  @events for kind <- [:start, :stop, :exception],
              do: [:snakepit, :python, :tool, :execution, kind]

  setup_all do
    long_stream = [grpc_stream_open_timeout_ms: 600_000]
    {:ok, instance: Pool.start_isolated!("my_app_telemetry", 1, %{}, %{}, long_stream)}
  end

  setup do
    parent = self()
    id = "realclient-telemetry-#{System.unique_integer([:positive])}"

    forward = fn event, measurements, metadata, _ ->
      send(parent, {event, measurements, metadata})
    end

    :ok = :telemetry.attach_many(id, @events, forward, nil)
    on_exit(fn -> :telemetry.detach(id) end)
  end

  test "a call is a tool.execution start and stop in the BEAM, with its tool and operation" do
    {:ok, cc} = CC.new(nil, 3, nil, [])
    assert {:ok, 3} = CC.mode(cc)

    # Events of calls made before the stream opened arrive too (the worker buffers them), so wait for
    # this test's own: the one that read `mode`.
    assert_receive {[:snakepit, :python, :tool, :execution, :stop], %{duration: duration},
                    %{operation: "get_attr:vllm.config.mode"} = metadata},
                   60_000

    assert is_integer(duration) and duration > 0
    assert metadata.tool == "snakebridge.call" and is_binary(metadata.correlation_id)
  end

  test "a failed call is a tool.execution exception with the Python error's type" do
    assert {:error, _} = CC.new(nil, nil, nil, mode: 3)

    assert_receive {[:snakepit, :python, :tool, :execution, :exception], %{duration: _},
                    %{error_type: "ValidationError", operation: operation}},
                   60_000

    assert operation == "class:CompilationConfig.__init__"
  end
end
