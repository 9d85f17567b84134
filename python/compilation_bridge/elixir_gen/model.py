"""What each generated Elixir module holds, introspected from what the surface exposes (package doc)."""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import inspect
import itertools
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

GENERATED_DIR = Path("lib/generated")
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
            # An instance field without a class-level default has no getter (as SnakeBridge), except in
            # a msgspec Struct, whose fields are all class-level descriptors.
            if name in getattr(cls, "__struct_fields__", ()):
                yield Function("getter", elixir_name(name), name)
            continue
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
