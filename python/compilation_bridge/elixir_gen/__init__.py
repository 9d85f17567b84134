"""The Elixir API generator behind `compilation-bridge gen-elixir`: the stub's modules from the surface.

What a module contains comes from introspection of what the surface exposes, by SnakeBridge 0.16's
rules: a constructor (`new`) for each class a module exports, a method wrapper (`call_method`) for each
exposed method, an attribute getter (`get_attr`) for each exposed class-level attribute, and a module
function (`call`) for each exposed function. Required Python parameters become Elixir parameters;
optional positional ones collapse into one `args` list; keyword-only ones travel in `opts`.

Docs come from the code, as SnakeBridge takes them from vLLM's: the class docstring is the @moduledoc,
a method's docstring its @doc (an `Args:` section becomes the parameter list), and the attribute
docstrings of a config's fields (vLLM-style: the string right after the field) document the keyword
constructor `new/1`. The config classes carry vLLM 0.14.0's own docstrings, so the generated
`CompilationConfig` matches the vllm hex package's module; the Elixir test suite checks that against a
copy of its published page (`elixir_stub/priv/reference/`).
"""
