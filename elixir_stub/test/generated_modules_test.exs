defmodule CompilationBridge.GeneratedModulesTest do
  @moduledoc """
  The generated modules against the seed (function list, specs, docs, @opaque t) and against the
  Python surface (the checked-in files must be what `compilation-bridge gen-elixir` writes now).
  """
  use ExUnit.Case, async: true

  alias CompilationBridge.Reference
  alias Vllm.Config.CompilationConfig, as: CC

  @seed "Vllm.Config.CompilationConfig"
  # Beyond the seed: the keyword constructor (`new/0,1`). SnakeBridge's metadata functions
  # (`__snakebridge_python_name__/0`, ...) and `_attention_ops/1` exist as in SnakeBridge's module,
  # but like every undocumented underscore name they are not on the seed's page.
  @extras [new: 0, new: 1]

  test "CompilationConfig defines exactly the seed's functions, plus the documented extras" do
    seed = MapSet.new(Reference.functions(@seed))
    generated = MapSet.new(visible_functions(CC))
    assert MapSet.difference(seed, generated) == MapSet.new(), "missing from the generated module"
    assert MapSet.difference(generated, seed) == MapSet.new(@extras), "not in the seed"
  end

  test "hidden functions exist as in SnakeBridge's module though the seed page cannot show them" do
    # ExDoc hides undocumented functions whose names start with an underscore.
    for hidden <- [
          _attention_ops: 1,
          __snakebridge_python_name__: 0,
          __snakebridge_python_class__: 0
        ] do
      assert hidden in CC.__info__(:functions)
      refute hidden in visible_functions(CC)
    end

    assert CC.__snakebridge_python_name__() == "vllm.config"
    assert CC.__snakebridge_python_class__() == "CompilationConfig"
    assert CC.__snakebridge_library__() == "vllm"
  end

  # The functions ExDoc lists on a module's page: not hidden by @doc false, and no undocumented
  # name that starts with an underscore.
  defp visible_functions(module) do
    {:docs_v1, _, :elixir, _, _, _, docs} = Code.fetch_docs(module)

    for {{:function, name, arity}, _, _, doc, meta} <- docs,
        doc != :hidden,
        not (String.starts_with?(Atom.to_string(name), "_") and doc == :none),
        # the docs chunk has one entry per function; default arguments add the lower arities
        defaults = Map.get(meta, :defaults, 0),
        a <- (arity - defaults)..arity,
        do: {name, a}
  end

  test "specs are the seed's" do
    {_moduledoc, entries} = Reference.read(@seed)
    {:ok, specs} = Code.Typespec.fetch_specs(CC)
    specs = Map.new(specs)

    for {name, %{spec: "@spec " <> expected}} <- entries do
      [arity | _] = name |> String.to_atom() |> arities_in(specs)
      [spec] = specs[{String.to_atom(name), arity}]
      actual = String.to_atom(name) |> Code.Typespec.spec_to_quoted(spec) |> Macro.to_string()
      assert Reference.normalize_spec(actual) == Reference.normalize_spec(expected), name
    end
  end

  defp arities_in(name, specs) do
    for({{^name, arity}, _} <- specs, do: arity) |> Enum.sort(:desc)
  end

  test "docs and the module doc are the seed's; t is opaque" do
    {moduledoc, entries} = Reference.read(@seed)
    {:docs_v1, _, :elixir, _, %{"en" => module_doc}, _, docs} = Code.fetch_docs(CC)
    assert String.trim(module_doc) == moduledoc

    for {name, %{spec: "@spec " <> _, doc: expected}} <- entries do
      name = String.to_atom(name)
      arity = Reference.functions(@seed) |> Keyword.get_values(name) |> Enum.max()

      doc =
        Enum.find_value(docs, fn {{:function, n, a}, _, _, doc, _} ->
          {n, a} == {name, arity} && doc
        end)

      case expected do
        "" -> assert doc in [:none, %{}], "#{name} has a doc the seed does not"
        _ -> assert String.trim(doc["en"]) == expected, "#{name}"
      end
    end

    {:ok, types} = Code.Typespec.fetch_types(CC)
    assert Enum.any?(types, &match?({:opaque, {:t, _, []}}, &1))
  end

  @tag timeout: 180_000
  test "the checked-in generated files are what the generator writes from the Python surface" do
    out = Path.join(System.tmp_dir!(), "gen_elixir_#{System.unique_integer([:positive])}")
    on_exit(fn -> File.rm_rf!(out) end)
    python = CompilationBridge.Python.interpreter()

    {output, status} =
      System.cmd(
        python,
        ~w(-m compilation_bridge gen-elixir --no-format --force --out) ++ [out],
        stderr_to_stdout: true,
        env: [{"PYTHONWARNINGS", "ignore"}]
      )

    assert status == 0, output
    fresh = files(Path.join(out, "lib/generated"))
    checked_in = files(Path.expand("lib/generated"))

    assert Map.keys(fresh) == Map.keys(checked_in),
           "generated file list changed: run compilation-bridge gen-elixir"

    for {relative, text} <- fresh do
      assert formatted(text) == formatted(checked_in[relative]),
             "#{relative} is stale: run `compilation-bridge gen-elixir --out elixir_stub`"
    end
  end

  defp files(root) do
    root
    |> Path.join("**/*.ex")
    |> Path.wildcard()
    |> Map.new(fn path -> {Path.relative_to(path, root), File.read!(path)} end)
  end

  defp formatted(text), do: text |> Code.format_string!() |> IO.iodata_to_binary()
end
