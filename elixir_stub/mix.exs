defmodule CompilationBridge.MixProject do
  use Mix.Project

  # The stand-ins are defined under the real packages' module names, so that code written against
  # SnakeBridge, Snakepit and the vllm package runs here unchanged; loading both would redefine them.
  @description """
  A zero-dependency Elixir client for the compilation-bridge Python worker, with the API of the
  `vllm` hex package's generated modules. It defines its own stand-ins for `SnakeBridge.*` and
  `Snakepit.*` (runtime, refs, errors, session manager) and generates its own `Vllm.*` modules:
  this project never coexists with the real `snakebridge`, `snakepit` or `vllm` packages, and must
  not be used as a dependency beside them.
  """

  def project do
    [
      app: :compilation_bridge,
      version: "0.1.0",
      description: @description,
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
