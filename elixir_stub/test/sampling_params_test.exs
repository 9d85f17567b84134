defmodule CompilationBridge.SamplingParamsTest do
  @moduledoc """
  vLLM's request parameters (Vllm.SamplingParams and Vllm.SamplingParams.*) against real workers: built,
  read back, changed by their methods, passed to each other, and refused as vLLM refuses them.
  """
  use ExUnit.Case, async: true

  alias SnakeBridge.Ref

  alias Vllm.SamplingParams.{
    BeamSearchParams,
    RequestOutputKind,
    SamplingType,
    StructuredOutputsParams
  }

  test "SamplingParams: built, normalised and read back as in vLLM" do
    assert {:ok, params} = Vllm.SamplingParams.new([], temperature: 0.7, seed: 5, stop: "END")

    assert {:ok, ["END"]} = Vllm.SamplingParams.stop(params),
           "a single stop string becomes a list"

    assert {:ok, 2} = Vllm.SamplingParams.output_text_buffer_length(params)

    assert {:ok, 2} = Vllm.SamplingParams.sampling_type(params),
           "RANDOM_SEED, an IntEnum: its integer"

    assert {:ok, 16} = Vllm.SamplingParams.max_tokens(params)

    assert {:ok, %Ref{type_name: "RequestOutputKind"} = kind} =
             Vllm.SamplingParams.output_kind(params)

    assert {:ok, "CUMULATIVE"} = RequestOutputKind.name(kind)

    assert {:ok, nil} =
             Vllm.SamplingParams.update_from_generation_config(
               params,
               %{"eos_token_id" => [2, 9]},
               [2]
             )

    assert {:ok, stop_ids} = Vllm.SamplingParams.stop_token_ids(params)
    assert Enum.sort(stop_ids) == [9]
    assert {:ok, all} = Vllm.SamplingParams.all_stop_token_ids(params)
    assert Enum.sort(Enum.to_list(all)) == [2, 9]

    assert {:ok, %Ref{type_name: "SamplingParams"} = copy} = Vllm.SamplingParams.clone(params)
    assert {:ok, 5} = Vllm.SamplingParams.seed(copy)
    assert {:ok, made} = Vllm.SamplingParams.from_optional(params, [], n: nil, top_k: 3)
    assert {:ok, 1} = Vllm.SamplingParams.n(made)
    assert {:ok, 3} = Vllm.SamplingParams.top_k(made)
  end

  test "SamplingParams: vLLM's errors, types and messages" do
    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             Vllm.SamplingParams.new([], temperature: -1)

    assert %{python_type: "VLLMValidationError"} = reason
    assert reason.message =~ "temperature must be non-negative, got -1."

    assert {:error, %Snakepit.Error{details: %{reason: %Snakepit.Error.ValueError{} = greedy}}} =
             Vllm.SamplingParams.new([], temperature: 0, n: 2)

    assert greedy.message =~ "n must be 1 when using greedy sampling, got 2."
  end

  test "the other request parameters and their enums" do
    assert {:ok, structured} = StructuredOutputsParams.new(choice: ["yes", "no"])
    assert {:ok, false} = StructuredOutputsParams.all_constraints_none(structured)
    assert {:ok, delta} = RequestOutputKind.delta()

    assert {:ok, params} =
             Vllm.SamplingParams.new([], structured_outputs: structured, output_kind: delta)

    assert {:ok, inner} = Vllm.SamplingParams.structured_outputs(params)
    assert {:ok, ["yes", "no"]} = StructuredOutputsParams.choice(inner)
    assert {:ok, kind} = Vllm.SamplingParams.output_kind(params)
    assert {:ok, "DELTA"} = RequestOutputKind.name(kind)

    assert {:ok, beams} = BeamSearchParams.new([4, 64], length_penalty: 0.5)
    assert {:ok, 4} = BeamSearchParams.beam_width(beams)
    assert {:ok, 0.5} = BeamSearchParams.length_penalty(beams)
    assert {:ok, 0} = SamplingType.greedy()
  end

  test "PoolingParams: verified against a task, and against a pooling model's config" do
    assert {:ok, params} = Vllm.PoolingParams.new([], normalize: false)
    assert {:ok, nil} = Vllm.PoolingParams.verify(params, "embed", [])
    assert {:ok, "embed"} = Vllm.PoolingParams.task(params)

    assert {:ok, false} = Vllm.PoolingParams.use_activation(params),
           "the deprecated normalize, moved"

    assert {:ok, ["dimensions", "use_activation"]} = Vllm.PoolingParams.all_parameters(params)

    assert {:ok, model} =
             Vllm.Config.ModelConfig.new(
               model: "tiny-llama",
               skip_tokenizer_init: true,
               runner: "pooling"
             )

    assert {:ok, sized} = Vllm.PoolingParams.new([], dimensions: 8)

    assert {:error, %Snakepit.Error{details: %{reason: %Snakepit.Error.ValueError{} = reason}}} =
             Vllm.PoolingParams.verify(sized, "embed", [model])

    assert reason.message =~ "does not support matryoshka representation"
  end
end
