defmodule CompilationBridge.MixProject do
  use Mix.Project

  def project do
    [
      app: :compilation_bridge,
      version: "0.1.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      elixirc_paths: elixirc_paths(Mix.env()),
      # Zero hex dependencies: everything this project needs is in OTP and in lib/.
      deps: []
    ]
  end

  def application do
    [
      extra_applications: [:logger],
      mod: {CompilationBridge.Application, []}
    ]
  end

  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_env), do: ["lib"]
end
