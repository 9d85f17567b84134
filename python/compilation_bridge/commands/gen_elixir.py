"""`compilation-bridge gen-elixir`: write the Elixir stub's modules from the exposed Python surface.

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

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import importlib
import inspect
import itertools
import re
import shutil
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

GENERATED_DIR = Path("lib/generated")
VLLM_VERSION = "0.14.0"
ERROR_SPEC = "{:error, Snakepit.Error.t()}"
# Elixir words that cannot name a function or a variable.
RESERVED = {"after", "and", "catch", "do", "else", "end", "false", "fn", "in", "nil", "not", "or"}
RESERVED |= {"rescue", "true", "when"}
# Methods vLLM 0.14.0 declares without a return annotation, which SnakeBridge therefore types `term()`;
# the re-implementation annotates them (`-> None`), which would otherwise give `nil`.
VLLM_UNTYPED_RETURNS = {
    "CompilationConfig": frozenset(
        {
            "adjust_cudagraph_sizes_for_spec_decode",
            "compute_bs_to_padded_graph_size",
            "custom_op_log_check",
            "set_splitting_ops_for_attn_fusion",
            "set_splitting_ops_for_v1",
        }
    )
}


# ------------------------------------------------------------------------------------------ model
@dataclasses.dataclass(frozen=True)
class Param:
    name: str  # Elixir variable name
    spec: str  # Elixir type
    default: str | None = None  # Python repr, for the docs of optional parameters
    doc: str | None = None  # from the docstring's Args section


@dataclasses.dataclass(frozen=True)
class Function:
    kind: str  # "new", "keyword_new", "member", "method", "getter", "function"
    name: str  # Elixir function name
    python_name: str
    params: tuple[Param, ...] = ()
    optional: tuple[Param, ...] = ()  # collapsed into one `args` list parameter
    returns: str = "term()"
    summary: str | None = None
    literal: str | None = None  # an enum member's value, as Elixir source
    fields: tuple[tuple[str, str], ...] = ()  # (field, doc) for the keyword constructor's docs


@dataclasses.dataclass
class ModuleModel:
    elixir: str
    python_module: str
    library: str
    python_class: str | None
    moduledoc: str
    functions: list[Function]

    @property
    def path(self) -> Path:
        return GENERATED_DIR.joinpath(*[underscore(part) for part in self.elixir.split(".")]).with_suffix(
            ".ex"
        )


def underscore(name: str) -> str:
    """CamelCase -> snake_case, keeping acronyms together (CUDAGraphMode -> cuda_graph_mode)."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def camelize(dotted: str) -> str:
    return ".".join("".join(w[:1].upper() + w[1:] for w in part.split("_")) for part in dotted.split("."))


def elixir_name(python_name: str) -> str:
    name = python_name if python_name[:1].islower() or python_name[:1] == "_" else python_name.lower()
    return f"{name}_" if name in RESERVED else name


def variable(python_name: str) -> str:
    name = python_name.lstrip("_") or "arg"
    return f"{name}_" if name in RESERVED else name


# ------------------------------------------------------------------------------------------ types
SIMPLE_TYPES = {str: "String.t()", int: "integer()", float: "float()", bool: "boolean()", type(None): "nil"}
TEXT_TYPES = {"str": "String.t()", "int": "integer()", "float": "float()", "bool": "boolean()", "None": "nil"}


