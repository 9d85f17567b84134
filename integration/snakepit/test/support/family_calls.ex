defmodule RealClient.FamilyCalls do
  @moduledoc """
  The configuration family beyond `CompilationConfig`, module by module: each class below built through
  its generated module (what every generated `new` does: `SnakeBridge.Runtime.call_class` on the module,
  so the module's own Python names route the call) and every attribute getter the module generates read
  through it, as `{module, args, kwargs, getter}`. vLLM 0.14.0 answers the same reads
  (`vllm_expectations.py`, given the module's Python module and class).
  """

  @classes [
    {Vllm.Config.CacheConfig, [], [block_size: 32]},
    {Vllm.Config.LoadConfig, [], [load_format: "dummy"]},
    {Vllm.Config.ObservabilityConfig, [], [kv_cache_metrics: true]},
    {Vllm.Config.AttentionConfig, [], [backend: "FLASH_ATTN"]},
    {Vllm.Config.SpeechToTextConfig, [], [sample_rate: 8000]},
    {Vllm.Config.StructuredOutputsConfig, [], [backend: "guidance"]},
    {Vllm.Config.ProfilerConfig, [], [profiler: "torch", torch_profiler_dir: "/tmp/traces"]},
    {Vllm.Config.PoolerConfig, [], [pooling_type: "MEAN"]},
    {Vllm.Config.EPLBConfig, [], [window_size: 10]},
    {Vllm.Config.KVEventsConfig, [], [enable_kv_cache_events: true]},
    {Vllm.Config.KVTransferConfig, [],
     [kv_connector: "NixlConnector", kv_role: "kv_both", engine_id: "e1"]},
    {Vllm.Config.ECTransferConfig, [],
     [ec_connector: "ECExampleConnector", ec_role: "ec_producer", engine_id: "e1"]},
    {Vllm.Config.MultiModalConfig, [], [limit_per_prompt: %{"image" => 2}]},
    {Vllm.Config.SchedulerConfig, [], [max_model_len: 2048, is_encoder_decoder: false]},
    {Vllm.Config.ParallelConfig, [], [tensor_parallel_size: 1]},
    {Vllm.Config.PassConfig, [], [fuse_norm_quant: true]},
    {Vllm.Config.LoRAConfig, [], [max_lora_rank: 32, max_loras: 2]},
    {Vllm.SamplingParams, [], [temperature: 0.5, stop: "END", seed: 3]},
    {Vllm.SamplingParamsClass, [], [n: 1, max_tokens: 64]},
    {Vllm.SamplingParams.BeamSearchParams, [4, 32], [length_penalty: 0.5]},
    {Vllm.SamplingParams.StructuredOutputsParams, [], [choice: ["a", "b"]]},
    {Vllm.PoolingParams, [], [dimensions: 8]},
    {Vllm.PoolingParamsClass, [], [normalize: true]}
  ]

  # Generated getters this worker does not answer as vLLM does, by module, each with its reason (listed
  # by the generated-surface test, tests/surface/test_generated_surface.py, or docs/configuration.md).
  # (DeviceConfig is not sampled: its one getter, `device`, is vLLM's `torch.device`, its type string
  # here, a listed departure.)
  @departures %{
    # torch dtypes: config work never imports torch, so a dtype is this worker's own class (same repr,
    # its type named `DType` where torch's is `dtype`); `registry` is vLLM's registry object, not served.
    Vllm.Config.ModelConfig => [:dtype, :head_dtype, :registry],
    # the creation time in nanoseconds, different on each side
    Vllm.Config.VllmConfig => [:instance_id, :needs_dp_coordinator, :quant_config]
  }

  # Getters whose Python attribute is not their Elixir name (SnakeBridge lowercases class constants).
  @python_names %{
    default_max_num_batched_tokens: "DEFAULT_MAX_NUM_BATCHED_TOKENS",
    default_max_num_seqs: "DEFAULT_MAX_NUM_SEQS"
  }

  # Classes built from a model folder (the one the worker ships, named by its path so vLLM reads it too)
  # or around one, and the engine config itself.
  defp classes do
    @classes ++
      [
        {Vllm.Config.ModelConfig, [], [model: RealClient.EngineCalls.model()]},
        {Vllm.Config.SpeculativeConfig, [],
         [method: "ngram", num_speculative_tokens: 3, prompt_lookup_max: 4]},
        {Vllm.Config.VllmConfig, [], []}
      ]
  end

  def modules, do: Enum.map(classes(), &elem(&1, 0))

  def table do
    for {module, args, kwargs} <- classes(),
        getter <- getters(module),
        getter not in Map.get(@departures, module, []),
        do: {module, args, kwargs, getter}
  end

  @doc "The module's attribute getters: functions of arity 1 only (a method has an `opts` arity too)."
  def getters(module) do
    functions = module.__info__(:functions)
    arities = Enum.group_by(functions, &elem(&1, 0), &elem(&1, 1))

    for {name, [1]} <- arities,
        not String.starts_with?(Atom.to_string(name), "__"),
        do: name
  end

  def python_call({module, args, kwargs, getter}) do
    %{
      "module" => module.__snakebridge_python_name__(),
      "cls" => module.__snakebridge_python_class__(),
      "new" => %{
        "args" => args,
        "kwargs" => Map.new(kwargs, fn {k, v} -> {Atom.to_string(k), v} end)
      },
      "function" => Map.get(@python_names, getter, Atom.to_string(getter)),
      "args" => []
    }
  end

  def run({module, args, kwargs, getter}) do
    case SnakeBridge.Runtime.call_class(module, :__init__, args, kwargs) do
      {:ok, ref} -> apply(module, getter, [ref])
      error -> error
    end
  end

  def describe({module, args, kwargs, getter}),
    do: "#{inspect(module)}: new(#{inspect(args)}, #{inspect(kwargs)}) |> #{getter}"
end
