defmodule RealClient.TwoPoolsTest do
  @moduledoc """
  The README's two-pool recipe, run verbatim: this worker as the `:default` pool (through the launcher)
  and, as `:vllm`, Snakepit 0.13's own Python server with SnakeBridge 0.16's adapter on the oracle's
  interpreter, which has vLLM 0.14.0 (CPU build). Calls that name no pool reach this worker; calls routed
  with `__runtime__: [pool_name: :vllm]` reach vLLM itself, and so do the later calls on the refs they
  return.
  """
  use ExUnit.Case, async: false

  alias RealClient.{Pool, ReadmeRecipe, VllmOracle}
  alias SnakeBridge.Runtime
  alias Vllm.Config.CompilationConfig, as: CC

  @moduletag timeout: 600_000
  # What the README's calls build, as the oracle's plain calls (vllm_expectations.py).
  @config %{"args" => [nil, 3, nil], "kwargs" => %{"compile_ranges_split_points" => [8, 32]}}
  @params %{"args" => [], "kwargs" => %{"temperature" => 0.5, "top_p" => 0.9, "max_tokens" => 16}}
  # vLLM's first call in a worker imports vLLM: seconds, more on a loaded machine.
  @vllm_call [__runtime__: [pool_name: :vllm, timeout: 120_000]]

  setup_all do
    require_server_packages!()
    config = Pool.start!(RealClient.Recipes.config!(:two_pools))
    on_exit(fn -> Pool.stop() end)
    {:ok, config: config, instance: config[:snakepit][:instance_name]}
  end

  test "the README's calls run as shown: the config on this worker, SamplingParams on vLLM's pool" do
    {_, binding} = Code.eval_string(ReadmeRecipe.code!("two-pools-calls", ""))

    [hash, top_p, repr, temperature] =
      VllmOracle.answers!([
        %{"new" => @config, "function" => "compute_hash", "args" => []},
        sampling_params_call("top_p"),
        sampling_params_call("__repr__"),
        sampling_params_call("temperature")
      ])

    assert %{"ok" => binding[:hash]} == hash
    assert %{"ok" => binding[:top_p]} == top_p
    params = binding[:params]
    assert %SnakeBridge.Ref{type_name: "SamplingParams", pool_name: "vllm"} = params
    # Neither names a pool: each follows its ref's.
    assert %{"ok" => elem(Runtime.call_method(params, :__repr__, []), 1)} == repr
    assert %{"ok" => elem(Vllm.SamplingParams.temperature(params), 1)} == temperature
    assert {:ok, 3} = CC.mode(binding[:cc])
  end

  test "each pool is what the recipe says: this worker, and Snakepit's server with vLLM", %{
    instance: instance
  } do
    :ok = Pool.settle()
    ours = pool_os_pids(:default)
    [vllm_worker] = pool_os_pids(:vllm)

    # The :default pool's workers run this checkout's grpc_server.py (Pool.worker_pids/1 finds them so).
    assert Enum.sort(ours) == Enum.sort(Pool.worker_pids(instance)) and length(ours) == 2

    # The :vllm pool's worker is the oracle's interpreter running Snakepit's own server and SnakeBridge's
    # adapter, and a routed call runs in it.
    [python, script | args] = cmdline(vllm_worker)
    assert python == Path.join(VllmOracle.venv(), "bin/python")
    assert script == Application.app_dir(:snakepit, "priv/python/grpc_server.py")
    assert ["--adapter", "snakebridge_adapter.SnakeBridgeAdapter" | _] = args
    # (Snakepit's own server sends a bare number as a float: 4242 arrives as 4242.0.)
    assert {:ok, pid} = Runtime.call("os", "getpid", [], @vllm_call)
    assert pid == vllm_worker
    assert {:ok, "0.14.0"} = Runtime.get_module_attr("vllm", :__version__, @vllm_call)

    # A call that names no pool reaches this worker, which serves vLLM's configuration and nothing else.
    assert {"ImportError", _} = RealClient.RecipeCase.error(Runtime.call("os", "getpid", []))
  end

  test "a ref is served by the pool that made it, and only there" do
    {:ok, cc} = CC.new(nil, 3, nil, [])
    {:ok, params} = Vllm.SamplingParams.new([], [top_p: 0.5, max_tokens: 7] ++ @vllm_call)
    assert cc.pool_name == nil and params.pool_name == "vllm"
    assert {:ok, 0.5} = Vllm.SamplingParams.top_p(params)
    assert {:ok, 3} = CC.mode(cc)

    # An int read from vLLM's pool arrives as a float: Snakepit 0.13's own server types every bare number
    # it answers as "float". This worker answers ints as ints.
    assert {:ok, 7.0} = Vllm.SamplingParams.max_tokens(params)
    {:ok, ours} = Vllm.SamplingParams.new([], max_tokens: 7)
    assert {:ok, 7} = Vllm.SamplingParams.max_tokens(ours)

    # Sent to the other pool, each ref is unknown there: this worker's ref store and SnakeBridge's
    # adapter's registry in the vLLM worker hold only their own pool's refs.
    to_default = [__runtime__: [pool_name: :default]]

    for {ref, attr, opts} <- [{params, :top_p, to_default}, {cc, :mode, @vllm_call}] do
      assert {"KeyError", message} = error(Runtime.get_attr(ref, attr, opts))
      assert message =~ "Unknown SnakeBridge reference"
    end
  end

  test "Application.stop leaves no worker of either pool", %{config: config, instance: instance} do
    :ok = Pool.settle()
    workers = pool_os_pids(:default) ++ pool_os_pids(:vllm)
    assert length(workers) == 3
    Pool.stop()
    assert Pool.eventually(fn -> not Enum.any?(workers, &Pool.alive?/1) end, 10_000)
    assert Pool.worker_pids(instance) == []
    Pool.start!(config)
  end

  # Without them the :vllm worker dies at start and Snakepit only says that the pool did not come up.
  defp require_server_packages! do
    python = Path.join(VllmOracle.venv(), "bin/python")
    check = "import grpc, google.protobuf, vllm"

    case System.cmd(python, ["-c", check], stderr_to_stdout: true) do
      {_, 0} ->
        :ok

      {out, _} ->
        raise "#{python} lacks what Snakepit's own server needs beside vLLM " <>
                "(bash scripts/setup_oracle.sh installs tests/oracle/requirements.txt): #{out}"
    end
  end

  defp sampling_params_call(function),
    do: %{
      "module" => "vllm",
      "cls" => "SamplingParams",
      "new" => @params,
      "function" => function,
      "args" => []
    }

  # The OS pids of one pool's workers, from Snakepit's own bookkeeping.
  defp pool_os_pids(pool) do
    ids = Snakepit.Pool.list_workers(Snakepit.Pool, pool)
    for state <- Pool.grpc_worker_states(), state.id in ids, do: state.process_pid
  end

  defp cmdline(os_pid),
    do: "/proc/#{os_pid}/cmdline" |> File.read!() |> String.split(<<0>>, trim: true)

  defp error(result), do: RealClient.RecipeCase.error(result)
end
