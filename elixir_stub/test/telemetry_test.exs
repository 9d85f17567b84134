defmodule CompilationBridge.TelemetryTest do
  @moduledoc """
  `CompilationBridge.Telemetry` on its own, and the pool's call spans against real and broken
  workers. Handlers are global and other tests call the pools at the same time, so each handler
  forwards only the events of its own session or pool to its test. Every event of a call is
  emitted in the caller's process before the call returns, so no assertion waits on a clock.
  """
  use ExUnit.Case, async: true

  @moduletag capture_log: true

  import CompilationBridge.TestSupport
  import ExUnit.CaptureLog

  alias CompilationBridge.{Pool, Telemetry}
  alias SnakeBridge.Runtime
  alias Vllm.Config.{CompilationConfig, CompilationMode, CUDAGraphMode}

  @events for kind <- [:start, :stop, :exception], do: [:compilation_bridge, :call, kind]

  # Sends `{:event, name, measurements, metadata}` to `test` for events whose metadata matches.
  def forward(event, measurements, metadata, {test, key, value}) do
    if Map.get(metadata, key) == value, do: send(test, {:event, event, measurements, metadata})
  end

  defp listen(key, value) do
    id = {__MODULE__, make_ref()}
    :ok = Telemetry.attach_many(id, @events, &__MODULE__.forward/4, {self(), key, value})
    on_exit(fn -> Telemetry.detach(id) end)
    id
  end

  defp session, do: "telemetry_#{System.unique_integer([:positive])}"

  describe "the handler table" do
    test "attach, execute, detach; ids are unique; nobody listening costs nothing and fails nothing" do
      event = [:cb_telemetry_test, :plain]
      assert Telemetry.execute(event, %{n: 1}, %{}) == :ok

      assert Telemetry.start(event, fn -> flunk("metadata built with nobody listening") end) ==
               nil

      id = {__MODULE__, :plain}
      assert :ok = Telemetry.attach(id, event, &__MODULE__.forward/4, {self(), :tag, :mine})

      assert {:error, :already_exists} =
               Telemetry.attach(id, [:other], fn _, _, _, _ -> :ok end, nil)

      Telemetry.execute(event, %{n: 1}, %{tag: :mine})
      assert_received {:event, ^event, %{n: 1}, %{tag: :mine}}

      assert :ok = Telemetry.detach(id)
      assert {:error, :not_found} = Telemetry.detach(id)
      Telemetry.execute(event, %{n: 2}, %{tag: :mine})
      refute_received {:event, _, _, _}
    end

    test "a raising handler is detached and logged; the other handlers and the caller go on" do
      event = [:cb_telemetry_test, :raising]
      bad = {__MODULE__, :raising}
      good = {__MODULE__, :good}
      :ok = Telemetry.attach(bad, event, fn _, _, _, _ -> raise "boom" end, nil)
      :ok = Telemetry.attach(good, event, &__MODULE__.forward/4, {self(), :tag, :mine})
      on_exit(fn -> Telemetry.detach(good) end)

      log = capture_log(fn -> assert Telemetry.execute(event, %{}, %{tag: :mine}) == :ok end)
      assert log =~ "Handler #{inspect(bad)} has failed and has been detached"
      assert log =~ "boom"
      assert_received {:event, ^event, _, _}
      assert {:error, :not_found} = Telemetry.detach(bad)
    end

    test "span/3: start and stop share a context; a raise is an :exception event and re-raised" do
      prefix = [:cb_telemetry_test, :span]
      id = {__MODULE__, :span}
      events = for kind <- [:start, :stop, :exception], do: prefix ++ [kind]
      :ok = Telemetry.attach_many(id, events, &__MODULE__.forward/4, {self(), :tag, :mine})
      on_exit(fn -> Telemetry.detach(id) end)

      assert Telemetry.span(prefix, %{tag: :mine}, fn -> {42, %{extra: 1}} end) == 42
      assert_received {:event, [_, _, :start], %{system_time: _, monotonic_time: _}, start}
      assert_received {:event, [_, _, :stop], %{duration: duration}, %{extra: 1} = stop}
      assert is_integer(duration) and duration >= 0
      assert is_reference(start.telemetry_span_context)
      assert stop.telemetry_span_context == start.telemetry_span_context

      assert_raise RuntimeError, "inside", fn ->
        Telemetry.span(prefix, %{tag: :mine}, fn -> raise "inside" end)
      end

      assert_received {:event, [_, _, :start], _, _}
      assert_received {:event, [_, _, :exception], %{duration: _}, metadata}

      assert %{kind: :error, reason: %RuntimeError{message: "inside"}, stacktrace: [_ | _]} =
               metadata
    end
  end

  describe "the pool's call spans" do
    test "a successful call: :start, then :stop with the worker's id, OS pid and time" do
      s = session()
      listen(:session_id, s)
      assert {:ok, cc} = Runtime.with_session(s, fn -> CompilationConfig.new(mode: 3) end)

      assert_received {:event, [:compilation_bridge, :call, :start], start_measurements, start}
      assert %{system_time: _, monotonic_time: _} = start_measurements

      assert %{
               pool_name: :default,
               tool: "snakebridge.call",
               session_id: ^s,
               call_type: "class",
               python_module: "vllm.config",
               class: "CompilationConfig",
               function: "__init__",
               telemetry_span_context: context
             } = start

      assert_received {:event, [:compilation_bridge, :call, :stop], measurements, stop}
      refute_received {:event, [:compilation_bridge, :call, :exception], _, _}
      assert %{result: :ok, telemetry_span_context: ^context, worker_id: index} = stop
      assert Map.take(stop, Map.keys(start)) == start

      # The worker's time lies inside the caller's span.
      assert %{duration: duration, worker_time: worker_time, monotonic_time: _} = measurements
      assert is_integer(worker_time) and 0 <= worker_time and worker_time <= duration

      # The session's worker, as the pool sees it.
      assert Pool.info().sessions[s] == index
      assert Enum.find(Pool.info().workers, &(&1.index == index)).os_pid == stop.worker_os_pid
      assert {:ok, 3} = CompilationConfig.mode(cc)
      assert :ok = Runtime.release_session(s)
    end

    test "a Python exception is a :stop with result: :error, not an :exception" do
      s = session()
      listen(:session_id, s)
      assert {:error, %Snakepit.Error{}} = Runtime.with_session(s, fn -> CUDAGraphMode.new(9) end)

      assert_received {:event, [:compilation_bridge, :call, :start], _, _}
      assert_received {:event, [:compilation_bridge, :call, :stop], %{worker_time: _}, stop}
      refute_received {:event, [:compilation_bridge, :call, :exception], _, _}

      assert %{
               result: :error,
               error: {:python, %{"type" => "ValueError"}},
               class: "CUDAGraphMode"
             } = stop

      assert is_integer(stop.worker_id) and is_integer(stop.worker_os_pid)
    end

    test "the pool's own refusal is a :stop with the reason, and no worker" do
      listen(:pool_name, :no_such_pool)

      assert {:error, {:pool_not_found, :no_such_pool}} =
               Pool.execute("snakebridge.call", %{}, pool_name: :no_such_pool)

      assert_received {:event, [:compilation_bridge, :call, :start], _, _}
      assert_received {:event, [:compilation_bridge, :call, :stop], measurements, stop}
      assert %{result: :error, error: {:pool_not_found, :no_such_pool}} = stop
      refute Map.has_key?(stop, :worker_id)
      refute Map.has_key?(measurements, :worker_time)
    end

    test "a worker whose Python dies under the call: :exception with kind, reason and the worker" do
      start_supervised!({Pool, name: :telemetry_dies, size: 1, command: fake_worker("exit")})
      [worker] = await_workers(:telemetry_dies, 1)
      listen(:pool_name, :telemetry_dies)
      payload = %{"session_id" => session(), "python_module" => "m", "function" => "f"}

      assert {:error, {:worker_exit, {:exit_status, 7}}} =
               Pool.execute("snakebridge.call", payload, pool_name: :telemetry_dies)

      assert_received {:event, [:compilation_bridge, :call, :start], _, %{function: "f"}}
      assert_received {:event, [:compilation_bridge, :call, :exception], measurements, metadata}
      refute_received {:event, [:compilation_bridge, :call, :stop], _, _}
      assert %{duration: _, monotonic_time: _, worker_time: _} = measurements

      assert %{
               kind: :exit,
               reason: {:worker_exit, {:exit_status, 7}},
               stacktrace: [],
               worker_id: 0,
               python_module: "m"
             } = metadata

      assert metadata.worker_os_pid == worker.os_pid
    end

    test "a request past its timeout: :exception with reason :worker_timeout" do
      start_supervised!({Pool, name: :telemetry_hangs, size: 1, command: fake_worker("hang")})
      await_workers(:telemetry_hangs, 1)
      listen(:pool_name, :telemetry_hangs)

      assert {:error, :worker_timeout} =
               Pool.execute("snakebridge.call", %{}, pool_name: :telemetry_hangs, timeout: 200)

      assert_received {:event, [:compilation_bridge, :call, :exception], _, metadata}
      assert %{kind: :exit, reason: :worker_timeout, worker_id: 0} = metadata
    end

    test "a handler that raises is detached and the call still succeeds; detach stops the events" do
      s = session()
      bad = {__MODULE__, :raises_on_call}

      raising = fn _event, _measurements, metadata, session ->
        if metadata.session_id == session, do: raise("handler bug")
      end

      :ok = Telemetry.attach(bad, [:compilation_bridge, :call, :start], raising, s)
      on_exit(fn -> Telemetry.detach(bad) end)
      good = listen(:session_id, s)

      log =
        capture_log(fn ->
          assert {:ok, 3} = Runtime.with_session(s, fn -> CompilationMode.vllm_compile() end)
        end)

      assert log =~ "has failed and has been detached"
      assert {:error, :not_found} = Telemetry.detach(bad)
      assert_received {:event, [:compilation_bridge, :call, :start], _, _}
      assert_received {:event, [:compilation_bridge, :call, :stop], _, %{result: :ok}}

      assert :ok = Telemetry.detach(good)
      assert {:ok, 3} = Runtime.with_session(s, fn -> CompilationMode.vllm_compile() end)
      refute_received {:event, _, _, _}
      assert :ok = Runtime.release_session(s)
    end
  end