def elixir_type(annotation: Any) -> str:
    """SnakeBridge's mapping of a Python annotation to an Elixir type (anything complex is term())."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return "term()"
    if annotation is None:
        return "nil"
    if isinstance(annotation, str):
        return TEXT_TYPES.get(
            annotation.strip(), "list(term())" if annotation.startswith("list[") else "term()"
        )
    if annotation in SIMPLE_TYPES:
        return SIMPLE_TYPES[annotation]
    origin = typing.get_origin(annotation)
    if annotation is list or origin is list:
        return "list(term())"
    if annotation is dict or origin is dict:
        return "map()"
    return "term()"


def hints(function: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(function)
    except Exception:  # forward references to names the module does not import: keep the text
        return dict(getattr(function, "__annotations__", {}))


# ------------------------------------------------------------------------------------------ docstrings
SECTION = re.compile(r"^(Args|Arguments|Returns|Raises):\s*$", flags=re.M)


def docstring(obj: Any) -> str:
    return inspect.cleandoc(obj.__doc__) if isinstance(obj.__doc__, str) else ""


def summary_of(obj: Any) -> str | None:
    """The docstring up to its Args/Returns sections, SnakeBridge-style (first line, blank, rest)."""
    text = SECTION.split(docstring(obj), maxsplit=1)[0].strip()
    if not text:
        return None
    first, _, rest = text.partition("\n")
    return f"{first}\n\n{rest.strip()}".strip()


def argument_docs(obj: Any) -> dict[str, str]:
    """`{parameter: description}` from the docstring's `Args:` / `Arguments:` section."""
    parts = SECTION.split(docstring(obj))
    docs: dict[str, str] = {}
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        if heading not in ("Args", "Arguments"):
            continue
        name = None
        for line in body.splitlines():
            match = re.match(r"\s*(\w+)(?:\s*\([^)]*\))?:\s*(.*)", line)
            if match:
                name, text = match.groups()
                docs[name] = text.strip()
            elif name is not None and line.strip():
                docs[name] = f"{docs[name]} {line.strip()}".strip()
    return docs


def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings of a class's fields (the string literal right after a field, as vLLM
    documents its configs), read from the class source."""
    try:
        tree = ast.parse(inspect.cleandoc(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return docs


def field_summary(text: str) -> str:
    """A field doc's first paragraph on one line, without a list it introduces ("Examples:")."""
    lines = []
    for line in text.split("\n\n", 1)[0].splitlines():
        if line.lstrip().startswith("- "):
            break
        lines.append(line)
    summary = " ".join(" ".join(lines).split())
    if summary.endswith(":"):
        head, dot, _last = summary.rpartition(". ")
        summary = head + dot.strip() if head else summary[:-1] + "."
    return summary


# ------------------------------------------------------------------------------------------ introspection


def split_params(signature: inspect.Signature, function: Any) -> tuple[list[Param], list[Param]]:
    types = hints(function)
    docs = argument_docs(function)
    required: list[Param] = []
    optional: list[Param] = []
    for p in signature.parameters.values():
        if p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD):
            continue  # keyword arguments travel in opts
        param = Param(variable(p.name), elixir_type(types.get(p.name, p.annotation)), doc=docs.get(p.name))
        if p.kind == p.VAR_POSITIONAL:
            optional.append(param)
        elif p.default is p.empty:
            required.append(param)
        else:
            optional.append(dataclasses.replace(param, default=repr(p.default)))
    return required, optional


def drop_receiver(signature: inspect.Signature, static: Any) -> inspect.Signature:
    """Signatures of plain functions found on a class still name `self`; bound classmethods do not."""
    if isinstance(static, staticmethod | classmethod):
        return signature
    params = list(signature.parameters.values())[1:]
    return signature.replace(parameters=params)


def constructor(cls: type) -> list[Function]:
    if issubclass(cls, enum.Enum):
        return [Function("new", "new", "__init__", (Param("value", "term()"),), returns="term()")]
    signature = inspect.signature(cls.__init__)
    names = list(signature.parameters)
    if names[:1] == ["__dataclass_self__"]:
        # pydantic dataclasses: `(__dataclass_self__, *args, **kwargs)`, which SnakeBridge turns into
        # three required positional parameters (docs/wire.md#construction), plus our keyword-only `new/1`.
        params = tuple(Param(variable(n), "term()") for n in names)
        docs = field_docs(cls)
        fields = tuple(
            (f.name, field_summary(docs.get(f.name, "")))
            for f in dataclasses.fields(cast(Any, cls))
            if f.init
        )
        return [
            Function("new", "new", "__init__", params, returns="SnakeBridge.Ref.t()"),
            Function("keyword_new", "new", "__init__", returns="SnakeBridge.Ref.t()", fields=fields),
        ]
    required, optional = split_params(drop_receiver(signature, cls.__init__), cls.__init__)
    return [Function("new", "new", "__init__", tuple(required), tuple(optional), "SnakeBridge.Ref.t()")]


