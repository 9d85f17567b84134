# Snakepit's Python exception structs: one per commonly raised Python type, the rest are
# PythonException. They share one field set, so they are defined from one list.
for name <-
      ~w(PythonException ValueError KeyError IndexError TypeError AttributeError ImportError
         RuntimeError NotImplementedError FileNotFoundError PermissionError ZeroDivisionError) do
  defmodule Module.concat(Snakepit.Error, name) do
    @moduledoc """
    A Python `#{if name == "PythonException", do: "exception without a dedicated struct", else: name}`
    raised by the worker (`python_type` holds the Python class name).
    """
    defexception [:message, :context, :stacktrace, :python_type, :python_traceback]
  end
end
