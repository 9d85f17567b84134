defmodule SnakeBridge.StreamRef do
  @moduledoc "Stand-in for SnakeBridge's reference to a Python iterator or generator."

  @type t :: %__MODULE__{
          ref_id: String.t(),
          session_id: String.t(),
          pool_name: atom() | nil,
          python_module: String.t() | nil,
          library: String.t() | nil,
          stream_type: String.t() | nil,
          type_name: String.t() | nil
        }

  defstruct [:ref_id, :session_id, :pool_name, :python_module, :library, :stream_type, :type_name]

  @doc "A stream ref from its wire map."
  @spec from_wire_format(map()) :: t()
  def from_wire_format(map) do
    %__MODULE__{
      ref_id: map["id"] || map["ref_id"],
      session_id: map["session_id"],
      python_module: map["python_module"],
      library: map["library"],
      stream_type: map["stream_type"],
      type_name: map["type_name"] || map["__type_name__"]
    }
  end

  @doc "The plain ref wire shape (what SnakeBridge sends back for a stream ref)."
  @spec to_wire_format(t()) :: map()
  def to_wire_format(%__MODULE__{} = ref) do
    %{
      "__type__" => "ref",
      "__schema__" => 1,
      "id" => ref.ref_id,
      "session_id" => ref.session_id,
      "python_module" => ref.python_module,
      "library" => ref.library
    }
    |> Map.reject(fn {_key, value} -> is_nil(value) end)
  end
end