def members(cls: type) -> list[Function]:
    if not issubclass(cls, enum.Enum):
        return []
    return [
        Function("member", elixir_name(m.name), m.name, literal=literal(m.value), returns="term()")
        for m in cls
    ]


def literal(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return literal(value.value)
    if isinstance(value, tuple):
        return "{" + ", ".join(literal(v) for v in value) + "}"
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "nil"}[value]
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise ValueError(f"enum value {value!r} has no Elixir literal")


def attributes(cls: type, exposed: frozenset[str]) -> Iterator[Function]:
    enum_members = set(cls.__members__) if issubclass(cls, enum.Enum) else set()
    for name in sorted(exposed - enum_members):
        try:
            static = inspect.getattr_static(cls, name)
        except AttributeError:
            continue  # an instance field without a class-level default: no getter (as SnakeBridge)
        if name.startswith("__"):
            continue
        if isinstance(static, staticmethod | classmethod) or inspect.isfunction(static):
            signature = drop_receiver(inspect.signature(getattr(cls, name)), static)
            required, optional = split_params(signature, getattr(cls, name))
            returns = elixir_type(hints(getattr(cls, name)).get("return", signature.return_annotation))
            if name in VLLM_UNTYPED_RETURNS.get(cls.__name__, ()):
                returns = "term()"
            yield Function(
                "method",
                elixir_name(name),
                name,
                tuple(required),
                tuple(optional),
                returns,
                summary_of(static),
            )
        else:
            yield Function("getter", elixir_name(name), name)


def module_function(name: str, function: Any) -> Function:
    signature = inspect.signature(function)
    required, optional = split_params(signature, function)
    returns = elixir_type(hints(function).get("return", signature.return_annotation))
    return Function(
        "function", elixir_name(name), name, tuple(required), tuple(optional), returns, summary_of(function)
    )


