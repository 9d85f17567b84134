defmodule CompilationBridge.CompileTest do
  @moduledoc "A real torch compile through the pool: small model, tiny token counts, eager backend."
  use ExUnit.Case, async: true

  import CompilationBridge.TestSupport, only: [python_reason: 1]

  alias CompilationBridge.Compile
  alias CompilationBridge.Compile.CompiledModel
  alias Vllm.Config.CompilationConfig, as: CC

  @tag timeout: 120_000
  test "compile_model, run and report through the pool" do
    # Under the worker's default root (its user cache folder): shared folders such as /tmp are refused.
    home = System.get_env("XDG_CACHE_HOME") || Path.join(System.user_home!(), ".cache")

    cache =
      Path.join([home, "compilation-bridge", "cb_elixir_#{System.unique_integer([:positive])}"])

    on_exit(fn -> File.rm_rf(cache) end)

    {:ok, cc} =
      CC.new(mode: 3, backend: "eager", compile_ranges_split_points: [4], cache_dir: cache)

    assert {:ok, %SnakeBridge.Ref{type_name: "CompiledModel"} = model} =
             Compile.compile_model(cc, max_num_tokens: 8, num_layers: 1)

    assert {:ok, %{"num_tokens" => 3} = run} = CompiledModel.run(model, 3)
    assert run["max_abs_diff_vs_eager"] < 1.0e-3
    assert {:ok, report} = CompiledModel.report(model)
    assert %{"model" => "toy-llama", "device" => "cpu", "num_pieces" => pieces} = report
    assert pieces > 1
    assert {:ok, time} = CC.compilation_time(cc)
    assert is_float(time)
  end

  test "snakebridge.stream delivers the chunks of a streaming call" do
    {:ok, cc} = CC.new(mode: 0)

    assert {:ok, chunks} =
             SnakeBridge.Runtime.stream(Compile, :compile_model, [cc],
               max_num_tokens: 4,
               num_layers: 1
             )

    assert %{"event" => "result", "result" => %SnakeBridge.Ref{type_name: "CompiledModel"}} =
             List.last(chunks)
  end

  test "bad compile input is an error tuple" do
    {:ok, cc} = CC.new(mode: 0)

    assert %Snakepit.Error.ValueError{message: message} =
             python_reason(Compile.compile_model(cc, model: "nope"))

    assert message =~ "unknown model"
    {:ok, model} = Compile.compile_model(cc, max_num_tokens: 4, num_layers: 1)
    assert %Snakepit.Error.ValueError{} = python_reason(CompiledModel.run(model, 5))
  end
end
