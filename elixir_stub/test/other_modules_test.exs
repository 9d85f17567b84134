defmodule CompilationBridge.OtherModulesTest do
  @moduledoc """
  The other generated modules (enums, PassConfig, VllmConfig, Range, CacheConfig, LoadConfig,
  ObservabilityConfig, AttentionConfig, SpeechToTextConfig, StructuredOutputsConfig, ProfilerConfig,
  PoolerConfig, EPLBConfig, KVEventsConfig, KVTransferConfig, ECTransferConfig, MultiModalConfig,
  LoRAConfig, SpeculativeConfig, SupportsMetricsInfo, ParallelConfig, SchedulerConfig) against real workers.
  """
  use ExUnit.Case, async: true

  alias SnakeBridge.Ref
  alias Vllm.Config.{CompilationConfig, CompilationMode, CUDAGraphMode, PassConfig, VllmConfig}

  alias Vllm.Config.{
    AttentionConfig,
    CacheConfig,
    ECTransferConfig,
    EPLBConfig,
    KVEventsConfig,
    KVTransferConfig,
    LoadConfig,
    LoRAConfig,
    ObservabilityConfig,
    ModelConfig,
    MultiModalConfig,
    ParallelConfig,
    PoolerConfig,
    ProfilerConfig,
    SpeculativeConfig,
    SchedulerConfig,
    SpeechToTextConfig,
    StructuredOutputsConfig,
    SupportsMetricsInfo
  }

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

  test "CacheConfig: every function of the published module" do
    assert {:ok, cache} = CacheConfig.new(32, 0.5, 2),
           "new/3: the first three fields, positionally"

    for getter <-
          ~w(block_size cache_dtype calculate_kv_scales cpu_kvcache_space_bytes cpu_offload_gb
                     enable_prefix_caching gpu_memory_utilization is_attention_free kv_cache_memory_bytes
                     kv_offloading_backend kv_offloading_size kv_sharing_fast_prefill mamba_block_size
                     mamba_cache_dtype mamba_page_size_padded mamba_ssm_cache_dtype num_cpu_blocks
                     num_gpu_blocks num_gpu_blocks_override prefix_caching_hash_algo sliding_window
                     swap_space)a do
      assert {:ok, _} = apply(CacheConfig, getter, [cache]), "#{getter}"
    end

    assert {:ok, 32} = CacheConfig.block_size(cache)
    assert {:ok, hash} = CacheConfig.compute_hash(cache)
    assert byte_size(hash) == 64
    assert {:ok, %{"swap_space" => "2.0"}} = CacheConfig.metrics_info(cache)
    assert {:ok, "fp8"} = CacheConfig._validate_cache_dtype(cache, "fp8")
    {:ok, parallel} = ParallelConfig.new(tensor_parallel_size: 2)
    assert {:ok, nil} = CacheConfig.verify_with_parallel_config(cache, parallel)

    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             CacheConfig.new(cache_dtype: "int3")

    assert %Snakepit.Error.PythonException{python_type: "ValidationError"} = reason
  end

  test "LoadConfig and ObservabilityConfig: every function of the published modules" do
    assert {:ok, load} = LoadConfig.new(load_format: "SafeTensors")
    assert {:ok, "safetensors"} = LoadConfig.load_format(load)

    for getter <-
          ~w(device download_dir ignore_patterns model_loader_extra_config pt_load_map_location
                     safetensors_load_strategy use_tqdm_on_load)a do
      assert {:ok, _} = apply(LoadConfig, getter, [load]), "#{getter}"
    end

    assert {:ok, "gguf"} = LoadConfig._lowercase_load_format(load, "GGUF")
    assert {:ok, ["x"]} = LoadConfig._validate_ignore_patterns(load, ["x"])
    assert {:ok, load_hash} = LoadConfig.compute_hash(load)

    assert {:ok, seen} = ObservabilityConfig.new(show_hidden_metrics_for_version: "0.13")
    assert {:ok, true} = ObservabilityConfig.show_hidden_metrics(seen)

    for getter <-
          ~w(collect_detailed_traces collect_model_execute_time collect_model_forward_time
                     cudagraph_metrics enable_layerwise_nvtx_tracing enable_logging_iteration_details
                     enable_mfu_metrics enable_mm_processor_stats kv_cache_metrics
                     kv_cache_metrics_sample otlp_traces_endpoint show_hidden_metrics_for_version)a do
      assert {:ok, _} = apply(ObservabilityConfig, getter, [seen]), "#{getter}"
    end

    assert {:ok, ["model", "worker"]} =
             ObservabilityConfig._validate_collect_detailed_traces(seen, ["model,worker"])

    assert {:ok, nil} = ObservabilityConfig._validate_otlp_traces_endpoint(seen, nil)

    assert {:ok, "0.12"} =
             ObservabilityConfig._validate_show_hidden_metrics_for_version(seen, "0.12")

    assert {:ok, %SnakeBridge.Ref{}} = ObservabilityConfig._validate_tracing_config(seen)
    assert {:ok, ^load_hash} = ObservabilityConfig.compute_hash(seen), "both hash no factors"

    {:ok, cache} = CacheConfig.new(block_size: 64)

    assert {:ok, vc} =
             VllmConfig.new(cache_config: cache, load_config: load, observability_config: seen)

    assert {:ok, %SnakeBridge.Ref{type_name: "CacheConfig"} = held} = VllmConfig.cache_config(vc)
    assert {:ok, 64} = CacheConfig.block_size(held)
  end

  test "AttentionConfig: every function of the published module" do
    assert {:ok, attention} = AttentionConfig.new(backend: "flash_attn", flash_attn_version: 3)

    assert {:ok, %SnakeBridge.Ref{type_name: "AttentionBackendEnum"} = backend} =
             AttentionConfig.backend(attention)

    assert {:ok, "FLASH_ATTN"} = SnakeBridge.Runtime.get_attr(backend, :name)

    for getter <-
          ~w(disable_flashinfer_prefill disable_flashinfer_q_quantization
                     flash_attn_max_num_splits_for_cuda_graph flash_attn_version use_cudnn_prefill
                     use_prefill_decode_attention use_trtllm_attention use_trtllm_ragged_deepseek_prefill)a do
      assert {:ok, _} = apply(AttentionConfig, getter, [attention]), "#{getter}"
    end

    assert {:ok, %SnakeBridge.Ref{type_name: "AttentionBackendEnum"}} =
             AttentionConfig.validate_backend_before(attention, "triton_attn")

    assert {:ok, 7} = AttentionConfig.validate_backend_before(attention, 7)

    assert {:ok, nil} =
             AttentionConfig._set_from_env_if_set(
               attention,
               "use_cudnn_prefill",
               "VLLM_USE_CUDNN_PREFILL"
             )

    assert {:ok, hash} = AttentionConfig.compute_hash(attention)
    assert byte_size(hash) == 64

    assert {:ok, vc} = VllmConfig.new(attention_config: attention)
    assert {:ok, %SnakeBridge.Ref{type_name: "AttentionConfig"}} = VllmConfig.attention_config(vc)
  end

  test "SpeechToTextConfig: every function of the published module" do
    assert {:ok, speech} = SpeechToTextConfig.new(22_050, 10, 2),
           "new/3: the first three fields, positionally"

    assert {:ok, 22_050.0} = SpeechToTextConfig.sample_rate(speech),
           "a float field: coerced as in vLLM"

    assert {:ok, 10} = SpeechToTextConfig.max_audio_clip_s(speech)
    assert {:ok, 2} = SpeechToTextConfig.overlap_chunk_second(speech)
    assert {:ok, 1600} = SpeechToTextConfig.min_energy_split_window_size(speech)
    assert {:ok, true} = SpeechToTextConfig.allow_audio_chunking(speech)

    assert {:ok, unchunked} = SpeechToTextConfig.new(min_energy_split_window_size: nil)
    assert {:ok, false} = SpeechToTextConfig.allow_audio_chunking(unchunked)

    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             SpeechToTextConfig.new(overlap_chunk_second: "soon")

    assert %Snakepit.Error.PythonException{python_type: "ValidationError"} = reason
  end

  test "StructuredOutputsConfig: every function of the published module, and inside VllmConfig" do
    assert {:ok, structured} =
             StructuredOutputsConfig.new(backend: "guidance", disable_additional_properties: true)

    assert {:ok, "guidance"} = StructuredOutputsConfig.backend(structured)
    assert {:ok, true} = StructuredOutputsConfig.disable_additional_properties(structured)

    for getter <-
          ~w(disable_any_whitespace disable_fallback enable_in_reasoning reasoning_parser
                     reasoning_parser_plugin)a do
      assert {:ok, _} = apply(StructuredOutputsConfig, getter, [structured]), "#{getter}"
    end

    assert {:ok, %SnakeBridge.Ref{type_name: "StructuredOutputsConfig"}} =
             StructuredOutputsConfig._validate_structured_output_config(structured)

    assert {:ok, hash} = StructuredOutputsConfig.compute_hash(structured)
    assert byte_size(hash) == 32, "md5 of no factors, as vLLM"

    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             StructuredOutputsConfig.new(disable_any_whitespace: true)

    assert %Snakepit.Error.PythonException{python_type: "ValidationError"} = reason

    assert {:ok, vc} = VllmConfig.new(structured_outputs_config: structured)

    assert {:ok, %SnakeBridge.Ref{type_name: "StructuredOutputsConfig"} = held} =
             VllmConfig.structured_outputs_config(vc)

    assert {:ok, "guidance"} = StructuredOutputsConfig.backend(held)
  end

  test "ProfilerConfig: every function of the published module, and inside VllmConfig" do
    assert {:ok, profiler} =
             ProfilerConfig.new(
               profiler: "torch",
               torch_profiler_dir: "/traces",
               max_iterations: 5
             )

    assert {:ok, "torch"} = ProfilerConfig.profiler(profiler)
    assert {:ok, "/traces"} = ProfilerConfig.torch_profiler_dir(profiler)
    assert {:ok, 5} = ProfilerConfig.max_iterations(profiler)

    for getter <-
          ~w(delay_iterations ignore_frontend torch_profiler_dump_cuda_time_total
                     torch_profiler_record_shapes torch_profiler_use_gzip torch_profiler_with_flops
                     torch_profiler_with_memory torch_profiler_with_stack)a do
      assert {:ok, _} = apply(ProfilerConfig, getter, [profiler]), "#{getter}"
    end

    # The workers run without the deprecated variables: nothing is read, nothing changes.
    assert {:ok, nil} =
             ProfilerConfig._get_from_env_if_set(
               profiler,
               "max_iterations",
               "VLLM_PROFILER_MAX_ITERS"
             )

    assert {:ok, nil} =
             ProfilerConfig._set_from_env_if_set(
               profiler,
               "delay_iterations",
               "VLLM_PROFILER_DELAY_ITERS",
               [false, true]
             )

    assert {:error, %Snakepit.Error{}} =
             ProfilerConfig._get_from_env_if_set(profiler, "profiler", "HOME"),
           "only the profiler's own variables are read"

    assert {:ok, %SnakeBridge.Ref{type_name: "ProfilerConfig"}} =
             ProfilerConfig._validate_profiler_config(profiler)

    assert {:ok, hash} = ProfilerConfig.compute_hash(profiler)
    assert byte_size(hash) == 32, "md5 of no factors, as vLLM"

    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             ProfilerConfig.new(profiler: "torch")

    assert %Snakepit.Error.PythonException{python_type: "ValidationError"} = reason

    assert {:ok, vc} = VllmConfig.new(profiler_config: profiler)

    assert {:ok, %SnakeBridge.Ref{type_name: "ProfilerConfig"} = held} =
             VllmConfig.profiler_config(vc)

    assert {:ok, 5} = ProfilerConfig.max_iterations(held)
  end

  test "PoolerConfig: every function of the published module, and inside ModelConfig" do
    assert {:ok, pooler} = PoolerConfig.new(pooling_type: "MEAN", softmax: 1.0, dimensions: 16)
    assert {:ok, "MEAN"} = PoolerConfig.seq_pooling_type(pooler), "pooling_type resolved"
    assert {:ok, nil} = PoolerConfig.tok_pooling_type(pooler)
    assert {:ok, 1.0} = PoolerConfig.use_activation(pooler), "the deprecated softmax carried over"

    for getter <-
          ~w(activation dimensions enable_chunked_processing logit_bias max_embed_len normalize
                     pooling_type returned_token_ids softmax step_tag_id)a do
      assert {:ok, _} = apply(PoolerConfig, getter, [pooler]), "#{getter}"
    end

    assert {:ok, "MEAN"} = PoolerConfig.get_seq_pooling_type(pooler)

    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             PoolerConfig.get_tok_pooling_type(pooler)

    assert %Snakepit.Error.PythonException{python_type: "AssertionError"} = reason
    assert {:ok, hash} = PoolerConfig.compute_hash(pooler)
    assert byte_size(hash) == 32, "md5 of no factors, as vLLM"

    assert {:error, %Snakepit.Error{}} =
             PoolerConfig.new(pooling_type: "MEAN", seq_pooling_type: "CLS")

    assert {:ok, model} =
             ModelConfig.new(model: "tiny-llama", runner: "pooling", pooler_config: pooler)

    assert {:ok, %SnakeBridge.Ref{type_name: "PoolerConfig"} = held} =
             ModelConfig.pooler_config(model)

    assert {:ok, "ALL"} = PoolerConfig.tok_pooling_type(held), "the pooling runner's default"
  end

  test "EPLBConfig: every function of the published module, and inside ParallelConfig" do
    assert {:ok, eplb} = EPLBConfig.new(window_size: 100, log_balancedness: true)
    assert {:ok, 100} = EPLBConfig.window_size(eplb)
    assert {:ok, "default"} = EPLBConfig.policy(eplb)

    for getter <-
          ~w(log_balancedness log_balancedness_interval num_redundant_experts step_interval
                     use_async)a do
      assert {:ok, _} = apply(EPLBConfig, getter, [eplb]), "#{getter}"
    end

    assert {:ok, %SnakeBridge.Ref{type_name: "EPLBConfig"}} =
             EPLBConfig._validate_eplb_config(eplb)

    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             EPLBConfig.new(log_balancedness: true, log_balancedness_interval: 0)

    assert %Snakepit.Error.PythonException{python_type: "ValidationError"} = reason

    assert {:ok, parallel} = ParallelConfig.new(eplb_config: eplb)

    assert {:ok, %SnakeBridge.Ref{type_name: "EPLBConfig"} = held} =
             ParallelConfig.eplb_config(parallel)

    assert {:ok, 100} = EPLBConfig.window_size(held)
  end

  test "KVEventsConfig: every function of the published module, and inside VllmConfig" do
    assert {:ok, events} = KVEventsConfig.new(enable_kv_cache_events: true, topic: "kv")
    assert {:ok, "zmq"} = KVEventsConfig.publisher(events), "chosen by __post_init__"
    assert {:ok, "kv"} = KVEventsConfig.topic(events)

    for getter <-
          ~w(buffer_steps enable_kv_cache_events endpoint hwm max_queue_size replay_endpoint)a do
      assert {:ok, _} = apply(KVEventsConfig, getter, [events]), "#{getter}"
    end

    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             KVEventsConfig.new(publisher: "kafka")

    assert %Snakepit.Error.PythonException{python_type: "ValidationError"} = reason

    assert {:ok, vc} = VllmConfig.new(kv_events_config: events)

    assert {:ok, %SnakeBridge.Ref{type_name: "KVEventsConfig"} = held} =
             VllmConfig.kv_events_config(vc)

    assert {:ok, "zmq"} = KVEventsConfig.publisher(held)
    assert {:ok, plain} = VllmConfig.new()
    assert {:ok, nil} = VllmConfig.kv_events_config(plain), "none unless given, as in vLLM"
  end

  test "KVTransferConfig: every function of the published module, and inside VllmConfig" do
    assert {:ok, transfer} =
             KVTransferConfig.new(
               kv_connector: "NixlConnector",
               kv_role: "kv_producer",
               kv_connector_extra_config: %{"n" => 2}
             )

    assert {:ok, true} = KVTransferConfig.is_kv_producer(transfer)
    assert {:ok, false} = KVTransferConfig.is_kv_consumer(transfer)
    assert {:ok, true} = KVTransferConfig.is_kv_transfer_instance(transfer)
    assert {:ok, 2} = KVTransferConfig.get_from_extra_config(transfer, "n", nil)
    assert {:ok, "dflt"} = KVTransferConfig.get_from_extra_config(transfer, "x", "dflt")
    assert {:ok, engine_id} = KVTransferConfig.engine_id(transfer)
    assert byte_size(engine_id) == 36, "a fresh uuid4, as in vLLM"
    assert {:ok, hash} = KVTransferConfig.compute_hash(transfer)
    assert {:ok, ^hash} = KVTransferConfig.compute_hash(elem(KVTransferConfig.new(), 1))

    for getter <-
          ~w(enable_permute_local_kv kv_buffer_device kv_buffer_size kv_connector
             kv_connector_module_path kv_ip kv_load_failure_policy kv_parallel_size kv_port kv_rank
             kv_role)a do
      assert {:ok, _} = apply(KVTransferConfig, getter, [transfer]), "#{getter}"
    end

    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             KVTransferConfig.new(kv_connector: "NixlConnector")

    assert %Snakepit.Error.PythonException{python_type: "ValidationError"} = reason

    assert {:ok, vc} = VllmConfig.new(kv_transfer_config: transfer)

    assert {:ok, %SnakeBridge.Ref{type_name: "KVTransferConfig"} = held} =
             VllmConfig.kv_transfer_config(vc)

    assert {:ok, "NixlConnector"} = KVTransferConfig.kv_connector(held)
    assert {:ok, cache} = CacheConfig.new(kv_offloading_size: 2.0)
    assert {:ok, offloading} = VllmConfig.new(cache_config: cache)
    assert {:ok, nil} = VllmConfig._post_init_kv_transfer_config(offloading)
    assert {:ok, made} = VllmConfig.kv_transfer_config(offloading)
    assert {:ok, "OffloadingConnector"} = KVTransferConfig.kv_connector(made), "made by post-init"
    assert {:ok, plain} = VllmConfig.new()
    assert {:ok, nil} = VllmConfig.kv_transfer_config(plain), "none unless given, as in vLLM"
  end

  test "ECTransferConfig: every function of the published module, and inside VllmConfig" do
    assert {:ok, transfer} =
             ECTransferConfig.new(
               ec_connector: "ECExampleConnector",
               ec_role: "ec_consumer",
               ec_connector_extra_config: %{"n" => 3}
             )

    assert {:ok, false} = ECTransferConfig.is_ec_producer(transfer)
    assert {:ok, true} = ECTransferConfig.is_ec_consumer(transfer)
    assert {:ok, true} = ECTransferConfig.is_ec_transfer_instance(transfer)
    assert {:ok, 3} = ECTransferConfig.get_from_extra_config(transfer, "n", nil)
    assert {:ok, "dflt"} = ECTransferConfig.get_from_extra_config(transfer, "x", "dflt")
    assert {:ok, engine_id} = ECTransferConfig.engine_id(transfer)
    assert byte_size(engine_id) == 36, "a fresh uuid4, as in vLLM"
    assert {:ok, "d751713988987e9331980363e24189ce"} = ECTransferConfig.compute_hash(transfer)

    for getter <-
          ~w(ec_buffer_device ec_buffer_size ec_connector ec_connector_module_path ec_ip
             ec_parallel_size ec_port ec_rank ec_role)a do
      assert {:ok, _} = apply(ECTransferConfig, getter, [transfer]), "#{getter}"
    end

    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             ECTransferConfig.new(ec_role: "ec_both")

    assert %Snakepit.Error.PythonException{python_type: "ValidationError"} = reason

    assert {:ok, vc} = VllmConfig.new(ec_transfer_config: transfer)

    assert {:ok, %SnakeBridge.Ref{type_name: "ECTransferConfig"} = held} =
             VllmConfig.ec_transfer_config(vc)

    assert {:ok, "ECExampleConnector"} = ECTransferConfig.ec_connector(held)
    assert {:ok, plain} = VllmConfig.new()
    assert {:ok, nil} = VllmConfig.ec_transfer_config(plain), "none unless given, as in vLLM"
  end

  test "LoRAConfig: every function of the published module, and inside VllmConfig" do
    assert {:ok, lora} = LoRAConfig.new(max_lora_rank: 64, max_loras: 2, lora_dtype: "float16")

    assert {:ok, 2} = LoRAConfig.max_cpu_loras(lora), "the batch's count by default, as in vLLM"
    assert {:ok, "float16"} = LoRAConfig.lora_dtype(lora)
    assert {:ok, "4222947ec1d05cf2ed4a2910b6a3569c"} = LoRAConfig.compute_hash(lora)

    assert {:ok, %SnakeBridge.Ref{type_name: "LoRAConfig"}} =
             LoRAConfig._validate_lora_config(lora)

    for getter <-
          ~w(default_mm_loras enable_tower_connector_lora fully_sharded_loras max_lora_rank max_loras)a do
      assert {:ok, _} = apply(LoRAConfig, getter, [lora]), "#{getter}"
    end

    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             LoRAConfig.new(max_loras: 4, max_cpu_loras: 2)

    assert %Snakepit.Error.PythonException{python_type: "ValidationError"} = reason

    assert {:ok, vc} = VllmConfig.new(lora_config: lora)
    assert {:ok, %SnakeBridge.Ref{type_name: "LoRAConfig"} = held} = VllmConfig.lora_config(vc)
    assert {:ok, 64} = LoRAConfig.max_lora_rank(held)

    assert {:ok, "5d648c94cba0f595b91d2b80d95d0ec1"} = LoRAConfig.compute_hash(held),
           "torch.float16 now"

    assert {:ok, model} = ModelConfig.new(model: "tiny-llama", dtype: "bfloat16")
    assert {:ok, auto} = LoRAConfig.new()
    assert {:ok, nil} = LoRAConfig.verify_with_model_config(auto, model)
    assert {:ok, _} = LoRAConfig.lora_dtype(auto)

    assert {:ok, unsettled} = LoRAConfig.new()

    assert {:error, %Snakepit.Error{details: %{reason: no_model}}} =
             VllmConfig.new(lora_config: unsettled)

    assert %Snakepit.Error.AttributeError{message: "'NoneType' object has no attribute 'dtype'"} =
             no_model,
           "as in vLLM"

    assert {:ok, plain} = VllmConfig.new()
    assert {:ok, nil} = VllmConfig.lora_config(plain), "none unless given, as in vLLM"
  end

  test "SpeculativeConfig: every function of the published module, and inside VllmConfig" do
    assert {:ok, ngram} = SpeculativeConfig.new(method: "ngram", num_speculative_tokens: 3)
    assert {:ok, 5} = SpeculativeConfig.prompt_lookup_max(ngram), "vLLM's default window"
    assert {:ok, "9c216c9ced8ea13cc7cef7cba5bc5441"} = SpeculativeConfig.compute_hash(ngram)
    assert {:ok, false} = SpeculativeConfig.use_eagle(ngram)
    assert {:ok, %Ref{type_name: "SpeculativeConfig"}} = SpeculativeConfig._verify_args(ngram)

    assert {:ok, 100} =
             SpeculativeConfig._maybe_override_draft_max_model_len(ngram, 100, 512, 256)

    for getter <-
          ~w(code_revision disable_by_batch_size disable_padded_drafter_batch draft_model_config
             draft_parallel_config draft_tensor_parallel_size enforce_eager max_model_len method model
             num_speculative_tokens prompt_lookup_min quantization revision speculative_token_tree
             suffix_decoding_max_cached_requests suffix_decoding_max_spec_factor
             suffix_decoding_max_tree_depth suffix_decoding_min_token_prob target_model_config
             target_parallel_config)a do
      assert {:ok, _} = apply(SpeculativeConfig, getter, [ngram]), "#{getter}"
    end

    assert {:ok, model} = ModelConfig.new(model: "tiny-llama", skip_tokenizer_init: true)
    assert {:ok, parallel} = ParallelConfig.new(tensor_parallel_size: 1)

    assert {:ok, eagle} =
             SpeculativeConfig.new(
               method: "eagle3",
               model: "tiny-llama",
               num_speculative_tokens: 2,
               target_model_config: model,
               target_parallel_config: parallel
             )

    assert {:ok, "[(0,), (0, 0)]"} = SpeculativeConfig.speculative_token_tree(eagle)
    assert {:ok, "c3d9d001b44dc00cc97829c0d62f12f9"} = SpeculativeConfig.compute_hash(eagle)

    assert {:ok, %Ref{type_name: "ModelConfig"} = draft} =
             SpeculativeConfig.draft_model_config(eagle)

    assert {:ok, "draft"} = ModelConfig.runner(draft)

    assert {:ok, %Ref{type_name: "ParallelConfig"}} =
             SpeculativeConfig.draft_parallel_config(eagle)

    assert {:ok, vc} =
             VllmConfig.new(
               model_config: model,
               parallel_config: parallel,
               speculative_config: eagle
             )

    assert {:ok, %Ref{type_name: "SpeculativeConfig"} = held} = VllmConfig.speculative_config(vc)
    assert {:ok, "eagle3"} = SpeculativeConfig.method(held)

    assert {:error, %Snakepit.Error{details: %{reason: suffix}}} =
             SpeculativeConfig.new(method: "suffix")

    assert %Snakepit.Error.ImportError{} = suffix, "vLLM without arctic-inference"

    assert {:error, %Snakepit.Error{details: %{reason: protocol}}} = SupportsMetricsInfo.new([])

    assert %Snakepit.Error.TypeError{message: "Protocols cannot be instantiated"} = protocol,
           "a Protocol, as in vLLM"
  end

  test "MultiModalConfig: every function of the published module, and inside ModelConfig" do
    assert {:ok, mm} =
             MultiModalConfig.new(
               limit_per_prompt: %{"image" => 4, "video" => %{"count" => 1, "num_frames" => 8}},
               mm_encoder_attn_backend: "flash_attn",
               mm_processor_kwargs: %{"num_crops" => 2},
               video_pruning_rate: 0.5
             )

    assert {:ok, 4} = MultiModalConfig.get_limit_per_prompt(mm, "image")
    assert {:ok, 999} = MultiModalConfig.get_limit_per_prompt(mm, "audio"), "vLLM's default"

    assert {:ok, %SnakeBridge.Ref{type_name: "VideoDummyOptions"}} =
             MultiModalConfig.get_dummy_options(mm, "video")

    assert {:ok, nil} = MultiModalConfig.get_dummy_options(mm, "audio")
    assert {:ok, true} = MultiModalConfig.is_multimodal_pruning_enabled(mm)

    assert {:ok, %{"num_crops" => 2, "x" => 1}} =
             MultiModalConfig.merge_mm_processor_kwargs(mm, %{"x" => 1})

    assert {:ok, %SnakeBridge.Ref{type_name: "AttentionBackendEnum"} = backend} =
             MultiModalConfig.mm_encoder_attn_backend(mm)

    assert {:ok, "FLASH_ATTN"} = SnakeBridge.Runtime.get_attr(backend, :name)

    assert {:ok, %SnakeBridge.Ref{type_name: "AttentionBackendEnum"}} =
             MultiModalConfig._validate_mm_encoder_attn_backend(mm, "torch_sdpa")

    assert {:ok, %{}} = MultiModalConfig._validate_limit_per_prompt(mm, %{})
    assert {:ok, %SnakeBridge.Ref{}} = MultiModalConfig._validate_multimodal_config(mm)
    assert {:ok, hash} = MultiModalConfig.compute_hash(mm)
    assert byte_size(hash) == 32, "md5 of the encoder backend's name, as vLLM"

    for getter <-
          ~w(enable_mm_embeds interleave_mm_strings limit_per_prompt media_io_kwargs mm_encoder_tp_mode
             mm_processor_cache_gb mm_processor_cache_type mm_processor_kwargs
             mm_shm_cache_max_object_size_mb skip_mm_profiling video_pruning_rate)a do
      assert {:ok, _} = apply(MultiModalConfig, getter, [mm]), "#{getter}"
    end

    assert {:error, %Snakepit.Error{details: %{reason: reason}}} =
             MultiModalConfig.new(mm_shm_cache_max_object_size_mb: 64)

    assert %Snakepit.Error.PythonException{python_type: "ValidationError"} = reason

    assert {:ok, model} = ModelConfig.new(model: "tiny-llama", multimodal_config: mm)
    assert {:ok, true} = ModelConfig.is_multimodal_model(model)

    assert {:ok, %SnakeBridge.Ref{type_name: "MultiModalConfig"} = held} =
             ModelConfig.get_multimodal_config(model)

    assert {:ok, 4} = MultiModalConfig.get_limit_per_prompt(held, "image")

    assert {:ok, text} =
             ModelConfig.new(model: "tiny-llama", limit_mm_per_prompt: %{"image" => 2})

    assert {:ok, false} = ModelConfig.is_multimodal_model(text), "not a multimodal architecture"
    assert {:ok, nil} = ModelConfig.limit_mm_per_prompt(text), "an init var: the class's None"

    for getter <-
          ~w(enable_mm_embeds interleave_mm_strings media_io_kwargs mm_encoder_attn_backend
             mm_encoder_tp_mode mm_processor_cache_gb mm_processor_cache_type mm_processor_kwargs
             mm_shm_cache_max_object_size_mb skip_mm_profiling video_pruning_rate)a do
      assert {:ok, nil} = apply(ModelConfig, getter, [text]), "#{getter}"
    end

    assert {:error, %Snakepit.Error{details: %{reason: %Snakepit.Error.ValueError{}}}} =
             ModelConfig.get_multimodal_config(text)
  end

  test "ParallelConfig: every function of the published module; process groups refused saying why" do
    assert {:ok, parallel} =
             ParallelConfig.new(
               tensor_parallel_size: 2,
               data_parallel_size: 2,
               enable_expert_parallel: true,
               nnodes: 2,
               _data_parallel_master_port_list: [29600, 29601]
             )

    assert {:ok, 29601} = ParallelConfig.data_parallel_master_port(parallel),
           "popped from the list"

    assert {:ok, [29600]} = ParallelConfig._data_parallel_master_port_list(parallel)
    assert {:ok, 29600} = ParallelConfig.get_next_dp_init_port(parallel)

    assert {:ok, 29601} = ParallelConfig.get_next_dp_init_port(parallel),
           "then the master's, counted up"

    assert {:ok, 29602} = ParallelConfig.data_parallel_master_port(parallel)

    assert {:ok, 1} = ParallelConfig.nnodes_within_dp(parallel)
    assert {:ok, 0} = ParallelConfig.node_rank_within_dp(parallel)
    assert {:ok, 2} = ParallelConfig.local_world_size(parallel)
    assert {:ok, true} = ParallelConfig.use_sequence_parallel_moe(parallel)
    assert {:ok, 0} = ParallelConfig.num_ubatches(parallel)
    assert {:ok, false} = ParallelConfig.use_ray(parallel)
    assert {:ok, 1} = ParallelConfig._api_process_count(parallel)
    assert {:ok, 0} = ParallelConfig._api_process_rank(parallel)
    assert {:ok, nil} = ParallelConfig._skip_none_validation(parallel, nil, nil)

    assert {:ok, %Ref{type_name: "ParallelConfig"}} =
             ParallelConfig._validate_parallel_config(parallel)

    assert {:ok, %Ref{type_name: "ParallelConfig"}} = ParallelConfig._verify_args(parallel)

    assert {:error, %Snakepit.Error{details: %{reason: no_ray}}} =
             ParallelConfig.new(distributed_executor_backend: "ray")

    assert %Snakepit.Error.PythonException{python_type: "ValidationError", message: message} =
             no_ray

    assert message =~ "Failed to import Ray", "as in vLLM without Ray"

    assert {:error, %Snakepit.Error{details: %{reason: refused}}} =
             SnakeBridge.Runtime.call_method(parallel, :stateless_init_dp_group, [], [])

    assert %Snakepit.Error.PermissionError{message: reason} = refused
    assert reason =~ "torch.distributed process group"
  end

  test "SchedulerConfig: get_scheduler_cls answers the qualified name of vLLM's class" do
    assert {:ok, sched} =
             SchedulerConfig.new(
               max_model_len: 4096,
               is_encoder_decoder: false,
               async_scheduling: true
             )

    assert {:ok, "vllm.v1.core.sched.async_scheduler.AsyncScheduler"} =
             SchedulerConfig.get_scheduler_cls(sched)

    assert {:ok, nil} = SchedulerConfig._skip_none_validation(sched, nil, nil)

    assert {:ok, custom} =
             SchedulerConfig.new(
               max_model_len: 4096,
               is_encoder_decoder: false,
               scheduler_cls: "my_scheduler.Custom"
             )

    assert {:ok, "my_scheduler.Custom"} = SchedulerConfig.get_scheduler_cls(custom),
           "never imported"

    assert {:ok, bad} =
             SchedulerConfig.new(
               max_model_len: 4096,
               is_encoder_decoder: false,
               scheduler_cls: "nodot"
             )

    assert {:error, %Snakepit.Error{details: %{reason: %Snakepit.Error.ValueError{}}}} =
             SchedulerConfig.get_scheduler_cls(bad)
  end
end
