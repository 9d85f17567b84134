defmodule CompilationBridge.RuntimePayloadTest do
  @moduledoc """
  What the generated modules send, captured before the pool: exactly SnakeBridge 0.16's payloads
  (wire spec section 2 and the worked example of section 11).
  """
  use ExUnit.Case, async: false

  alias SnakeBridge.Ref
  alias Vllm.Config.CompilationConfig, as: CC

  defmodule Capture do
    @moduledoc false
    def execute(tool, payload, opts) do
      send(self(), {:sent, tool, payload, opts})
      Process.get(:reply, {:ok, nil})
    end
  end

  setup do
    Application.put_env(:snakebridge, :runtime_client, Capture)
    on_exit(fn -> Application.delete_env(:snakebridge, :runtime_client) end)
    :ok
  end

  @ref %Ref{
    id: "9f0c",
    session_id: "SID",
    python_module: "vllm.config",
    library: "vllm",
    type_name: "CompilationConfig"
  }
  @wire_ref %{
    "__type__" => "ref",
    "__schema__" => 1,
    "id" => "9f0c",
    "session_id" => "SID",
    "python_module" => "vllm.config",
    "library" => "vllm"
  }

  test "new/4 sends call_type class with three positional args and the keywords" do
    Process.put(:reply, {:ok, Map.merge(@wire_ref, %{"type_name" => "CompilationConfig"})})

    {:ok, ref} =
      CC.new(nil, nil, nil, cache_dir: "/var/cache/vc", __runtime__: [session_id: "SID"])

    assert_received {:sent, "snakebridge.call", payload, opts}

    assert payload == %{
             "protocol_version" => 1,
             "min_supported_version" => 1,
             "call_type" => "class",
             "class" => "CompilationConfig",
             "function" => "__init__",
             "python_module" => "vllm.config",
             "library" => "vllm",
             "args" => [nil, nil, nil],
             "kwargs" => %{"cache_dir" => "/var/cache/vc"},
             "idempotent" => false,
             "session_id" => "SID"
           }

    assert opts[:session_id] == "SID" and opts[:pool_name] == :default

    assert %Ref{
             id: "9f0c",
             session_id: "SID",
             type_name: "CompilationConfig",
             pool_name: :default
           } = ref
  end

  test "the keyword constructor sends no positional argument" do
    CC.new(mode: 3, __runtime__: [session_id: "SID"])
    assert_received {:sent, "snakebridge.call", %{"args" => [], "kwargs" => %{"mode" => 3}}, _}
  end

  test "methods send call_type method with the instance" do
    CC.compute_hash(@ref)
    assert_received {:sent, "snakebridge.call", payload, _}

    assert payload == %{
             "protocol_version" => 1,
             "min_supported_version" => 1,
             "call_type" => "method",
             "function" => "compute_hash",
             "python_module" => "vllm.config",
             "library" => "vllm",
             "args" => [],
             "kwargs" => %{},
             "idempotent" => false,
             "session_id" => "SID",
             "instance" => @wire_ref
           }
  end

  test "optional arguments follow SnakeBridge's args list convention" do
    CC.set_splitting_ops_for_v1(@ref, "naive", [2])
    assert_received {:sent, _, %{"args" => ["naive", 2], "kwargs" => %{}}, _}
    CC.set_splitting_ops_for_v1(@ref, "naive", data_parallel_size: 2)

    assert_received {:sent, _, %{"args" => ["naive"], "kwargs" => %{"data_parallel_size" => 2}},
                     _}
  end

  test "getters send call_type get_attr with attr and function" do
    CC.mode(@ref)
    assert_received {:sent, "snakebridge.call", payload, _}

    assert %{"call_type" => "get_attr", "attr" => "mode", "function" => "mode", "args" => []} =
             payload

    assert payload["instance"] == @wire_ref
  end

  test "release_ref and release_session payloads are exactly SnakeBridge's" do
    assert :ok = SnakeBridge.Runtime.release_ref(@ref)
    assert_received {:sent, "snakebridge.release_ref", payload, _}

    assert payload == %{
             "protocol_version" => 1,
             "min_supported_version" => 1,
             "ref" => @wire_ref,
             "session_id" => "SID"
           }

    assert :ok = SnakeBridge.Runtime.release_session("SID")
    assert_received {:sent, "snakebridge.release_session", payload, _}

    assert payload == %{
             "protocol_version" => 1,
             "min_supported_version" => 1,
             "session_id" => "SID"
           }
  end

  test "tagged values both ways" do
    CC.validate_mode_before(@ref, {1, :nan, MapSet.new([:x])})
    assert_received {:sent, _, %{"args" => [tuple]}, _}

    assert tuple == %{
             "__type__" => "tuple",
             "__schema__" => 1,
             "elements" => [
               1,
               %{"__type__" => "special_float", "__schema__" => 1, "value" => "nan"},
               %{
                 "__type__" => "set",
                 "__schema__" => 1,
                 "elements" => [%{"__type__" => "atom", "__schema__" => 1, "value" => "x"}]
               }
             ]
           }

    Process.put(
      :reply,
      {:ok,
       %{
         "__type__" => "tuple",
         "elements" => [2, %{"__type__" => "special_float", "value" => "infinity"}]
       }}
    )

    assert {:ok, {2, :infinity}} = CC.validate_mode_before(@ref, 1)
  end

  test "Python errors become %Snakepit.Error{} with the translated exception in details.reason" do
    error = %{
      "type" => "ValueError",
      "message" => "bad",
      "stacktrace" => ["Traceback\n", "ValueError: bad\n"],
      "traceback" => "Traceback\nValueError: bad\n",
      "context" => %{"tool_name" => "snakebridge.call"}
    }

    Process.put(:reply, {:error, {:python, error}})

    assert {:error,
            %Snakepit.Error{
              category: :worker,
              message: "Request failed",
              details: %{command: "snakebridge.call", pool_name: :default, reason: reason}
            }} = CC.compute_hash(@ref)

    assert %Snakepit.Error.ValueError{message: "bad", python_type: "ValueError"} = reason
    assert reason.python_traceback == "Traceback\nValueError: bad\n"

    Process.put(:reply, {:error, {:python, Map.put(error, "type", "ValidationError")}})

    assert {:error, %{details: %{reason: %Snakepit.Error.PythonException{}}}} =
             CC.compute_hash(@ref)
  end
end