def class_model(surface: Any, cls: type, python_module: str, library: str, exported: bool) -> ModuleModel:
    exposed = surface.exposure(cls).exposed_names()
    functions = (constructor(cls) if exported else []) + members(cls)
    functions += sorted((f for f in attributes(cls, exposed) if f.kind == "method"), key=lambda f: f.name)
    functions += sorted((f for f in attributes(cls, exposed) if f.kind == "getter"), key=lambda f: f.name)
    check_unique(cls.__name__, functions)
    doc = summary_of(cls) if cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}(") else None
    return ModuleModel(
        f"{camelize(python_module)}.{cls.__name__}",
        python_module,
        library,
        cls.__name__,
        doc or f"Python class `{python_module}.{cls.__name__}`.",
        functions,
    )


def check_unique(owner: str, functions: list[Function]) -> None:
    seen: dict[tuple[str, int], str] = {}
    for f in functions:
        for arity in arities(f):
            key = (f.name, arity)
            if key in seen:
                raise ValueError(f"{owner}: {f.python_name} and {seen[key]} both become {f.name}/{arity}")
            seen[key] = f.python_name


def arities(f: Function) -> list[int]:
    """Arities a generated function defines (the trailing `opts \\\\ []` gives two)."""
    if f.kind == "getter":
        return [1]
    if f.kind == "keyword_new":
        return [0, 1]
    base = len(f.params) + (1 if f.optional else 0) + (1 if f.kind == "method" else 0)
    return [base, base + 1]


def surface_models() -> list[ModuleModel]:
    """One module per exposed class (under the first vLLM module that exports it) and per module with
    exposed functions; introspected through the public surface API only."""
    from compilation_bridge.surface import catalog, default_surface

    surface = default_surface()
    models: list[ModuleModel] = []
    placed: set[type] = set()
    for module_name, names in catalog.VLLM_MODULES.items():
        for name in names:
            obj = surface.module_attr(module_name, name)
            if isinstance(obj, type) and obj not in placed and surface.exposure(obj) is not None:
                placed.add(obj)
                models.append(class_model(surface, obj, module_name, "vllm", exported=True))
    models.extend(compile_models(surface, catalog.COMPILE_PACKAGE))
    return models


def compile_models(surface: Any, package_name: str) -> list[ModuleModel]:
    package = importlib.import_module(package_name)
    library = package_name.split(".")[0]
    functions: list[Function] = []
    models: list[ModuleModel] = []
    for name in sorted(getattr(package, "__all__", ())):
        obj = getattr(package, name)
        exported = _resolves(surface, package_name, name)
        if isinstance(obj, type) and surface.exposure(obj) is not None:
            models.append(class_model(surface, obj, package_name, library, exported))
        elif exported and callable(obj):
            functions.append(module_function(name, obj))
    doc = summary_of(package) or f"Python module `{package_name}`."
    models.insert(0, ModuleModel(camelize(package_name), package_name, library, None, doc, functions))
    return models


def _resolves(surface: Any, module: str, name: str) -> bool:
    try:
        surface.module_attr(module, name)
    except Exception:  # refused or absent: not part of the exposed API
        return False
    return True


# ------------------------------------------------------------------------------------------ emission
def heredoc(text: str, indent: str = "  ") -> str:
    body = "\n".join((indent + line).rstrip() for line in text.replace('"""', '\\"\\"\\"').splitlines())
    return f'"""\n{body}\n{indent}"""'


def default_doc(model: ModuleModel, f: Function) -> str:
    owner = model.python_class or model.python_module
    if f.kind == "new":
        lines = [f"Constructs `{owner}`."]
    elif f.kind == "member":
        return f"The `{owner}.{f.python_name}` member: `{owner}({f.literal})`."
    elif f.kind == "keyword_new":
        text = (
            f"Constructs `{owner}` from keyword arguments only: `{owner}(**kwargs)`.\n\n"
            "Every key of `kwargs` except `:__runtime__`, `:idempotent` and `:__args__` is a Python\n"
            "keyword argument (`new(mode: 3, compile_sizes: [1, 2])`); no positional argument is sent."
        )
        if f.fields:
            text += "\n\n## Fields\n\n" + "\n".join(
                f"- `{name}` - {doc}" if doc else f"- `{name}`" for name, doc in f.fields
            )
        return text
    else:
        what = "method" if model.python_class else "function"
        lines = [f.summary or f"Python {what} `{owner}.{f.python_name}`."]
    params = [f"- `{p.name}` - {p.doc}" if p.doc else f"- `{p.name}` ({p.spec})" for p in f.params]
    params += [
        f"- `{p.name}` - {p.doc}" if p.doc else f"- `{p.name}` ({p.spec} default: {p.default})"
        for p in f.optional
        if p.default
    ]
    if params:
        lines += ["", "## Parameters", "", *params]
    if f.kind not in ("new",):
        lines += ["", "## Returns", "", f"- `{f.returns}`"]
    return "\n".join(lines)


def spec_of(f: Function) -> str:
    if f.kind == "getter":
        return f"{f.name}(SnakeBridge.Ref.t()) :: {{:ok, term()}} | {ERROR_SPEC}"
    args = (["SnakeBridge.Ref.t()"] if f.kind == "method" else []) + [p.spec for p in f.params]
    args += ["list(term())"] if f.optional else []
    return f"{f.name}({', '.join([*args, 'keyword()'])}) :: {{:ok, {f.returns}}} | {ERROR_SPEC}"


def body_of(f: Function) -> tuple[list[str], str]:
    """(parameter names, body) of the generated function."""
    names = [p.name for p in f.params]
    args_list = "[" + ", ".join(names) + "]"
    if f.kind == "member":
        return ["opts \\\\ []"], f"SnakeBridge.Runtime.call_class(__MODULE__, :__init__, [{f.literal}], opts)"
    if f.kind == "keyword_new":
        return ["kwargs \\\\ []"], "SnakeBridge.Runtime.call_class(__MODULE__, :__init__, [], kwargs)"
    if f.kind == "getter":
        return ["ref"], f"SnakeBridge.Runtime.get_attr(ref, {atom(f.python_name)})"
    call = {
        "new": "SnakeBridge.Runtime.call_class(__MODULE__, :__init__, ",
        "method": f"SnakeBridge.Runtime.call_method(ref, {atom(f.python_name)}, ",
        "function": f"SnakeBridge.Runtime.call(__MODULE__, {atom(f.python_name)}, ",
    }[f.kind]
    receiver = ["ref"] if f.kind == "method" else []
    if not f.optional:
        return [*receiver, *names, "opts \\\\ []"], f"{call}{args_list}, opts)"
    body = (
        "{args, opts} = SnakeBridge.Runtime.normalize_args_opts(args, opts)\n"
        f"{call}{args_list} ++ List.wrap(args), opts)"
    )
    return [*receiver, *names, "args", "opts \\\\ []"], body


def atom(name: str) -> str:
    return f":{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*[?!]?", name) else f':"{name}"'


