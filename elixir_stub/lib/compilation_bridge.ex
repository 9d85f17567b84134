defmodule CompilationBridge do
  @moduledoc """
  Live vLLM 0.14.0 `CompilationConfig` objects (and real torch compilation) from Elixir, with no
  hex dependency: generated modules (`Vllm.Config.CompilationConfig`, ...) call the SnakeBridge
  stand-in `SnakeBridge.Runtime`, which runs each call on a pool of Python workers
  (`CompilationBridge.Pool`), each an Erlang port speaking length-prefixed MessagePack frames.

      {:ok, cc} = Vllm.Config.CompilationConfig.new(mode: 3, compile_sizes: [1, 2])
      {:ok, hash} = Vllm.Config.CompilationConfig.compute_hash(cc)
  """
end
