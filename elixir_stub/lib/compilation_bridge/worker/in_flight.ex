defmodule CompilationBridge.Worker.InFlight do
  @moduledoc """
  The request a worker has in flight, as a pure value: its id, its caller, its timer, when it was
  sent (monotonic time, native units) and the chunks of a stream received so far.

  `CompilationBridge.Worker` owns the side effects (the port, the timer, the reply); this module
  only answers "is this frame ours?" and "what does the caller get?", so those rules are tested
  without a Python process.
  """

  alias CompilationBridge.Frame

  @enforce_keys [:id, :from, :timer, :sent_at]
  defstruct [:id, :from, :timer, :sent_at, chunks: []]

  @type t :: %__MODULE__{
          id: Frame.id(),
          from: GenServer.from(),
          timer: reference() | nil,
          sent_at: integer(),
          chunks: [term()]
        }

  @doc "A request just sent: `timer` is the reference of its timeout, or nil without one."
  @spec new(Frame.id(), GenServer.from(), reference() | nil, integer()) :: t()
  def new(id, from, timer, sent_at \\ System.monotonic_time()),
    do: %__MODULE__{id: id, from: from, timer: timer, sent_at: sent_at}

  @doc "Adds one chunk of a stream (kept newest first; `result/2` puts them in order)."
  @spec add_chunk(t(), term()) :: t()
  def add_chunk(%__MODULE__{chunks: chunks} = in_flight, item),
    do: %{in_flight | chunks: [item | chunks]}

  @doc """
  What the caller gets for the worker's final reply: a stream's chunks are the result (its final
  reply only counts them); a Python error is tagged `:python`.
  """
  @spec result(t(), {:ok, term()} | {:error, map()}) :: {:ok, term()} | {:error, {:python, map()}}
  def result(%__MODULE__{chunks: [_ | _] = chunks}, {:ok, _count}),
    do: {:ok, Enum.reverse(chunks)}

  def result(%__MODULE__{}, {:ok, result}), do: {:ok, result}
  def result(%__MODULE__{}, {:error, error}), do: {:error, {:python, error}}
end
