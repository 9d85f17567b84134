"""msgspec's Struct, as far as vLLM's request parameters show it, on a dataclass.

vLLM's `SamplingParams`, `BeamSearchParams` and `PoolingParams` are msgspec Structs. What a caller sees of
one: construction binds arguments by position, then by name, each field once, without looking at types
(msgspec checks types only when it decodes), with msgspec's messages; defaults are made fresh per
instance; `__post_init__` runs last; equality compares the fields; a Struct that is not frozen cannot be
hashed; `__struct_fields__` names the fields. Here those classes are dataclasses built by `StructInit`, so
that the ref store keeps them as it keeps every config, and no msgspec is needed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, TypeVar

from compilation_bridge.vllm_config.exceptions import ValidationError

_MISSING = dataclasses.MISSING
_S = TypeVar("_S", bound="StructInit")


class StructInit:
    """msgspec.Struct's constructor: arguments bound by position, then by name, each field once; a
    field without a default must be given; defaults made fresh for each instance; `__post_init__` last.
    """

    __hash__: ClassVar[None] = None  # a Struct that is not frozen

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = dataclasses.fields(self)
        if len(args) > len(fields):
            raise TypeError("Extra positional arguments provided")
        names = {f.name for f in fields}
        for name in kwargs:
            if name not in names:
                raise TypeError(f"Unexpected keyword argument '{name}'")
        for position, spec in enumerate(fields):
            if position < len(args):
                if spec.name in kwargs:
                    raise TypeError(f"Argument '{spec.name}' given by name and position")
                value = args[position]
            elif spec.name in kwargs:
                value = kwargs[spec.name]
            elif spec.default is not _MISSING:
                value = spec.default
            elif spec.default_factory is not _MISSING:
                value = spec.default_factory()
            else:
                raise TypeError(f"Missing required argument '{spec.name}'")
            object.__setattr__(self, spec.name, value)
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:
            post_init()

    @classmethod
    def _validate_msgspec(cls, value: Any) -> Any:
        """Validate and convert input to msgspec.Struct instance."""
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            return cls(**value)
        raise ValidationError(f"Expected `object`, got `{_json_kind(value)}`")


def _json_kind(value: Any) -> str:
    """msgspec's name for the kind of a value that is not an object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, list | tuple | set | frozenset):
        return "array"
    return type(value).__name__


def msgspec_struct(cls: type[_S]) -> type[_S]:
    """A dataclass with msgspec's constructor (`StructInit`), naming its fields as msgspec does
    (`__struct_fields__`: the class has no attribute for a field without a default)."""
    cls = dataclasses.dataclass(init=False, eq=True)(cls)
    cls.__struct_fields__ = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[attr-defined]
    return cls
