defmodule RealClient.Recipes do
  @moduledoc "The README recipes as Snakepit configurations for this checkout."

  alias RealClient.ReadmeRecipe

  @doc "The allowed root handed to the workers (the README's /var/cache/compilation-bridge)."
  def cache_root do
    root =
      Path.join(
        System.tmp_dir!(),
        "compilation-bridge-realclient-#{System.get_env("USER", "user")}"
      )

    File.mkdir_p!(root)
    File.chmod!(root, 0o700)
    root
  end

  def config!(:launcher), do: ReadmeRecipe.config!("launcher-config", cache_root())

  def config!(:adapter) do
    ReadmeRecipe.compile_module!("adapter-module", MyApp.CompilationBridgeAdapter)
    ReadmeRecipe.config!("adapter-config", cache_root())
  end

  # This worker as :default (the launcher), and Snakepit's own server with vLLM as :vllm.
  def config!(:two_pools) do
    ReadmeRecipe.compile_module!("two-pools-adapter", MyApp.VllmPythonAdapter)
    ReadmeRecipe.config!("two-pools", cache_root())
  end
end