end

defmodule CompilationBridge.TelemetryForwardingTest do
  @moduledoc """
  Forwarding to the real `:telemetry` when it is loaded. The stub has no `:telemetry`, so this test
  defines a stand-in module under that name and leaves it loaded; it is a sync test, so it runs
  after every async test, which all ran without one.
  """
  use ExUnit.Case, async: false

  alias SnakeBridge.Runtime

  test "with :telemetry loaded, the pool's events also reach :telemetry.execute/3" do
    Process.register(self(), :compilation_bridge_telemetry_sink)

    unless function_exported?(:telemetry, :execute, 3) do
      Module.create(
        :telemetry,
        quote do
          def execute(event, measurements, metadata) do
            sink = Process.whereis(:compilation_bridge_telemetry_sink)
            if sink, do: send(sink, {:telemetry, event, measurements, metadata})
            :ok
          end
        end,
        Macro.Env.location(__ENV__)
      )
    end

    s = "telemetry_forwarding_#{System.unique_integer([:positive])}"

    assert {:ok, 3} =
             Runtime.with_session(s, fn -> Vllm.Config.CompilationMode.vllm_compile() end)

    assert_received {:telemetry, [:compilation_bridge, :call, :start], _, %{session_id: ^s}}

    assert_received {:telemetry, [:compilation_bridge, :call, :stop], %{worker_time: _},
                     %{session_id: ^s, result: :ok}}

    assert :ok = Runtime.release_session(s)
  end
end
