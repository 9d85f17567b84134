defmodule Snakepit.Error.PythonTranslation do
  @moduledoc """
  Maps a worker's error payload (`type`, `message`, `stacktrace`, `traceback`, `context`) to the
  Snakepit exception struct for its Python type, as Snakepit 0.13 does.
  """

  @mapped ~w(ValueError KeyError IndexError TypeError AttributeError ImportError RuntimeError
             NotImplementedError FileNotFoundError PermissionError ZeroDivisionError)

  @doc """
  The exception struct for an error payload, or the payload itself when it lacks a string `type`
  and `message` (Snakepit then reports the raw value as the reason).
  """
  @spec from_error_payload(term()) :: Exception.t() | term()
  def from_error_payload(%{"type" => type, "message" => message} = payload)
      when is_binary(type) and is_binary(message) do
    struct(module_for(type),
      message: message,
      context: Map.get(payload, "context") || %{},
      stacktrace: Map.get(payload, "stacktrace") || [],
      python_type: type,
      python_traceback: traceback(payload)
    )
  end

  def from_error_payload(other), do: other

  @doc "The Elixir module for a Python exception type name."
  @spec module_for(String.t()) :: module()
  def module_for(type) when type in @mapped, do: Module.concat(Snakepit.Error, type)
  def module_for(_type), do: Snakepit.Error.PythonException

  defp traceback(%{"traceback" => tb}) when is_binary(tb), do: tb
  defp traceback(%{"stacktrace" => lines}) when is_list(lines), do: Enum.join(lines)
  defp traceback(_payload), do: nil
end
