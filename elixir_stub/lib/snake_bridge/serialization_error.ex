defmodule SnakeBridge.SerializationError do
  @moduledoc "Raised before any call is made when an argument has no wire encoding (a pid, a port, ...)."
  defexception [:message, :value]
end
