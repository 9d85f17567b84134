defmodule CompilationBridge.PoolTest do
  @moduledoc """
  The pool against real and deliberately broken workers: crashes, hangs, corrupt frames, queueing,
  session affinity, release on owner exit, many concurrent callers.
  """
  use ExUnit.Case, async: true

  # The failures here are deliberate; their log lines would only hide real ones.
  @moduletag capture_log: true

  import CompilationBridge.TestSupport

  alias CompilationBridge.Pool
  alias SnakeBridge.Ref
  alias Vllm.Config.CompilationConfig, as: CC

  defp start_pool(name, opts) do
    opts = Keyword.put_new(opts, :size, 1)
    start_supervised!({Pool, [name: name] ++ opts})
    await_workers(name, opts[:size])
  end

  defp on_pool(name, extra \\ []), do: [__runtime__: [pool_name: name] ++ extra]

  # One caller: `count` times new, mode, compute_hash, release_ref, each in its own session (as each
  # Task is its own process); returns the failures.
  defp rounds(pool, count) do
    Enum.flat_map(1..count, fn _ ->
      with {:ok, cc} <- CC.new(nil, 3, nil, on_pool(pool)),
           {:ok, 3} <- CC.mode(cc),
           {:ok, <<_::binary-size(64)>>} <- CC.compute_hash(cc),
           :ok <- SnakeBridge.Runtime.release_ref(cc) do
        []
      else
        failure -> [failure]
      end
    end)
  end

  test "a worker killed with kill -9 mid-request is replaced and the pool keeps serving" do
    [w0, w1] = start_pool(:kill9, size: 2, env: [{"SNAKEPIT_LOG_LEVEL", "error"}])
    {:ok, cc} = CC.new([mode: 0] ++ on_pool(:kill9))
    {:ok, %Ref{pool_name: :kill9}} = {:ok, cc}
    owner = Pool.info(:kill9).sessions[cc.session_id]
    victim = Enum.find([w0, w1], &(&1.index == owner))

    # A compile keeps the session's worker busy (it imports torch first): kill it meanwhile.
    killer =
      Task.async(fn ->
        wait_until(fn ->
          Enum.any?(Pool.info(:kill9).workers, &(&1.index == owner and &1.busy))
        end)

        kill9(victim.os_pid)
      end)

    # the config ref belongs to this process's session, so the compile runs in it (as in SnakeBridge)
    assert {:error, %Snakepit.Error{category: :worker, message: "Worker process exited"}} =
             CompilationBridge.Compile.compile_model(cc, [max_num_tokens: 4] ++ on_pool(:kill9))

    Task.await(killer)
    workers = await_workers(:kill9, 2)
    assert Enum.find(workers, &(&1.index == owner)).os_pid != victim.os_pid

    # The session's refs outlive the worker (they are in the ref store); everything else goes on.
    assert {:ok, hash} = CC.compute_hash(cc)
    assert byte_size(hash) == 64
    {:ok, fresh} = CC.new([mode: 0] ++ on_pool(:kill9))
    assert {:ok, _} = CC.compute_hash(fresh)
  end

  test "without session affinity, 8 concurrent callers on 3 workers lose no ref" do
    start_pool(:spread, size: 3, session_affinity: false)

    failures =
      1..8
      |> Task.async_stream(fn _caller -> rounds(:spread, 5) end,
        max_concurrency: 8,
        timeout: 120_000
      )
      |> Enum.flat_map(fn {:ok, failed} -> failed end)

    assert failures == []
    assert Pool.info(:spread).sessions == %{}
  end

  test "kill -9 of the worker that made a ref: the next call, on another worker, succeeds" do
    start_pool(:survive, size: 2)
    {:ok, cc} = CC.new([mode: 3, cache_dir: "/tmp/survive"] ++ on_pool(:survive))
    {:ok, hash} = CC.compute_hash(cc)
    owner = Pool.info(:survive).sessions[cc.session_id]
    victim = Enum.find(Pool.info(:survive).workers, &(&1.index == owner))
    kill9(victim.os_pid)
    wait_until(fn -> Pool.info(:survive).sessions[cc.session_id] == nil end)

    assert {:ok, "/tmp/survive"} = CC.cache_dir(cc)
    assert {:ok, ^hash} = CC.compute_hash(cc)
  end

  test "many concurrent callers, each with its own session, all get answers" do
    hashes =
      1..40
      |> Task.async_stream(
        fn i ->
          {:ok, cc} = CC.new(compile_sizes: [rem(i, 4) + 1])
          {:ok, hash} = CC.compute_hash(cc)
          {:ok, [size]} = CC.compile_sizes(cc)
          :ok = SnakeBridge.Runtime.release_ref(cc)
          {size, hash}
        end,
        max_concurrency: 40,
        timeout: 60_000
      )
      |> Enum.map(fn {:ok, pair} -> pair end)

    assert length(hashes) == 40
    # same config, same hash, whichever worker computed it
    assert hashes |> Enum.uniq() |> length() == 4
  end

  test "a session stays on one worker, so its refs work from any process" do
    {:ok, cc} = CC.new(cache_dir: "/tmp/affinity")
    worker = Pool.info().sessions[cc.session_id]
    assert is_integer(worker)

    results =
      1..20
      |> Task.async_stream(fn _ -> CC.cache_dir(cc) end, max_concurrency: 10)
      |> Enum.map(fn {:ok, result} -> result end)

    assert Enum.all?(results, &(&1 == {:ok, "/tmp/affinity"}))
    assert Pool.info().sessions[cc.session_id] == worker
  end

  test "a session's refs are released when the process that owns it exits" do
    parent = self()

    pid =
      spawn(fn ->
        {:ok, cc} = CC.new(cache_dir: "/tmp/owned")
        send(parent, {:ref, cc})
        receive do: (:exit -> :ok)
      end)

    assert_receive {:ref, cc}, 10_000
    assert {:ok, "/tmp/owned"} = CC.cache_dir(cc)
    send(pid, :exit)

    wait_until(fn ->
      match?(
        {:error, %Snakepit.Error{details: %{reason: %Snakepit.Error.KeyError{}}}},
        CC.cache_dir(cc)
      )
    end)
  end

  test "a request past its timeout gets a timeout error and its worker is replaced" do
    [worker] = start_pool(:hang, command: fake_worker("hang"))

    assert {:error, %Snakepit.Error{category: :timeout, message: "Worker execution timed out"}} =
             CC.new(on_pool(:hang, timeout: 300))

    [replacement] = await_workers(:hang, 1)
    wait_until(fn -> hd(Pool.info(:hang).workers).os_pid != worker.os_pid end)
    assert replacement.index == 0
  end

  test "callers beyond the pool's capacity queue, and time out in the queue" do
    start_pool(:queue, command: fake_worker("hang"))
    busy = Task.async(fn -> CC.new(on_pool(:queue, timeout: 2_000)) end)
    wait_until(fn -> Enum.any?(Pool.info(:queue).workers, & &1.busy) end)

    assert {:error, %Snakepit.Error{category: :timeout, message: "Request timed out in queue"}} =
             CC.new(on_pool(:queue, queue_timeout: 100))

    assert {:error, %Snakepit.Error{category: :timeout}} = Task.await(busy, 10_000)
  end

  test "a worker that writes a corrupt frame is replaced; the caller gets an error tuple" do
    [worker] = start_pool(:corrupt, command: fake_worker("corrupt"))
    assert {:error, %Snakepit.Error{category: :pool}} = CC.new(on_pool(:corrupt))

    wait_until(fn ->
      match?([%{os_pid: pid}] when pid != worker.os_pid, Pool.info(:corrupt).workers)
    end)
  end

  test "a worker that dies mid-request gives the caller an error tuple and comes back" do
    [worker] = start_pool(:dies, command: fake_worker("exit"))
    assert {:error, %Snakepit.Error{category: :worker} = error} = CC.new(on_pool(:dies))
    assert error.details.exit_reason == {:exit_status, 7}

    wait_until(fn ->
      match?([%{os_pid: pid}] when pid != worker.os_pid, Pool.info(:dies).workers)
    end)
  end

  test "a Python that never becomes ready: callers get the cause, not a queue timeout" do
    start_supervised!(
      {Pool,
       name: :never,
       size: 1,
       command: fake_worker("noready"),
       startup_timeout: 200,
       queue_timeout: 30_000}
    )

    assert {:error, %Snakepit.Error{category: :pool, message: message}} = CC.new(on_pool(:never))
    assert message == "No worker can start: the worker was not ready within 200 ms"
    assert Process.alive?(Process.whereis(Pool.server(:never)))
  end

  test "a missing interpreter: every call is answered at once with the cause" do
    start_supervised!({Pool, name: :no_python, size: 2, python: "/nonexistent/bin/python3"})
    {took, result} = :timer.tc(fn -> CC.new(on_pool(:no_python)) end)
    assert {:error, %Snakepit.Error{category: :pool, message: message}} = result
    assert message == "No worker can start: /nonexistent/bin/python3: no such executable"
    # Answered by the pool's own knowledge, long before the 60 s queue timeout (a liveness bound).
    assert took < 20_000_000
    assert {:error, %Snakepit.Error{message: ^message}} = CC.new(on_pool(:no_python))
  end

  test "an interpreter without the package: the cause is Python's own error, logged once" do
    python = System.find_executable("python3")

    log =
      ExUnit.CaptureLog.capture_log(fn ->
        start_supervised!(
          {Pool,
           name: :bare_python, size: 2, python: python, env: [{"PYTHONPATH", "/nonexistent"}]}
        )

        assert {:error, %Snakepit.Error{message: message}} = CC.new(on_pool(:bare_python))

        assert message =~
                 "No worker can start: the worker exited with status 1 before it was ready"

        assert message =~ "No module named 'compilation_bridge'"
        # Both workers fail, and fail again after their back-off: one line for the one cause.
        Process.sleep(2_500)
      end)

    assert length(Regex.scan(~r/no worker can start/, log)) == 1
  end

  test "stopping a pool ends its Python processes" do
    [worker] = start_pool(:stops, env: [{"SNAKEPIT_LOG_LEVEL", "error"}])
    {:ok, _cc} = CC.new(on_pool(:stops))
    :ok = stop_supervised({Pool, :stops})

    wait_until(fn ->
      match?(
        {_, 1},
        System.cmd("kill", ["-0", Integer.to_string(worker.os_pid)], stderr_to_stdout: true)
      )
    end)
  end

  test "a request over the frame limit is refused before it is sent; the worker stays" do
    [worker] = start_pool(:small_frames, max_frame_bytes: 4096)
    too_big = String.duplicate("x", 5000)

    assert {:error,
            %Snakepit.Error{category: :pool, details: %{reason: {:frame_too_large, _, 4096}}}} =
             CC.new(on_pool(:small_frames) ++ [cache_dir: too_big])

    assert {:ok, %Ref{}} = CC.new(on_pool(:small_frames) ++ [cache_dir: "/tmp/small"])
    assert [%{os_pid: pid}] = Pool.info(:small_frames).workers
    assert pid == worker.os_pid
  end

  test "a call without a deadline (timeout: :infinity) is served" do
    assert {:ok, %Ref{}} = CC.new(__runtime__: [timeout: :infinity])
  end

  test "an unknown pool is a pool error" do
    assert {:error, %Snakepit.Error{category: :pool, message: "Pool request failed"}} =
             CC.new(on_pool(:no_such_pool))
  end

  test "options are validated with clear messages" do
    assert_raise ArgumentError, ~r/:size must be a positive integer, got 0/, fn ->
      Pool.Options.validate!(size: 0)
    end

    assert_raise ArgumentError, ~r/unknown pool options \[:sise\]/, fn ->
      Pool.Options.validate!(sise: 2)
    end

    assert_raise ArgumentError, ~r/:env must be a list/, fn ->
      Pool.Options.validate!(env: [a: 1])
    end

    assert_raise ArgumentError, ~r/:command must be/, fn ->
      Pool.Options.validate!(command: [])
    end
  end
end
