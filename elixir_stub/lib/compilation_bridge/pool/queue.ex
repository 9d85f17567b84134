defmodule CompilationBridge.Pool.Queue do
  @moduledoc """
  The callers waiting for a worker, as a pure value: first in, first out, each entry under a key
  (the pool uses the monitor reference of the caller) and with an absolute deadline in monotonic
  milliseconds (or `:infinity`).

  Removing an entry (its caller died, it was dispatched, its deadline passed) touches that entry
  only, never rebuilds the queue; `next_deadline/1` is the one deadline the pool keeps a timer
  for, and `expire/2` takes every entry whose deadline has come. The pool owns the side effects
  (monitors, timers, replies).
  """

  @typedoc "An entry: any map with a `:key` and a `:deadline`."
  @type entry :: %{
          required(:key) => term(),
          required(:deadline) => deadline(),
          optional(atom()) => term()
        }
  @type deadline :: integer() | :infinity

  @opaque t :: %__MODULE__{
            next: non_neg_integer(),
            entries: :gb_trees.tree(non_neg_integer(), entry()),
            positions: %{term() => non_neg_integer()},
            deadlines: :gb_sets.set({integer(), non_neg_integer()})
          }

  # `entries` by arrival number (their order), `positions` from key to arrival number, `deadlines`
  # ordered by time so that the nearest is found and expired without looking at the others.
  defstruct next: 0, entries: :gb_trees.empty(), positions: %{}, deadlines: :gb_sets.empty()

  @doc "An empty queue."
  @spec new() :: t()
  def new, do: %__MODULE__{}

  @doc "Number of waiting entries."
  @spec size(t()) :: non_neg_integer()
  def size(%__MODULE__{positions: positions}), do: map_size(positions)

  @doc "Appends `entry`; its `:key` must not be in the queue already."
  @spec push(t(), entry()) :: t()
  def push(%__MODULE__{next: n} = queue, %{key: key, deadline: deadline} = entry) do
    if Map.has_key?(queue.positions, key),
      do: raise(ArgumentError, "key #{inspect(key)} is in the queue already")

    %{
      queue
      | next: n + 1,
        entries: :gb_trees.insert(n, entry, queue.entries),
        positions: Map.put(queue.positions, key, n),
        deadlines: add_deadline(queue.deadlines, deadline, n)
    }
  end

  @doc "Removes the entry under `key`; returns it (nil when there is none) and the queue without it."
  @spec take(t(), term()) :: {entry() | nil, t()}
  def take(%__MODULE__{} = queue, key) do
    case Map.pop(queue.positions, key) do
      {nil, _positions} -> {nil, queue}
      {n, positions} -> {:gb_trees.get(n, queue.entries), remove(queue, n, positions)}
    end
  end

  @doc "The waiting entries, oldest first."
  @spec to_list(t()) :: [entry()]
  def to_list(%__MODULE__{entries: entries}), do: :gb_trees.values(entries)

  @doc "The nearest deadline of a waiting entry, or nil when none has one."
  @spec next_deadline(t()) :: integer() | nil
  def next_deadline(%__MODULE__{deadlines: deadlines}) do
    if :gb_sets.is_empty(deadlines), do: nil, else: elem(:gb_sets.smallest(deadlines), 0)
  end

  @doc "Takes every entry whose deadline is at or before `now`, oldest deadline first."
  @spec expire(t(), integer()) :: {[entry()], t()}
  def expire(%__MODULE__{} = queue, now), do: expire(queue, now, [])

  defp expire(queue, now, expired) do
    case next_deadline(queue) do
      deadline when is_integer(deadline) and deadline <= now ->
        {_deadline, n} = :gb_sets.smallest(queue.deadlines)
        entry = :gb_trees.get(n, queue.entries)
        {^entry, queue} = take(queue, entry.key)
        expire(queue, now, [entry | expired])

      _later_or_none ->
        {Enum.reverse(expired), queue}
    end
  end

  defp remove(queue, n, positions) do
    entry = :gb_trees.get(n, queue.entries)

    %{
      queue
      | entries: :gb_trees.delete(n, queue.entries),
        positions: positions,
        deadlines: :gb_sets.delete_any({entry.deadline, n}, queue.deadlines)
    }
  end

  defp add_deadline(deadlines, :infinity, _n), do: deadlines
  defp add_deadline(deadlines, deadline, n), do: :gb_sets.add({deadline, n}, deadlines)
end
