# Several CompilationConfigs, the toy-llama reference model compiled with each, and a comparison
# table: pieces, backend compilations, compile time, the first call of each token count (with the
# compile or cache load it triggers) apart, then the median of `repeats` runs after a warm-up, compiled
# and eager timed alternately (one sample is noise on a shared machine), and the largest difference
# from eager.
#
#     cd elixir_stub && mix run examples/compare_configs.exs
alias CompilationBridge.Compile
alias CompilationBridge.Compile.CompiledModel
alias Vllm.Config.CompilationConfig, as: CC

tokens = [1, 16, 64]
repeats = 20

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
      # The first call of a range compiles (or loads) it and is reported apart as first_call_ms.
      {:ok, run} = CompiledModel.run(model, n, repeats: repeats, __runtime__: [timeout: 300_000])
      run
    end

  {:ok, report} = CompiledModel.report(model)
  {name, report, runs}
end

rows = Enum.map(configs, measure)

header =
  ["config", "mode", "pieces", "compiled", "compilations", "compile s"] ++
    Enum.map(tokens, &"first call ms @#{&1}") ++
    Enum.map(tokens, &"median ms @#{&1} (eager)") ++ ["max |diff|"]

ms = fn value -> :erlang.float_to_binary(value * 1.0, decimals: 3) end

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
      Enum.map(runs, &ms.(&1["first_call_ms"])) ++
      Enum.map(runs, &"#{ms.(&1["compiled_ms"])} (#{ms.(&1["eager_ms"])})") ++
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

IO.puts(
  "\nmedian ms: medians of #{repeats} runs (fewer past a time budget: see each run's \"repeats\") " <>
    "after #{rows |> hd() |> elem(2) |> hd() |> Map.get("warmup")} warm-up runs, compiled and eager " <>
    "timed alternately; first call ms includes the compile or cache load it triggered"
)
