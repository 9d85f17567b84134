defmodule RealClient.Chaos do
  @moduledoc """
  The chaos scenarios (test/chaos_test.exs), their callers and their killer. A caller runs rounds of the
  standard workload (construct, set, read back, hash, release) in a session of its own and tallies every
  call's outcome; the killer kill -9s a worker only once the pool has recovered from the previous kill,
  and proves that a ref made just before each kill still answers afterwards.
  """

  import ExUnit.Assertions

  alias RealClient.Pool
  alias SnakeBridge.Runtime
  alias Vllm.Config.CompilationConfig, as: CC

  # Snakepit's reasons for a call that was in flight on (or sent to) a worker that died: the worker's exit,
  # or its gRPC connection closing under the call (status 13 ":stream_error: :closed" or 14 unavailable,
  # which Snakepit reports as a pool error).
  @closed_connection [:internal, :unavailable]

  # Each call attempt's own bound: a call that hangs is a failure to report, not a stalled test.
  @call_timeout 30_000

  # Bounds on the callers' rounds: they stop when the killer is done, or at this many rounds.
  @max_rounds 5_000

  # Compiles started to have one killed in flight: a compile may finish before its worker is found.
  @compile_attempts 3

  # The BEAM's memory beyond which a scenario stops at once: Snakepit 0.13's misrouting after a kill
  # (docs/worker.md, "Known limits") grows it by gigabytes a second, and a test must fail, not take the host down.
  @beam_memory_limit 1_000_000_000

  defstruct calls: 0, rounds: 0, failed: [], wrong: [], unacceptable: []

  @doc """
  The pool settings of the chaos scenarios: Snakepit's heartbeat off. With it on, Snakepit 0.13 loses a
  worker for good when the kill lands while a heartbeat ping is in flight (docs/worker.md, "Known limits"): the
  failed ping ends the worker's GenServer with a `{:shutdown, _}` reason, which its supervisor does not
  restart, and the pool counts supervisors, not workers, so it never starts a replacement.
  """
  def pool_overrides, do: %{heartbeat: %{enabled: false}}

  @doc """
  Snakepit's own warnings (a worker's exit and why) go with a failed scenario's captured log; call after
  the pool has started (a start resets Snakepit's settings).
  """
  def log_snakepit_warnings, do: Application.put_env(:snakepit, :log_level, :warning)

  @doc """
  `callers` callers run while `kills` workers are killed one at a time: no wrong answer, every failure on
  a worker that died, witness refs made before each kill answer after it, and the pool ends whole.
  """
  def kills_scenario!(instance, size, callers, kills) do
    guard = memory_guard!()
    :ok = recovered!(instance, size)
    running = start_callers(callers)

    witnesses = killer(instance, size, kills)
    tally = stop_callers(running)
    report("#{callers} callers, pool of #{size}", tally, kills)
    assert_clean!(tally)

    :ok = recovered!(instance, size)
    assert Enum.all?(witnesses, &witness_intact?/1)
    assert length(Pool.worker_pids(instance)) == size
    stop_guard(guard)
  end

  @doc """
  A long compile's worker is killed while `callers` callers of other sessions keep getting answers: the
  compiling caller gets a Snakepit error, and a retry compiles and runs equal to eager.
  """
  def compile_scenario!(instance, size, callers) do
    guard = memory_guard!()
    :ok = recovered!(instance, size)
    running = start_callers(callers)

    {error, hidden} = killed_compile(instance, size, running, @compile_attempts)
    assert worker_died?(error), inspect(error)
    :ok = recovered!(instance, size)
    assert {:ok, run} = compile_and_run(hidden)
    assert run["num_tokens"] == 8 and run["max_abs_diff_vs_eager"] < 1.0e-4

    tally = stop_callers(running)
    report("#{callers} callers beside a compile, pool of #{size}", tally, 1)
    assert_clean!(tally)
    assert length(Pool.worker_pids(instance)) == size
    stop_guard(guard)
  end

  # Starts a compile, waits until its worker has held it for seconds while the callers keep getting
  # answers, and kills that worker; returns the compiling caller's error and the model size. A compile
  # that finishes before its worker is killed (a fast machine) meets no kill: it starts again with
  # another size, `attempts` times in all.
  defp killed_compile(instance, size, running, attempts) do
    # A model size no other test compiles, so nothing comes from the compile cache: Inductor runs.
    hidden = 256 + 8 * :rand.uniform(64)
    compile = Task.async(fn -> compile_and_run(hidden) end)

    with {:ok, compiling} <- worker_of_long_call(compile),
         during = rounds_done(running),
         true <- Pool.eventually(fn -> rounds_done(running) >= during + 20 end, 60_000),
         Pool.kill!(compiling),
         {:error, %Snakepit.Error{} = error} <- Task.await(compile, 600_000) do
      {error, hidden}
    else
      finished when attempts > 1 ->
        IO.puts(
          "chaos: the compile ended before its worker was killed (#{inspect(finished)}); again"
        )

        :ok = recovered!(instance, size)
        killed_compile(instance, size, running, attempts - 1)

      finished ->
        flunk(
          "the compile ended before its worker was killed, #{@compile_attempts} times: " <>
            inspect(finished)
        )
    end
  end

  # The worker that has held one call for 2 s (the compile or its first run; the callers' calls take
  # milliseconds), or the compile's own result when it finishes first.
  defp worker_of_long_call(compile) do
    case Task.yield(compile, 0) do
      {:ok, result} ->
        {:finished, result}

      nil ->
        case Pool.long_call_worker(2_000) do
          nil -> worker_of_long_call(compile)
          os_pid -> {:ok, os_pid}
        end
    end
  end

  # Callers running until stop_callers/1, each counting its rounds that succeeded in full.
  defp start_callers(count) do
    progress = :counters.new(1, [])
    stop = :atomics.new(1, [])
    stop? = fn -> :atomics.get(stop, 1) == 1 end
    tasks = for id <- 1..count, do: Task.async(fn -> caller(id, progress, stop?, @max_rounds) end)
    %{tasks: tasks, progress: progress, stop: stop}
  end

  defp rounds_done(running), do: :counters.get(running.progress, 1)

  # Tells the callers to stop after their round and sums their tallies.
  defp stop_callers(running) do
    :atomics.put(running.stop, 1, 1)
    running.tasks |> Task.await_many(600_000) |> total()
  end

  defp compile_and_run(hidden) do
    opts = [__runtime__: [session_id: "chaos-compile", timeout: 600_000]]

    with {:ok, cc} <- CC.new(nil, 3, nil, opts),
         {:ok, model} <-
           Runtime.call(
             "compilation_bridge.compile",
             "compile_model",
             [cc],
             [max_num_tokens: 64, hidden_size: hidden, num_layers: 4] ++ opts
           ) do
      Runtime.call_method(model, :run, [8], opts)
    end
  end

  # A process linked to the test that ends it, with the figure, once the BEAM's memory passes the limit.
  # The memory is held by Snakepit's GRPCWorkers, which would go on growing: it kills them first (their
  # supervisors start new ones), at high priority so that the copying it stops cannot starve it.
  defp memory_guard! do
    spawn_link(fn ->
      Process.flag(:priority, :high)
      watch_memory()
    end)
  end

  defp watch_memory do
    total = :erlang.memory(:total)

    if total > @beam_memory_limit do
      Enum.each(Pool.grpc_workers(), &Process.exit(&1, :kill))
      exit({:beam_memory_over_limit, total, @beam_memory_limit})
    else
      Process.sleep(20)
      watch_memory()
    end
  end

  defp stop_guard(guard) do
    Process.unlink(guard)
    Process.exit(guard, :kill)
    :ok
  end

  @doc "The options that put a call in `session`, bounded by the per-call timeout."
  def opts(session), do: [__runtime__: [session_id: session, timeout: @call_timeout]]

  @doc """
  Runs rounds in a session of its own until `stop?.()` holds or `max_rounds` are done; bumps counter 1
  of `progress` after each round that succeeded in full. Returns the tally.
  """
  def caller(id, progress, stop?, max_rounds) do
    session = "chaos-#{id}-#{System.unique_integer([:positive])}"
    split = [8, 16 + id]
    {:ok, reference} = retry(fn -> reference_hash(split, session) end, 60_000)
    tally = loop(%__MODULE__{}, {id, session, split, reference}, progress, stop?, max_rounds)
    Runtime.release_session(session)
    tally
  end

  # The hash a round must read: vLLM's hash ignores cache_dir and compilation_time, the values a round sets.
  defp reference_hash(split, session) do
    with {:ok, cc} <- CC.new(nil, 3, nil, [compile_ranges_split_points: split] ++ opts(session)),
         {:ok, hash} <- CC.compute_hash(cc) do
      Runtime.release_ref(cc)
      {:ok, hash}
    end
  end

  defp loop(tally, caller, progress, stop?, max_rounds) do
    if tally.rounds >= max_rounds or stop?.() do
      tally
    else
      after_round = round(%{tally | rounds: tally.rounds + 1}, caller)
      if problems(after_round) == problems(tally), do: :counters.add(progress, 1, 1)
      loop(after_round, caller, progress, stop?, max_rounds)
    end
  end

  defp problems(t), do: length(t.failed) + length(t.wrong) + length(t.unacceptable)

  defp round(tally, {id, session, split, reference}) do
    value = id * 1_000_000 + tally.rounds + 0.5
    dir = "/tmp/chaos/#{id}/#{tally.rounds}"
    kwargs = [compile_ranges_split_points: split, cache_dir: dir] ++ opts(session)

    steps = [
      {:new, fn _ -> CC.new(nil, 3, nil, kwargs) end, fn {:ok, cc} -> {:ok, cc} end},
      {:set, &Runtime.set_attr(&1, :compilation_time, value), fn {:ok, true} -> :same end},
      {:read_time, &CC.compilation_time/1, expect(value)},
      {:read_dir, &CC.cache_dir/1, expect(dir)},
      {:hash, &CC.compute_hash/1, expect(reference)}
    ]

    {tally, cc} = run_steps(steps, tally, nil)
    if cc, do: release(tally, cc), else: tally
  end

  defp expect(want) do
    fn
      {:ok, ^want} -> :same
      {:ok, got} -> {:wrong, got, want}
    end
  end

  # Runs the steps in order on the ref the first one made; stops at the first failed call.
  defp run_steps([], tally, cc), do: {tally, cc}

  defp run_steps([{step, call, check} | rest], tally, cc) do
    tally = %{tally | calls: tally.calls + 1}

    case call.(cc) do
      {:ok, _} = ok ->
        case check.(ok) do
          {:ok, made} -> run_steps(rest, tally, made)
          :same -> run_steps(rest, tally, cc)
          {:wrong, got, want} -> {record(tally, :wrong, step, {got, want}), cc}
        end

      other ->
        {classify(tally, step, other), cc}
    end
  end

  defp release(tally, cc) do
    tally = %{tally | calls: tally.calls + 1}

    case Runtime.release_ref(cc) do
      :ok -> tally
      other -> classify(tally, :release, other)
    end
  end

  defp classify(tally, step, {:error, %Snakepit.Error{} = error} = failure) do
    if worker_died?(error),
      do: record(tally, :failed, step, error),
      else: record(tally, :unacceptable, step, failure)
  end

  defp classify(tally, step, other), do: record(tally, :unacceptable, step, other)

  @doc """
  Whether a call failed only because its worker died. Anything else is not acceptable: a Python error (a
  lost ref answers KeyError), a timeout, a refused checkout.
  """
  def worker_died?(%Snakepit.Error{category: :worker}), do: true
  def worker_died?(%Snakepit.Error{category: :grpc_error}), do: true

  def worker_died?(%Snakepit.Error{category: :pool, details: %{reason: reason}}),
    do: reason in @closed_connection

  def worker_died?(_), do: false

  @doc """
  Fails the test on any wrong answer or unacceptable failure, listing them briefly (ExUnit's diff of
  large error structs can take gigabytes).
  """
  def assert_clean!(tally) do
    problems = Enum.map(tally.wrong ++ tally.unacceptable, &describe/1)
    assert problems == [], Enum.join(problems, "\n")
  end

  defp describe(%{round: round, step: step, detail: detail}),
    do: "round #{round}, #{step}: " <> inspect(detail, limit: 20, printable_limit: 200)

  defp record(tally, kind, step, detail) do
    Map.update!(tally, kind, &[%{round: tally.rounds, step: step, detail: detail} | &1])
  end

  @doc "Sums the callers' tallies."
  def total(tallies) do
    Enum.reduce(tallies, %__MODULE__{}, fn t, acc ->
      %__MODULE__{
        calls: acc.calls + t.calls,
        rounds: acc.rounds + t.rounds,
        failed: t.failed ++ acc.failed,
        wrong: t.wrong ++ acc.wrong,
        unacceptable: t.unacceptable ++ acc.unacceptable
      }
    end)
  end

  @doc "One line per failure cause, with the fraction of all calls it took."
  def report(label, tally, kills) do
    causes =
      tally.failed
      |> Enum.frequencies_by(fn %{step: step, detail: e} ->
        "#{step}: [#{e.category}] #{e.message}#{reason(e)}"
      end)
      |> Enum.map_join("", fn {cause, n} -> "\n    #{n} x #{cause}" end)

    percent = Float.round(100 * length(tally.failed) / max(tally.calls, 1), 3)

    IO.puts(
      "\nchaos (#{label}): #{kills} kills, #{tally.rounds} rounds, #{tally.calls} calls, " <>
        "#{length(tally.failed)} failed (#{percent}%)#{causes}"
    )
  end

  defp reason(%{details: %{reason: reason}}), do: " (#{inspect(reason)})"
  defp reason(_), do: ""

  @doc """
  Kills `kills` workers of `instance`, one at a time, a random 2-4 s apart, each only once the pool holds
  `size` settled workers again. Before each kill it makes a witness ref (retried until made); returns the
  witnesses as `{ref, value, dir}`.
  """
  def killer(instance, size, kills) do
    session = "chaos-killer-#{System.unique_integer([:positive])}"

    for k <- 1..kills do
      Process.sleep(2_000 + :rand.uniform(2_000))
      :ok = recovered!(instance, size)
      witness = witness!(k, session)
      pid = Enum.random(Pool.worker_pids(instance))
      Pool.kill!(pid)
      witness
    end
  end

  @doc "Waits (60 s, wall clock) until the pool holds `size` workers, then until all are settled."
  def recovered!(instance, size) do
    unless Pool.eventually(fn -> length(Pool.worker_pids(instance)) == size end, 60_000) do
      flunk(
        "the pool did not get back to #{size} workers within 60 s: OS pids " <>
          "#{inspect(Pool.worker_pids(instance))}; #{Pool.describe()}"
      )
    end

    Pool.settle()
  end

  defp witness!(k, session) do
    value = k + 0.25
    dir = "/tmp/chaos/witness/#{k}"

    make = fn ->
      with {:ok, cc} <- CC.new(nil, 3, nil, [cache_dir: dir] ++ opts(session)),
           {:ok, true} <- Runtime.set_attr(cc, :compilation_time, value),
           do: {:ok, cc}
    end

    {:ok, cc} = retry(make, 60_000)
    {cc, value, dir}
  end

  @doc "Calls `fun` until it returns `{:ok, _}` or `ms` of wall-clock time pass; returns its last answer."
  def retry(fun, ms), do: retry_until(fun, System.monotonic_time(:millisecond) + ms)

  defp retry_until(fun, deadline) do
    case fun.() do
      {:ok, _} = ok ->
        ok

      other ->
        if System.monotonic_time(:millisecond) >= deadline,
          do: other,
          else: Process.sleep(100) && retry_until(fun, deadline)
    end
  end

  @doc "A witness ref answers with what was set on it."
  def witness_intact?({cc, value, dir}) do
    match?({:ok, ^value}, CC.compilation_time(cc)) and match?({:ok, ^dir}, CC.cache_dir(cc))
  end
end
