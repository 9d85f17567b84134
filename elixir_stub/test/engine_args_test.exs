defmodule CompilationBridge.EngineArgsTest do
  @moduledoc """
  Vllm.EngineArgs against real workers: the arguments built, `create_engine_config` planning a whole
  VllmConfig whose sub-configs read back through their modules, and a refused argument set.
  """
  use ExUnit.Case, async: true

  alias SnakeBridge.Ref
  alias Vllm.Config.{ModelConfig, SchedulerConfig, VllmConfig}

  test "EngineArgs |> create_engine_config plans a VllmConfig, resolving defaults into the arguments" do
    assert {:ok, args} = Vllm.EngineArgs.new([], model: "tiny-llama", max_model_len: 256)
    assert {:ok, usage} = Vllm.Usage.UsageLib.UsageContext.llm_class()

    assert {:ok, %Ref{type_name: "VllmConfig"} = config} =
             Vllm.EngineArgs.create_engine_config(args, [usage])

    assert {:ok, model} = VllmConfig.model_config(config)
    assert {:ok, 256} = ModelConfig.max_model_len(model)
    assert {:ok, scheduler} = VllmConfig.scheduler_config(config)
    assert {:ok, tokens} = SchedulerConfig.max_num_batched_tokens(scheduler)
    assert {:ok, ^tokens} = Vllm.EngineArgs.max_num_batched_tokens(args)
    assert {:ok, true} = Vllm.EngineArgs.enable_chunked_prefill(args)
    assert {:ok, hash} = VllmConfig.compute_hash(config)
    assert String.length(hash) == 10
  end

  test "an argument set vLLM refuses is an error, as vLLM's" do
    assert {:ok, args} = Vllm.EngineArgs.new([], model: "tiny-llama", max_num_partial_prefills: 2)

    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             Vllm.EngineArgs.create_engine_config(args, [])

    assert %{python_type: "NotImplementedError"} = reason
    assert reason.message =~ "Concurrent Partial Prefill is not supported"
  end
end
