defmodule SnakeBridge.Ref do
  @moduledoc """
  Stand-in for SnakeBridge 0.16's reference to a Python object that lives in a worker.

  The fields are SnakeBridge's. A ref is valid in its `session_id` on the worker that made it (the pool
  keeps a session on one worker); `pool_name` says which pool that is.
  """

  @schema 1

  @type t :: %__MODULE__{
          id: String.t(),
          session_id: String.t(),
          pool_name: atom() | nil,
          python_module: String.t() | nil,
          library: String.t() | nil,
          type_name: String.t() | nil,
          schema: pos_integer()
        }

  defstruct [:id, :session_id, :pool_name, :python_module, :library, :type_name, schema: @schema]

  @doc "The wire shape sent back to Python (`type_name` and `pool_name` stay on this side)."
  @spec to_wire_format(t()) :: map()
  def to_wire_format(%__MODULE__{} = ref) do
    %{
      "__type__" => "ref",
      "__schema__" => ref.schema || @schema,
      "id" => ref.id,
      "session_id" => ref.session_id,
      "python_module" => ref.python_module,
      "library" => ref.library
    }
    |> Map.reject(fn {_key, value} -> is_nil(value) end)
  end

  @doc """
  Builds a ref from the worker's wire map; raises `ArgumentError` without `id` or `session_id`
  (as SnakeBridge's decoder does: a worker that sends such a ref is broken).
  """
  @spec from_wire_format(map()) :: t()
  def from_wire_format(map) when is_map(map) do
    id = map["id"] || map["ref_id"]
    session_id = map["session_id"]

    if is_nil(id) or is_nil(session_id) do
      raise ArgumentError, "Invalid ref: missing fields in #{inspect(map)}"
    end

    %__MODULE__{
      id: id,
      session_id: session_id,
      pool_name: pool_name(map["pool_name"]),
      python_module: map["python_module"],
      library: map["library"],
      type_name: map["type_name"] || map["__type_name__"],
      schema: map["__schema__"] || map["schema"] || @schema
    }
  end

  # Pool names are atoms on this side; a string from the wire is only matched against existing atoms.
  defp pool_name(name) when is_binary(name) do
    String.to_existing_atom(name)
  rescue
    ArgumentError -> nil
  end

  defp pool_name(name) when is_atom(name), do: name
  defp pool_name(_), do: nil

  defimpl Inspect do
    # Plain data: inspecting a ref never calls the worker.
    def inspect(ref, _opts) do
      "#SnakeBridge.Ref<#{ref.type_name || "object"} #{ref.id} session=#{ref.session_id}>"
    end
  end
end
