# A CompilationConfig from Elixir, then a real torch compile with it, through the default pool.
#
#     cd elixir_stub && mix run examples/compile_config.exs
alias CompilationBridge.Compile
alias CompilationBridge.Compile.CompiledModel
alias Vllm.Config.CompilationConfig, as: CC

{:ok, cc} = CC.new(mode: 3, backend: "eager", compile_ranges_split_points: [4])
{:ok, hash} = CC.compute_hash(cc)
IO.puts("config hash #{hash}")

{:error, %Snakepit.Error{details: %{reason: reason}}} = CC.new(nil, nil, nil, mode: 3)
IO.puts("as in vLLM, mode twice is a #{reason.python_type}")

{:ok, model} = Compile.compile_model(cc, max_num_tokens: 8, num_layers: 1)

for tokens <- [2, 6] do
  {:ok, run} = CompiledModel.run(model, tokens)

  IO.puts(
    "#{tokens} tokens: dispatched to #{inspect(run["dispatched_to"])}, max |compiled - eager| = #{run["max_abs_diff_vs_eager"]}"
  )
end

{:ok, report} = CompiledModel.report(model)

IO.puts(
  "#{report["num_pieces"]} pieces, #{report["num_compiled_pieces"]} compiled, mode #{report["mode"]}"
)
