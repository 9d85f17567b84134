defmodule CompilationBridge.RealClient.MixProject do
  @moduledoc """
  The real-client conformance suite: the `vllm` hex package 0.3.0 (SnakeBridge 0.16, Snakepit 0.13) driving
  this repository's worker through a real Snakepit pool, once per recipe the README documents.

  With hex.pm reachable the three packages come from hex as a user gets them. Where it is not,
  `REALCLIENT_DEPS` names a folder of their pinned sources (and their dependencies') to use as path deps.
  """
  use Mix.Project

  # Every package of the dependency tree: each declares its own dependencies as hex requirements, so each
  # needs a path override when hex cannot be reached.
  @offline_deps ~w(vllm snakebridge snakepit jason grpc protobuf googleapis mint hpax gun cowboy cowlib
                   ranch flow gen_stage telemetry telemetry_metrics telemetry_poller opentelemetry_api
                   opentelemetry opentelemetry_exporter opentelemetry_telemetry telemetry_metrics_prometheus)a

  def project do
    [
      app: :compilation_bridge_realclient,
      version: "0.1.0",
      elixir: "~> 1.18",
      elixirc_paths: elixirc_paths(Mix.env()),
      # Nothing starts on its own: each test group configures Snakepit from a README recipe, then starts it.
      aliases: [test: "test --no-start"],
      deps: deps()
    ]
  end

  def application, do: [extra_applications: [:logger]]

  defp elixirc_paths(:test), do: ["test/support"]
  defp elixirc_paths(_env), do: []

  defp deps do
    case System.get_env("REALCLIENT_DEPS") do
      nil ->
        [{:vllm, "0.3.0"}, {:snakebridge, "0.16.0"}, {:snakepit, "0.13.0"}]

      dir ->
        for name <- @offline_deps,
            do: {name, path: Path.join(dir, Atom.to_string(name)), override: true}
    end
  end
end