def emit_function(model: ModuleModel, f: Function) -> str:
    doc = None if f.kind == "getter" else default_doc(model, f)  # SnakeBridge documents no getter
    params, body = body_of(f)
    guard = " when is_list(kwargs)" if f.kind == "keyword_new" else ""
    lines = [f"  @doc {heredoc(doc)}"] if doc else []
    lines.append(f"  @spec {spec_of(f)}")
    lines.append(f"  def {f.name}({', '.join(params)}){guard} do")
    lines.extend(f"    {line}" if line else "" for line in body.splitlines())
    lines.append("  end")
    return "\n".join(lines)


def emit_module(model: ModuleModel) -> str:
    library = f"vllm {VLLM_VERSION}" if model.library == "vllm" else model.library
    header = [
        "# Generated by `compilation-bridge gen-elixir` from the exposed Python surface - DO NOT EDIT",
        "# Regenerate with: compilation-bridge gen-elixir --out elixir_stub",
        f"# Library: {library}",
        f"# Python module: {model.python_module}",
    ]
    if model.python_class:
        header.append(f"# Python class: {model.python_class}")
    parts = [
        f'  def __snakebridge_python_name__, do: "{model.python_module}"',
        *([f'  def __snakebridge_python_class__, do: "{model.python_class}"'] if model.python_class else []),
        f'  def __snakebridge_library__, do: "{model.library}"',
    ]
    if model.python_class:
        parts.append("  @opaque t :: SnakeBridge.Ref.t()")
    body = "\n".join(parts) + "".join(f"\n\n{emit_function(model, f)}" for f in model.functions)
    return "\n".join(header) + (
        f"\n\ndefmodule {model.elixir} do\n  @moduledoc {heredoc(model.moduledoc)}\n{body}\nend\n"
    )


# ------------------------------------------------------------------------------------------ command
def render() -> dict[Path, str]:
    return {m.path: emit_module(m) for m in surface_models()}


def write(out: Path, files: dict[Path, str]) -> list[Path]:
    target = out / GENERATED_DIR
    if target.exists():
        shutil.rmtree(target)  # a class that is no longer exposed must not leave its module behind
    written = []
    for relative, text in sorted(files.items()):
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def format_with_mix(out: Path, paths: list[Path]) -> None:
    """`mix format` the output when Elixir is installed (the stub's tests compare formatted text)."""
    mix = shutil.which("mix")
    if mix is None or not (out / ".formatter.exs").exists():
        print("gen-elixir: mix not found; files are written unformatted", file=sys.stderr)
        return
    subprocess.run([mix, "format", *[str(p.relative_to(out)) for p in paths]], cwd=out, check=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=Path("elixir_stub"), help="the Mix project (default ./elixir_stub)"
    )
    parser.add_argument("--no-format", action="store_true", help="do not run `mix format` on the output")


def run(args: argparse.Namespace) -> int:
    paths = write(args.out, render())
    if not args.no_format:
        format_with_mix(args.out, paths)
    for path in paths:
        print(path)
    return 0
