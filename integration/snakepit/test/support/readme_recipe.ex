defmodule RealClient.ReadmeRecipe do
  @moduledoc """
  The README's Snakepit recipes, read from the README itself: the suite runs exactly what a user copies,
  so it fails as soon as the README's text breaks. Only the install paths the README uses as examples
  are replaced: this checkout, a cache folder of the test's own, and the vLLM environment of the two-pool
  recipe by the oracle's (`RealClient.VllmOracle.venv/0`, vLLM 0.14.0's CPU build).
  """

  @repo_root Path.expand("../../../..", __DIR__)
  @readme Path.join(@repo_root, "README.md")
  @install_path "/opt/compilation-bridge"
  @cache_path "/var/cache/compilation-bridge"
  @vllm_venv_path "/opt/vllm-venv"

  def repo_root, do: @repo_root

  @doc "The Elixir block that follows `<!-- recipe: NAME -->` in the README, with local paths."
  def code!(name, cache_root) do
    text = File.read!(@readme)

    block =
      case String.split(text, "<!-- recipe: #{name} -->", parts: 2) do
        [_, rest] -> Regex.run(~r/\A\s*```elixir\n(.*?)```/s, rest, capture: :all_but_first)
        _ -> nil
      end

    case block do
      [code] ->
        code
        |> String.replace(@install_path, @repo_root)
        |> String.replace(@cache_path, cache_root)
        |> String.replace(@vllm_venv_path, RealClient.VllmOracle.venv())

      nil ->
        raise "README.md has no elixir block after <!-- recipe: #{name} -->"
    end
  end

  @doc "A recipe's `config` lines, evaluated as config/runtime.exs would be: `[{app, keyword}]`."
  def config!(name, cache_root) do
    path =
      Path.join(System.tmp_dir!(), "realclient_#{name}_#{System.unique_integer([:positive])}.exs")

    File.write!(path, "import Config\n" <> code!(name, cache_root))

    try do
      Config.Reader.read!(path)
    after
      File.rm(path)
    end
  end

  @doc "Compiles a recipe's module (once per VM)."
  def compile_module!(name, module) do
    unless Code.ensure_loaded?(module) do
      Code.compile_string(code!(name, ""), "README.md##{name}")
    end

    module
  end
end
