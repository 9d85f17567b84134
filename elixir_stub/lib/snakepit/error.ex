defmodule Snakepit.Error do
  @moduledoc """
  Stand-in for Snakepit 0.13's structured error: what every failed call returns.

  The fields are Snakepit's. Python exceptions arrive as
  `%Snakepit.Error{category: :worker, message: "Request failed", details: %{reason: exception}}`
  where `exception` is a `Snakepit.Error.ValueError`, `Snakepit.Error.PythonException`, ... struct
  (see `Snakepit.Error.PythonTranslation`); timeouts have category `:timeout`, pool problems `:pool`.
  """

  @type category :: :worker | :timeout | :python_error | :grpc_error | :validation | :pool

  @type t :: %__MODULE__{
          category: category(),
          message: String.t(),
          details: map(),
          python_traceback: String.t() | nil,
          grpc_status: atom() | nil
        }

  @enforce_keys [:category, :message, :details]
  defstruct category: nil, message: nil, details: %{}, python_traceback: nil, grpc_status: nil

  @doc "An error of category `:worker`."
  @spec worker_error(String.t(), map()) :: t()
  def worker_error(message, details \\ %{}), do: build(:worker, message, details)

  @doc "An error of category `:timeout`."
  @spec timeout_error(String.t(), map()) :: t()
  def timeout_error(message, details \\ %{}), do: build(:timeout, message, details)

  @doc "An error of category `:pool`."
  @spec pool_error(String.t(), map()) :: t()
  def pool_error(message, details \\ %{}), do: build(:pool, message, details)

  @doc "An error of category `:validation`."
  @spec validation_error(String.t(), map()) :: t()
  def validation_error(message, details \\ %{}), do: build(:validation, message, details)

  defp build(category, message, details),
    do: %__MODULE__{category: category, message: message, details: details}

  @doc """
  Turns an internal `{:error, reason}` into `{:error, %Snakepit.Error{}}`, as Snakepit's public API
  does; `metadata` (command, pool, pool name) goes into `details`.
  """
  @spec normalize_public_result(:ok | {:ok, term()} | {:error, term()}, map()) ::
          :ok | {:ok, term()} | {:error, t()}
  def normalize_public_result(result, metadata \\ %{})
  def normalize_public_result(:ok, _metadata), do: :ok
  def normalize_public_result({:ok, _} = ok, _metadata), do: ok
  def normalize_public_result({:error, %__MODULE__{}} = error, _metadata), do: error

  def normalize_public_result({:error, reason}, metadata),
    do: {:error, normalize_public_error(reason, metadata)}

  @doc "The `%Snakepit.Error{}` for an internal failure reason."
  @spec normalize_public_error(term(), map()) :: t()
  def normalize_public_error(reason, metadata \\ %{})

  def normalize_public_error(:queue_timeout, metadata),
    do: timeout_error("Request timed out in queue", Map.put(metadata, :reason, :queue_timeout))

  def normalize_public_error(:worker_timeout, metadata),
    do: timeout_error("Worker execution timed out", Map.put(metadata, :reason, :worker_timeout))

  def normalize_public_error(:pool_not_found, metadata),
    do: pool_error("Pool not found", Map.put(metadata, :reason, :pool_not_found))

  def normalize_public_error(:worker_busy, metadata),
    do: pool_error("Preferred worker is busy", Map.put(metadata, :reason, :worker_busy))

  def normalize_public_error(:worker_starting, metadata),
    do: pool_error("Worker is starting", Map.put(metadata, :reason, :worker_starting))

  def normalize_public_error(:no_workers_available, metadata),
    do: pool_error("No workers available", Map.put(metadata, :reason, :no_workers_available))

  def normalize_public_error({:no_worker_can_start, cause}, metadata),
    do:
      pool_error(
        "No worker can start: " <> cause,
        Map.merge(metadata, %{reason: :no_worker_can_start, cause: cause})
      )

  def normalize_public_error({:worker_exit, exit_reason}, metadata) do
    details = metadata |> Map.put(:reason, :worker_exit) |> Map.put(:exit_reason, exit_reason)
    worker_error("Worker process exited", details)
  end

  def normalize_public_error(reason, metadata) when is_atom(reason) or is_tuple(reason),
    do: pool_error("Pool request failed", Map.put(metadata, :reason, reason))

  def normalize_public_error(reason, metadata),
    do: worker_error("Request failed", Map.put(metadata, :reason, reason))

  defimpl String.Chars do
    def to_string(%Snakepit.Error{} = error) do
      details =
        if map_size(error.details) > 0, do: "\nDetails: #{inspect(error.details)}", else: ""

      grpc = if error.grpc_status, do: "\ngRPC Status: #{error.grpc_status}", else: ""

      traceback =
        if error.python_traceback,
          do: "\n\nPython Traceback:\n#{error.python_traceback}",
          else: ""

      "[#{error.category}] #{error.message}" <> details <> grpc <> traceback
    end
  end
end
