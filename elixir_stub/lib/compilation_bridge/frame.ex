defmodule CompilationBridge.Frame do
  @moduledoc """
  The messages of the port protocol, as pure functions (the worker process only moves bytes).

  On the wire each message is one MessagePack map behind a 4-byte big-endian length; the length is
  added and stripped by the port itself (`{:packet, 4}`), so this module sees frame bodies only.

      request  %{"id" => id, "tool" => tool, "payload" => payload, "session_id" => worker_session}
      reply    %{"id" => id, "ok" => true, "result" => value}
               %{"id" => id, "ok" => false, "error" => %{"type", "message", "stacktrace", ...}}
      chunk    %{"id" => id, "chunk" => value}            (snakebridge.stream only)
      events   %{"event" => "ready", "pid" => os_pid, ...} and %{"event" => "fatal", "error" => ...}
  """

  alias CompilationBridge.MsgPack

  defguardp is_id(id) when is_integer(id) or is_nil(id)

  @type id :: non_neg_integer()
  @type decoded ::
          {:reply, id() | nil, {:ok, term()} | {:error, map()}}
          | {:chunk, id(), term()}
          | {:ready, map()}
          | {:fatal, map()}
          | {:corrupt, term()}

  @doc "The body of a request frame; raises `ArgumentError` when the payload cannot be encoded."
  @spec request!(id(), String.t(), map(), String.t()) :: binary()
  def request!(id, tool, payload, worker_session) do
    message = %{"id" => id, "tool" => tool, "payload" => payload, "session_id" => worker_session}
    IO.iodata_to_binary(MsgPack.encode!(message))
  end

  @doc "Classifies one frame body from the worker."
  @spec decode(binary()) :: decoded()
  def decode(body) do
    case MsgPack.decode(body) do
      {:ok, message} when is_map(message) -> classify(message)
      {:ok, other} -> {:corrupt, {:not_a_map, other}}
      {:error, reason} -> {:corrupt, reason}
    end
  end

  defp classify(%{"event" => "ready"} = message), do: {:ready, message}
  defp classify(%{"event" => "fatal", "error" => error}), do: {:fatal, error}
  defp classify(%{"id" => id, "chunk" => item}) when is_integer(id), do: {:chunk, id, item}

  defp classify(%{"id" => id, "ok" => true} = m) when is_id(id),
    do: {:reply, id, {:ok, m["result"]}}

  defp classify(%{"id" => id, "ok" => false, "error" => error}) when is_id(id) and is_map(error),
    do: {:reply, id, {:error, error}}

  defp classify(message), do: {:corrupt, {:unexpected_message, message}}
end
