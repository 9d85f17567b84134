defmodule CompilationBridge.Pool.QueueTest do
  @moduledoc "The waiting callers' bookkeeping, without processes: order, removal, deadlines."
  use ExUnit.Case, async: true

  alias CompilationBridge.Pool.Queue

  defp entry(key, deadline), do: %{key: key, deadline: deadline, work: "work #{key}"}

  defp queue_of(entries), do: Enum.reduce(entries, Queue.new(), &Queue.push(&2, &1))

  test "entries come out in arrival order, whatever their keys" do
    queue = queue_of([entry(:c, 10), entry(:a, 30), entry(:b, :infinity)])
    assert Enum.map(Queue.to_list(queue), & &1.key) == [:c, :a, :b]
    assert Queue.size(queue) == 3
  end

  test "take removes one entry by key and leaves the order of the others" do
    queue = queue_of([entry(:a, 10), entry(:b, 20), entry(:c, 30)])
    {taken, queue} = Queue.take(queue, :b)
    assert taken == entry(:b, 20)
    assert Enum.map(Queue.to_list(queue), & &1.key) == [:a, :c]
    assert {nil, ^queue} = Queue.take(queue, :b)
  end

  test "a key can be pushed once while it waits" do
    queue = queue_of([entry(:a, 10)])
    assert_raise ArgumentError, fn -> Queue.push(queue, entry(:a, 20)) end
    {_taken, queue} = Queue.take(queue, :a)
    assert Queue.size(Queue.push(queue, entry(:a, 20))) == 1
  end

  test "the next deadline is the nearest of the waiting entries, nil when none has one" do
    assert Queue.next_deadline(Queue.new()) == nil
    assert Queue.next_deadline(queue_of([entry(:a, :infinity)])) == nil

    queue = queue_of([entry(:a, 30), entry(:b, 10), entry(:c, :infinity)])
    assert Queue.next_deadline(queue) == 10
    {_b, queue} = Queue.take(queue, :b)
    assert Queue.next_deadline(queue) == 30
  end

  test "expire takes each entry whose deadline has come, once, and keeps the rest" do
    queue = queue_of([entry(:a, 30), entry(:b, 10), entry(:c, :infinity), entry(:d, 20)])

    {expired, queue} = Queue.expire(queue, 20)
    assert Enum.map(expired, & &1.key) == [:b, :d]
    assert Enum.map(Queue.to_list(queue), & &1.key) == [:a, :c]
    assert Queue.next_deadline(queue) == 30

    assert {[], ^queue} = Queue.expire(queue, 20)
    {expired, queue} = Queue.expire(queue, 1_000_000)
    assert Enum.map(expired, & &1.key) == [:a]
    assert Enum.map(Queue.to_list(queue), & &1.key) == [:c]
  end

  test "equal deadlines are all kept and all expire" do
    queue = queue_of([entry(:a, 10), entry(:b, 10)])
    {expired, queue} = Queue.expire(queue, 10)
    assert Enum.map(expired, & &1.key) == [:a, :b]
    assert Queue.size(queue) == 0
  end
end
