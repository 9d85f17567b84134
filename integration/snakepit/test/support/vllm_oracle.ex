defmodule RealClient.VllmOracle do
  @moduledoc """
  vLLM 0.14.0 itself (the repository's oracle environment, `.oracle-venv` or `$ORACLE_VENV`) answers the
  same calls, so each real-client result is compared with vLLM's rather than with a value written here.
  Both sides are brought to one plain form (see `vllm_expectations.py`).
  """

  alias RealClient.ReadmeRecipe

  @script Path.expand("vllm_expectations.py", __DIR__)

  @doc "The oracle's environment: vLLM 0.14.0 (CPU build), and what Snakepit's own Python server needs."
  def venv,
    do: Path.expand(System.get_env("ORACLE_VENV") || ".oracle-venv", ReadmeRecipe.repo_root())

  def answers!(calls) do
    python = Path.join(venv(), "bin/python")

    unless File.exists?(python) do
      raise "no vLLM oracle at #{python}: bash scripts/setup_oracle.sh builds it"
    end

    dir = System.tmp_dir!()
    input = Path.join(dir, "realclient_calls_#{System.unique_integer([:positive])}.json")
    log = input <> ".log"
    File.write!(input, Jason.encode!(calls))

    {out, status} =
      System.cmd("sh", ["-c", ~s(exec "$0" "$1" < "$2" 2> "$3"), python, @script, input, log],
        env: [{"PYTHONHASHSEED", "0"}, {"VLLM_CPU_KVCACHE_SPACE", "4"}]
      )

    if status != 0, do: raise("vLLM oracle failed (#{status}): #{File.read!(log)}")
    File.rm(input)
    File.rm(log)
    out |> String.split("\n", trim: true) |> List.last() |> Jason.decode!()
  end

  @doc "A generated function's `{:ok, _}` / `{:error, _}` in the plain form."
  def plain({:ok, value}), do: %{"ok" => plain_value(value)}

  def plain({:error, reason}) do
    {type, message} = python_error(reason)
    %{"error" => type, "message" => message}
  end

  defp plain_value(%SnakeBridge.Ref{} = ref) do
    {:ok, repr} = SnakeBridge.Runtime.call_method(ref, :__repr__, [])
    %{"object" => ref.type_name, "repr" => repr}
  end

  defp plain_value(%MapSet{} = set),
    do: %{"set" => set |> Enum.map(&plain_value/1) |> Enum.sort()}

  defp plain_value(list) when is_list(list), do: Enum.map(list, &plain_value/1)
  defp plain_value(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> plain_value()

  defp plain_value(map) when is_map(map) and not is_struct(map),
    do: Map.new(map, fn {k, v} -> {to_string(k), plain_value(v)} end)

  defp plain_value(value), do: value

  @doc "The Python exception type and message inside whatever error term the client returned."
  def python_error(%{python_type: type, message: message}) when is_binary(type),
    do: {type, message}

  def python_error(%Snakepit.Error{details: %{} = d} = e),
    do: nested(d) || {inspect(e), e.message}

  def python_error(other), do: raise("not a Python error: #{inspect(other)}")

  defp nested(%{python_type: type, message: message}), do: {type, message}
  defp nested(%{"python_type" => type, "message" => message}), do: {type, message}

  defp nested(%{} = details),
    do: Enum.find_value(details, fn {_, v} -> is_map(v) && nested(v) end)

  defp nested(_), do: nil
end
