# Several CompilationConfigs, the toy-llama reference model compiled with each, and a comparison
# table: pieces, backend compilations, compile time, run time and the largest difference from eager.
#
#     cd elixir_stub && mix run examples/compare_configs.exs
alias CompilationBridge.Compile
alias CompilationBridge.Compile.CompiledModel
alias Vllm.Config.CompilationConfig, as: CC

tokens = [1, 16, 64]

configs = [
  {"NONE (eager)", [mode: 0]},
  {"DYNAMO_TRACE_ONCE, eager backend", [mode: 2, backend: "eager"]},
  {"VLLM_COMPILE, eager adaptor", [mode: 3, backend: "eager", compile_ranges_split_points: [16]]},
  {"VLLM_COMPILE, Inductor, size 16", [mode: 3, backend: "inductor", compile_sizes: [16]]}
]

measure = fn {name, keywords} ->
  {:ok, cc} = CC.new(keywords)
  {:ok, model} = Compile.compile_model(cc, max_num_tokens: 64, num_layers: 2)

  runs =
    for n <- tokens do
      # The first run of a range compiles it; the second shows the steady state.
      {:ok, _first} = CompiledModel.run(model, n, __runtime__: [timeout: 300_000])
      {:ok, run} = CompiledModel.run(model, n)
      run
    end

  {:ok, report} = CompiledModel.report(model)
  {name, report, runs}
end

rows = Enum.map(configs, measure)

header =
  ["config", "mode", "pieces", "compiled", "compilations", "compile s"] ++
    Enum.map(tokens, &"run ms @#{&1}") ++ ["max |diff|"]

lines =
  for {name, report, runs} <- rows do
    [
      name,
      to_string(report["mode"]),
      to_string(report["num_pieces"]),
      to_string(report["num_compiled_pieces"]),
      to_string(report["num_backend_compilations"]),
      :erlang.float_to_binary(report["compilation_time_s"] * 1.0, decimals: 2)
    ] ++
      Enum.map(runs, &:erlang.float_to_binary(&1["seconds"] * 1000.0, decimals: 3)) ++
      [
        :erlang.float_to_binary(Enum.max(Enum.map(runs, & &1["max_abs_diff_vs_eager"])) * 1.0,
          decimals: 6
        )
      ]
  end

widths =
  Enum.map(0..(length(header) - 1), fn i ->
    Enum.max(Enum.map([header | lines], &String.length(Enum.at(&1, i))))
  end)

print = fn cells ->
  cells
  |> Enum.zip(widths)
  |> Enum.map_join(" | ", fn {cell, width} -> String.pad_trailing(cell, width) end)
  |> IO.puts()
end

print.(header)
IO.puts(Enum.map_join(widths, "-|-", &String.duplicate("-", &1)))
Enum.each(lines, print)
