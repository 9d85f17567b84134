defmodule RealClient.Calls do
  @moduledoc """
  Every function of the generated `Vllm.Config.CompilationConfig`, on a fresh config of each kind below,
  as `{config, {function, Elixir arguments, the Python arguments they become}}`.
  """

  alias Vllm.Config.CompilationConfig, as: CC

  @configs [
    {[nil, nil, nil], []},
    {[nil, 3, nil], [compile_ranges_split_points: [8, 32]]},
    {[nil, 3, nil], [cudagraph_capture_sizes: [1, 2, 4, 8], cudagraph_mode: "FULL"]},
    {[nil, 0, nil], [backend: "eager", custom_ops: ["+rms_norm"], splitting_ops: []]},
    # construction fails as in vLLM: every call then answers that error
    {[nil, nil, nil], [mode: 3]}
  ]

  @methods [
    {:_skip_none_validation, [nil, nil], [nil, nil]},
    {:adjust_cudagraph_sizes_for_spec_decode, [2, 1], [2, 1]},
    {:compute_bs_to_padded_graph_size, [], []},
    {:compute_hash, [], []},
    {:custom_op_log_check, [], []},
    {:get_compile_ranges, [], []},
    {:init_backend, [nil], [nil]},
    {:is_attention_compiled_piecewise, [], []},
    {:is_custom_op_enabled, ["rms_norm"], ["rms_norm"]},
    {:post_init_cudagraph_sizes, [], []},
    {:set_splitting_ops_for_attn_fusion, [], []},
    {:set_splitting_ops_for_v1, ["allgather_reducescatter", [1]], ["allgather_reducescatter", 1]},
    {:splitting_ops_contain_attention, [], []},
    {:validate_compile_cache_save_format, ["binary"], ["binary"]},
    {:validate_cudagraph_mode_before, ["FULL"], ["FULL"]},
    {:validate_mode_before, [3], [3]},
    {:validate_pass_config_before, [nil], [nil]}
  ]

  @readers ~w(_attention_ops backend bs_to_padded_graph_size cache_dir compilation_time compile_mm_encoder
              compile_ranges_split_points compile_sizes cudagraph_capture_sizes cudagraph_copy_inputs
              cudagraph_mode cudagraph_num_of_warmups cudagraph_specialize_lora debug_dump_path level
              local_cache_dir max_cudagraph_capture_size mode splitting_ops use_inductor_graph_partition)a

  defp functions_with_args, do: @methods ++ Enum.map(@readers, &{&1, [], []})

  def functions, do: Enum.map(functions_with_args(), &elem(&1, 0))

  def table,
    do: for(config <- @configs, function <- functions_with_args(), do: {config, function})

  def python_call({{args, kwargs}, {function, _elixir_args, python_args}}) do
    %{
      "new" => %{
        "args" => args,
        "kwargs" => Map.new(kwargs, fn {k, v} -> {Atom.to_string(k), v} end)
      },
      "function" => Atom.to_string(function),
      "args" => python_args
    }
  end

  def run({{[a, b, c], kwargs}, {function, elixir_args, _}}) do
    case CC.new(a, b, c, kwargs) do
      {:ok, ref} -> apply(CC, function, [ref | elixir_args])
      error -> error
    end
  end

  def describe({{[a, b, c], kwargs}, {function, elixir_args, _}}) do
    args = Enum.map_join(elixir_args, "", &", #{inspect(&1)}")
    "new(#{inspect(a)}, #{inspect(b)}, #{inspect(c)}, #{inspect(kwargs)}) |> #{function}(#{args})"
  end
end
