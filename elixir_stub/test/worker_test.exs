defmodule CompilationBridge.WorkerTest do
  @moduledoc """
  A worker's start-up: it waits for Python's `ready` event without blocking, so it answers system
  messages, obeys shutdown and refuses work while it starts.
  """
  use ExUnit.Case, async: true

  @moduletag capture_log: true

  import CompilationBridge.TestSupport

  alias CompilationBridge.{Pool, Worker}

  # A Python that never announces readiness, with a start-up timeout no test waits for.
  defp start_never_ready(name) do
    start_supervised!(
      {Pool,
       name: name,
       size: 1,
       command: fake_worker("noready"),
       startup_timeout: 600_000,
       shutdown_grace: 100}
    )

    worker_pid(name)
  end

  test "a starting worker answers :sys calls, and shutdown ends it and its Python at once" do
    worker = start_never_ready(:starting_sys)

    # A worker blocked in a receive until its start-up timeout would not answer within 10 s.
    state = :sys.get_state(worker, 10_000)
    assert state.phase == :starting
    assert is_integer(state.os_pid) and os_process_alive?(state.os_pid)

    monitor = Process.monitor(worker)
    :ok = stop_supervised({Pool, :starting_sys})
    assert_receive {:DOWN, ^monitor, :process, ^worker, :shutdown}, 10_000
    # The Python never reads its input, so it only ends because the worker killed it.
    wait_until(fn -> not os_process_alive?(state.os_pid) end)
  end

  test "work dispatched straight to a starting worker is refused at once with a typed error" do
    worker = start_never_ready(:starting_dispatch)
    tag = make_ref()

    :ok = Worker.dispatch(worker, {self(), tag}, "anything", %{}, 60_000)
    assert_receive {^tag, {:error, :worker_starting}}, 10_000

    assert %Snakepit.Error{category: :pool, message: "Worker is starting"} =
             Snakepit.Error.normalize_public_error(:worker_starting)

    # Refusing is all it did: the worker is still starting, and never registered with its pool.
    assert :sys.get_state(worker, 10_000).phase == :starting
    assert Pool.info(:starting_dispatch).workers == []
  end

  test "a worker that became ready has no start-up timer left" do
    [%{pid: worker}] = Enum.take(Pool.info().workers, 1)
    state = :sys.get_state(worker)
    assert state.phase == :ready
    assert state.start_timer == nil
  end
end
