defmodule CompilationBridge.PoolWaitingTest do
  @moduledoc """
  Callers waiting for a worker: a caller that dies is dropped before its work reaches a worker, and
  the queue's deadlines are absolute with one timer that follows the queue.

  The workers are fake (`record` mode): they log every request they receive, answer it with nil,
  and never answer a request that mentions `block` (the test then frees the worker by killing its
  Python, and the replacement serves the queue).
  """
  use ExUnit.Case, async: true

  @moduletag capture_log: true
  @moduletag :tmp_dir

  import CompilationBridge.TestSupport

  alias CompilationBridge.Pool

  # A one-worker pool whose worker is busy with a request that never ends; returns the worker.
  defp start_blocked_pool(name, log) do
    start_supervised!({Pool, name: name, size: 1, command: fake_worker("record") ++ [log]})
    [worker] = await_workers(name, 1)
    blocker = Task.async(fn -> Pool.execute("block", %{}, pool_name: name) end)
    wait_until(fn -> match?([%{busy: true}], Pool.info(name).workers) end)
    {worker, blocker}
  end

  # Kills the blocked worker's Python: its caller gets the worker's exit, and the replacement
  # serves whoever still waits.
  defp unblock(name, {worker, blocker}) do
    kill9(worker.os_pid)
    assert {:error, {:worker_exit, _}} = Task.await(blocker, 30_000)
    await_workers(name, 1)
  end

  defp queue_timer(name), do: :sys.get_state(Pool.server(name)).timer

  test "a caller that dies while queued: its work is dropped and no worker ever receives it",
       %{tmp_dir: dir} do
    log = Path.join(dir, "requests.log")
    blocked = start_blocked_pool(:dead_caller, log)

    {caller, monitor} =
      spawn_monitor(fn -> Pool.execute("work-of-dead-caller", %{}, pool_name: :dead_caller) end)

    wait_until(fn -> Pool.info(:dead_caller).queued == 1 end)
    Process.exit(caller, :kill)
    assert_receive {:DOWN, ^monitor, :process, ^caller, :killed}
    wait_until(fn -> Pool.info(:dead_caller).queued == 0 end)
    assert queue_timer(:dead_caller) == nil

    unblock(:dead_caller, blocked)
    # Served after the dead caller's work would have been (first in, first out): if that work
    # had stayed queued, the replacement worker would have received it before this.
    assert {:ok, nil} = Pool.execute("work-of-live-caller", %{}, pool_name: :dead_caller)

    requests = File.read!(log)
    assert requests =~ "work-of-live-caller"
    refute requests =~ "work-of-dead-caller"
  end

  test "one timer, for the nearest deadline: an expired caller is answered once, and the timer " <>
         "is cancelled when the last waiting request is dispatched",
       %{tmp_dir: dir} do
    log = Path.join(dir, "requests.log")
    blocked = start_blocked_pool(:deadlines, log)

    late =
      Task.async(fn ->
        Pool.execute("late-work", %{}, pool_name: :deadlines, queue_timeout: 600_000)
      end)

    wait_until(fn -> Pool.info(:deadlines).queued == 1 end)
    {late_timer, late_deadline} = queue_timer(:deadlines)

    # A nearer deadline takes the one timer: the late one's is cancelled, not left to fire.
    early =
      Task.async(fn ->
        Pool.execute("early-work", %{}, pool_name: :deadlines, queue_timeout: 300)
      end)

    assert {:error, %Snakepit.Error{category: :timeout, message: "Request timed out in queue"}} =
             Snakepit.Error.normalize_public_result(Task.await(early, 30_000))

    assert Process.read_timer(late_timer) == false
    # Answered once: its entry is gone, and the one timer is armed again for the late deadline.
    assert Pool.info(:deadlines).queued == 1
    {timer, ^late_deadline} = queue_timer(:deadlines)
    assert timer != late_timer and is_integer(Process.read_timer(timer))

    unblock(:deadlines, blocked)
    assert {:ok, nil} = Task.await(late, 30_000)
    assert queue_timer(:deadlines) == nil
    assert Process.read_timer(timer) == false

    requests = File.read!(log)
    assert requests =~ "late-work"
    refute requests =~ "early-work"
  end
end
