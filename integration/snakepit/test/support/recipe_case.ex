defmodule RealClient.RecipeCase do
  @moduledoc """
  The conformance tests, run once per README recipe: a real Snakepit pool of this repository's worker,
  driven through the generated `Vllm.Config.CompilationConfig` of the `vllm` package and SnakeBridge's
  runtime, exactly as an application would.
  """

  defmacro __using__(recipe: recipe) do
    quote do
      use ExUnit.Case, async: false
      import RealClient.RecipeCase
      alias RealClient.{Pool, VllmOracle}
      alias SnakeBridge.Runtime
      alias Vllm.Config.CompilationConfig, as: CC

      @moduletag timeout: 600_000
      @recipe unquote(recipe)

      setup_all do
        config = RealClient.Recipes.config!(@recipe)

        # The test-only additions: compilation_bridge.testing (sleep) for the timeout test, and the
        # CPU KV cache size, which the CPU platform takes from the machine's memory unless told (vLLM
        # and this worker plan for different hosts): told, as vLLM is (RealClient.VllmOracle).
        config =
          Pool.start!(config, %{
            "COMPILATION_BRIDGE_TEST_HOOKS" => "1",
            "VLLM_CPU_KVCACHE_SPACE" => "4"
          })

        on_exit(fn -> Pool.stop() end)
        {:ok, config: config, instance: config[:snakepit][:instance_name]}
      end

      test "every function of the generated module answers as vLLM 0.14.0 does" do
        {calls, _} = assert_answers_as_vllm(RealClient.Calls)
        assert length(calls) > 100
      end

      test "the rest of the configuration family, module by module, reads as vLLM 0.14.0 does" do
        {calls, _} = assert_answers_as_vllm(RealClient.FamilyCalls)
        modules = calls |> Enum.map(&elem(&1, 0)) |> Enum.uniq()
        assert modules == RealClient.FamilyCalls.modules(), "every module has a getter read"
      end

      test "EngineArgs |> create_engine_config builds a VllmConfig whose refs read as vLLM 0.14.0's" do
        {_, expected} = assert_answers_as_vllm(RealClient.EngineCalls)

        assert Enum.any?(expected, &Map.has_key?(&1, "error")),
               "a refused argument set is compared too"
      end

      test "the README's first calls run as shown" do
        Code.eval_string(RealClient.ReadmeRecipe.code!("first-calls", ""))
      end

      test "the README's engine plan runs as shown" do
        Code.eval_string(RealClient.ReadmeRecipe.code!("plan-an-engine", ""))
      end

      test "the table covers every function the vllm package generates" do
        generated =
          CC.__info__(:functions)
          |> Enum.map(fn {name, _} -> name end)
          |> Enum.reject(&(&1 in [:new] or String.starts_with?(Atom.to_string(&1), "__")))
          |> MapSet.new()

        assert MapSet.new(RealClient.Calls.functions()) == generated
      end

      test "returned objects are refs whose attributes read through the client" do
        {:ok, cc} = CC.new(nil, 3, nil, compile_ranges_split_points: [8, 32])
        {:ok, [first, second]} = CC.get_compile_ranges(cc)
        assert %SnakeBridge.Ref{type_name: "Range"} = first
        assert {:ok, 1} = Runtime.get_attr(first, :start)
        assert {:ok, 8} = Runtime.get_attr(first, :end)
        assert {:ok, 9} = Runtime.get_attr(second, :start)
        assert {:ok, 32} = Runtime.get_attr(second, :end)
        {:ok, full} = CC.new(nil, 3, nil, cudagraph_mode: "FULL")
        {:ok, mode} = CC.cudagraph_mode(full)
        assert {:ok, "FULL"} = Runtime.get_attr(mode, :name)
        assert {:ok, 2} = Runtime.get_attr(mode, :value)
      end

      test "set_attr writes what vLLM lets a caller assign, and keeps traced_files" do
        {:ok, cc} = CC.new(nil, 3, nil, [])
        assert {:ok, true} = Runtime.set_attr(cc, :compilation_time, 1.5)
        assert {:ok, 1.5} = CC.compilation_time(cc)
        text = "/tmp/ünï — ✓ 🐍"
        assert {:ok, true} = Runtime.set_attr(cc, :cache_dir, text)
        assert {:ok, ^text} = CC.cache_dir(cc)
        assert {:ok, true} = Runtime.set_attr(cc, :compile_sizes, [1, 2, 4])
        assert {:ok, [1, 2, 4]} = CC.compile_sizes(cc)

        assert {"PermissionError", _} =
                 error(Runtime.set_attr(cc, :traced_files, ["/etc/shadow"]))

        assert {"PermissionError", _} = error(Runtime.set_attr(cc, :__class__, "x"))
      end

      test "release_ref and release_session end refs", %{} do
        session = "realclient-#{System.unique_integer([:positive])}"
        opts = [__runtime__: [session_id: session]]
        {:ok, cc} = CC.new(nil, 3, nil, opts)
        {:ok, other} = CC.new(nil, nil, nil, opts)
        assert :ok = Runtime.release_ref(cc)
        assert {"KeyError", message} = error(CC.mode(cc))
        assert message =~ "Unknown SnakeBridge reference"
        assert {:ok, nil} = CC.mode(other)
        assert :ok = Runtime.release_session(session)
        assert {"KeyError", _} = error(CC.mode(other))
      end

      test "errors arrive as Python exceptions" do
        assert {"ValidationError", message} = error(CC.new(nil, nil, nil, mode: 3))
        assert message =~ "Got multiple values for argument"
        {:ok, cc} = CC.new(nil, nil, nil, [])
        assert {"AttributeError", _} = error(Runtime.call_method(cc, :no_such_method, []))
        assert {"ImportError", _} = error(Runtime.call("os", "getcwd", []))
      end

      test "a streamed compile_model reports progress, then runs and reports like eager" do
        {:ok, cc} = CC.new(nil, 3, nil, [])
        parent = self()

        assert {:ok, :done} =
                 Runtime.stream(
                   "compilation_bridge.compile",
                   "compile_model",
                   [cc],
                   [max_num_tokens: 64],
                   fn chunk -> send(parent, {:chunk, chunk}) end
                 )

        chunks = collect_chunks()
        {[result], progress} = Enum.split_with(chunks, &match?(%{"event" => "result"}, &1))
        assert progress != [] and Enum.all?(progress, &is_binary(&1["event"]))
        model = result["result"]
        assert %SnakeBridge.Ref{type_name: "CompiledModel"} = model
        assert {:ok, run} = Runtime.call_method(model, :run, [8], __runtime__: [timeout: 300_000])
        assert run["num_tokens"] == 8 and run["max_abs_diff_vs_eager"] < 1.0e-4
        assert {:ok, report} = Runtime.call_method(model, :report, [])
        assert report["mode"] in [3, "VLLM_COMPILE"] and report["num_pieces"] > 0
        assert String.starts_with?(report["local_cache_dir"], RealClient.Recipes.cache_root())
        assert {"AssertionError", message} = error(Runtime.call_method(model, :run, [100]))
        assert message =~ "out of considered ranges"
      end

      test "the README's compile progress prints a line per event, then runs the model" do
        {binding, printed} =
          ExUnit.CaptureIO.with_io(fn ->
            {_, binding} = Code.eval_string(RealClient.ReadmeRecipe.code!("compile-progress", ""))
            binding
          end)

        events = printed |> String.split("\n", trim: true) |> Enum.map(&hd(String.split(&1, " ")))

        # A first compile traces and splits (pieces compile at each range's first run); a later one in
        # the same cache loads the bundle instead.
        assert "trace_end" in events or "warm_start_end" in events, printed
        assert "warm_start_declined" in events or "piece_loaded" in events, printed
        assert %SnakeBridge.Ref{type_name: "CompiledModel"} = binding[:model]
        assert binding[:diff] < 1.0e-4
      end

      test "a call past its timeout times out, and the worker keeps serving", %{
        instance: instance
      } do
        before = Pool.worker_pids(instance)

        # Snakepit 0.13 runs two timers on this one deadline: its pool's (`category: :timeout`) and the
        # gRPC call's (DEADLINE_EXCEEDED, reported as `category: :pool, reason: :timeout`). Which fires
        # first depends on scheduling: a loaded machine gave the second in 4 of 15 runs. Either is the
        # caller's timeout.
        assert {:error, %Snakepit.Error{} = error} =
                 Runtime.call("compilation_bridge.testing", "sleep", [5],
                   __runtime__: [timeout: 1000]
                 )

        assert error.category == :timeout or
                 (error.category == :pool and error.details.reason == :timeout)

        {:ok, cc} = CC.new(nil, 3, nil, [])
        assert {:ok, 3} = CC.mode(cc)
        assert Pool.worker_pids(instance) == before
      end

      test "kill -9 of a worker: Snakepit replaces it and calls succeed again", %{
        instance: instance
      } do
        # Kill a worker that is serving, not one still in Snakepit's post-ready sequence (Pool.settle/1).
        :ok = Pool.settle()
        [pid | _] = before = Pool.worker_pids(instance)
        Pool.kill_between_heartbeats!(pid)

        # Generous wall-clock deadlines: a loaded machine may take seconds to start the replacement.
        # On failure, say which processes ran and what Snakepit's pool and supervisors held.
        assert Pool.eventually(
                 fn ->
                   pids = Pool.worker_pids(instance)
                   length(pids) == length(before) and pid not in pids
                 end,
                 60_000
               ),
               "killed #{pid} of #{inspect(before)}; now #{inspect(Pool.worker_pids(instance))}; " <>
                 Pool.describe()

        :ok = Pool.settle()

        # Each attempt is bounded too: a call that lands on the killed worker fails, the next one answers.
        assert Pool.eventually(
                 fn ->
                   opts = [__runtime__: [timeout: 10_000]]
                   match?({:ok, 3}, with({:ok, cc} <- CC.new(nil, 3, nil, opts), do: CC.mode(cc)))
                 end,
                 60_000
               )
      end

      test "Application.stop leaves no worker process", %{config: config, instance: instance} do
        assert [_ | _] = Pool.worker_pids(instance)
        Pool.stop()
        assert Pool.eventually(fn -> Pool.worker_pids(instance) == [] end, 3_000)
        Pool.start!(config)
      end

      test "kill -9 of the BEAM leaves no orphan worker" do
        instance = "realclient_beam_#{System.unique_integer([:positive])}"
        beam = RealClient.ChildBeam.start!(@recipe, instance)
        assert [_ | _] = workers = Pool.worker_pids(instance)
        RealClient.ChildBeam.kill!(beam)
        # The workers' heartbeats to the dead BEAM fail a few times, then they exit on their own.
        assert Pool.eventually(fn -> not Enum.any?(workers, &Pool.alive?/1) end, 20_000)
      end
    end
  end

  @doc """
  Runs every call of a table module (`table/0`, `python_call/1`, `run/1`, `describe/1`) through the
  client, asserts each answer equals vLLM 0.14.0's for the same call, and returns `{calls, vLLM's answers}`.
  """
  def assert_answers_as_vllm(table) do
    calls = table.table()
    expected = RealClient.VllmOracle.answers!(Enum.map(calls, &table.python_call/1))

    mismatches =
      for {call, want} <- Enum.zip(calls, expected),
          got = call |> table.run() |> RealClient.VllmOracle.plain(),
          got != want,
          do: "#{table.describe(call)}:\n  got   #{inspect(got)}\n  vLLM  #{inspect(want)}"

    ExUnit.Assertions.assert(mismatches == [], Enum.join(mismatches, "\n"))
    {calls, expected}
  end

  def error({:error, reason}), do: RealClient.VllmOracle.python_error(reason)
  def error(other), do: raise("expected an error, got #{inspect(other)}")

  def collect_chunks(acc \\ []) do
    receive do
      {:chunk, chunk} -> collect_chunks([chunk | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end
end
