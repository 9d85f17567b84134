defmodule CompilationBridge.OtherModulesTest do
  @moduledoc "The other generated modules (enums, PassConfig, VllmConfig, Range) against real workers."
  use ExUnit.Case, async: true

  alias SnakeBridge.Ref
  alias Vllm.Config.{CompilationConfig, CompilationMode, CUDAGraphMode, PassConfig, VllmConfig}
  alias Vllm.Config.Compilation.{DynamicShapesConfig, DynamicShapesType, Range}

  test "enum members: IntEnums are integers, plain enums are refs with name and value" do
    assert {:ok, 3} = CompilationMode.vllm_compile()
    assert {:ok, 0} = CompilationMode.new(0)
    assert {:ok, %Ref{type_name: "CUDAGraphMode"} = mode} = CUDAGraphMode.full_decode_only()
    assert {:ok, "FULL_DECODE_ONLY"} = CUDAGraphMode.name(mode)
    assert {:ok, {2, 0}} = CUDAGraphMode.value(mode)
    assert {:ok, true} = CUDAGraphMode.has_full_cudagraphs(mode)

    assert {:ok, "backed_size_oblivious"} = DynamicShapesType.backed_size_oblivious(),
           "a str enum is its string"

    assert {:error, %Snakepit.Error{details: %{reason: %Snakepit.Error.ValueError{}}}} =
             CUDAGraphMode.new(9)
  end

  test "config modules: keyword constructors, getters, methods" do
    assert {:ok, pass} = PassConfig.new(fuse_norm_quant: true)
    assert {:ok, true} = PassConfig.fuse_norm_quant(pass)
    assert {:ok, hash} = PassConfig.compute_hash(pass)
    assert byte_size(hash) == 64

    assert {:ok, shapes} = DynamicShapesConfig.new(evaluate_guards: true)
    assert {:ok, true} = DynamicShapesConfig.evaluate_guards(shapes)

    {:ok, cc} = CompilationConfig.new(pass_config: pass, dynamic_shapes_config: shapes)
    assert {:ok, vc} = VllmConfig.new(compilation_config: cc)
    assert {:ok, %Ref{type_name: "CompilationConfig"}} = VllmConfig.compilation_config(vc)
    assert {:ok, vllm_hash} = VllmConfig.compute_hash(vc)
    assert is_binary(vllm_hash)
  end

  test "Range: a plain dataclass with a positional constructor" do
    assert {:ok, range} = Range.new(1, 8)
    assert {:ok, false} = Range.is_single_size(range)
    assert {:ok, 8} = SnakeBridge.Runtime.get_attr(range, :end)
  end
end
