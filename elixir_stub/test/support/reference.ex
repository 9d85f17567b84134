defmodule CompilationBridge.Reference do
  @moduledoc """
  Reads the reference pages in `priv/reference/` (ExDoc markdown of the published Elixir API; the
  CompilationConfig page is the seed the generated module must match).
  """

  @dir Path.expand("../../priv/reference", __DIR__)

  @doc "Path of the page for `module` (a string such as \"Vllm.Config.CompilationConfig\")."
  def path(module), do: Path.join(@dir, module <> ".md")

  @doc "The module doc and `%{name => %{spec: text | nil, doc: text}}` of the page."
  def read(module) do
    [text | _footer] = module |> path() |> File.read!() |> String.split("\n---\n", parts: 2)
    [_ | sections] = Regex.split(~r/^# `([^`]+)`\s*$/m, text, include_captures: true)

    [{_title, %{doc: moduledoc}} | entries] =
      sections |> Enum.chunk_every(2) |> Enum.map(&section/1)

    moduledoc =
      moduledoc
      |> String.split("\n")
      |> Enum.reject(&String.starts_with?(&1, "[🔗]"))
      |> Enum.join("\n")

    {String.trim(moduledoc), Map.new(entries)}
  end

  defp section([heading, body]) do
    name = heading |> String.trim() |> String.trim_leading("# `") |> String.trim_trailing("`")

    case Regex.run(~r/```elixir\n(.*?)\n```/s, body, return: :index) do
      [{start, length}, {spec_start, spec_length}] ->
        spec = binary_part(body, spec_start, spec_length)

        doc =
          body |> binary_part(start + length, byte_size(body) - start - length) |> String.trim()

        {name, %{spec: spec, doc: doc}}

      nil ->
        {name, %{spec: nil, doc: String.trim(body)}}
    end
  end

  @doc "The `{name, arity}` pairs the page's @specs define (a trailing `keyword()` is `opts \\\\ []`)."
  def functions(module) do
    {_moduledoc, entries} = read(module)

    for {name, %{spec: "@spec " <> spec}} <- entries,
        arity <- arities(spec),
        do: {String.to_atom(name), arity}
  end

  defp arities(spec) do
    {:"::", _, [{_name, _, args}, _return]} = Code.string_to_quoted!(spec)
    args = args || []

    case List.last(args) do
      {:keyword, _, []} -> [length(args) - 1, length(args)]
      _ -> [length(args)]
    end
  end

  @doc "A spec's text with whitespace normalised, for comparison."
  def normalize_spec(text) do
    text
    |> String.replace(~r/\s+/, " ")
    |> String.replace(~r/\(\s+/, "(")
    |> String.replace(~r/,?\s+\)/, ")")
    |> String.trim()
  end
end
