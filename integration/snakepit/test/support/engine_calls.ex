defmodule RealClient.EngineCalls do
  @moduledoc """
  `EngineArgs(...)` and its `create_engine_config()` through Snakepit, as an application without generated
  bindings for them calls them (the `vllm` package generates none: SnakeBridge's dynamic call names vLLM's
  module and class), then the `VllmConfig` it returns read back through the refs it hands out, with the
  generated modules of each sub-config: `{arguments, usage context, reads}`. vLLM 0.14.0 answers the same
  reads (`vllm_expectations.py`, the call's `then` chain).
  """

  alias Vllm.Config.{CacheConfig, CompilationConfig, ModelConfig, ParallelConfig, SchedulerConfig}
  alias Vllm.Config.VllmConfig

  # The model the worker ships (a config.json only), named by its path so vLLM reads the same folder.
  def model,
    do:
      Path.join(
        RealClient.ReadmeRecipe.repo_root(),
        "python/compilation_bridge/vllm_config/models/tiny-llama"
      )

  defp cases do
    [
      {[model: model()], nil},
      {[model: model()], "LLM_CLASS"},
      {[model: model(), max_model_len: 256, enable_chunked_prefill: false], "OPENAI_API_SERVER"},
      {[
         model: model(),
         tensor_parallel_size: 2,
         enable_lora: true,
         compilation_config: %{"mode" => 3}
       ], "LLM_CLASS"},
      {[model: model(), max_num_partial_prefills: 2], nil}
    ]
  end

  # {getter on the VllmConfig, then the generated module and getter of what it returns}
  # (The VllmConfig's own hash takes ModelConfig's, which hashes transformers' JSON of the model's config
  # as vLLM's does.)
  @reads [
    {:compute_hash, nil, nil},
    {:model_config, ModelConfig, :compute_hash},
    {:cache_config, CacheConfig, :compute_hash},
    {:parallel_config, ParallelConfig, :compute_hash},
    {:scheduler_config, SchedulerConfig, :compute_hash},
    {:scheduler_config, SchedulerConfig, :max_num_batched_tokens},
    {:scheduler_config, SchedulerConfig, :max_num_seqs},
    {:scheduler_config, SchedulerConfig, :enable_chunked_prefill},
    {:cache_config, CacheConfig, :block_size},
    {:cache_config, CacheConfig, :enable_prefix_caching},
    {:parallel_config, ParallelConfig, :world_size},
    {:parallel_config, ParallelConfig, :worker_cls},
    {:compilation_config, CompilationConfig, :mode},
    {:compilation_config, CompilationConfig, :cudagraph_capture_sizes},
    {:compilation_config, CompilationConfig, :compute_hash},
    {:model_config, ModelConfig, :max_model_len},
    {:model_config, ModelConfig, :architecture},
    {:lora_config, nil, nil}
  ]

  def table, do: for({kwargs, usage} <- cases(), read <- @reads, do: {kwargs, usage, read})

  def python_call({kwargs, usage, {first, _module, second}}) do
    usage_arg =
      if usage, do: [%{"enum" => "vllm.usage.usage_lib.UsageContext", "name" => usage}], else: []

    %{
      "module" => "vllm.engine.arg_utils",
      "cls" => "EngineArgs",
      "new" => %{
        "args" => [],
        "kwargs" => Map.new(kwargs, fn {k, v} -> {Atom.to_string(k), v} end)
      },
      "function" => "create_engine_config",
      "args" => usage_arg,
      "then" => Enum.map(Enum.reject([first, second], &is_nil/1), &Atom.to_string/1)
    }
  end

  def run({kwargs, usage, {first, module, second}}) do
    with {:ok, args} <- SnakeBridge.Runtime.call("vllm", "EngineArgs", [], kwargs),
         {:ok, usage_args} <- usage_context(usage),
         {:ok, config} <- SnakeBridge.Dynamic.call(args, :create_engine_config, usage_args),
         {:ok, value} <- apply(VllmConfig, first, [config]) do
      if module, do: apply(module, second, [value]), else: {:ok, value}
    end
  end

  defp usage_context(nil), do: {:ok, []}

  # A member of vLLM's str enum comes back as its string, which names it when passed in.
  defp usage_context(name) do
    with {:ok, member} <-
           SnakeBridge.Runtime.call("vllm.usage.usage_lib", "UsageContext", [name]),
         do: {:ok, [member]}
  end

  def describe({kwargs, usage, {first, _module, second}}),
    do:
      "EngineArgs(#{inspect(kwargs)}).create_engine_config(#{inspect(usage)}) |> #{first} |> #{second}"
end
