"""The `snakebridge.call` call types (docs/wire.md, Call types), each a short function over the surface.

Each handler gets the decoded call (`Call`) and returns a raw Python result; dispatch encodes it.
Arguments are applied exactly as `f(*args, **kwargs)`: constructors are `cls(*args, **kwargs)` as vLLM
would run them, so positional `None`s are never reinterpreted (docs/wire.md, Construction).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compilation_bridge.protocol import codec
from compilation_bridge.protocol.errors import SnakeBridgeHelperNotFoundError
from compilation_bridge.surface import Surface


@dataclass
class Call:
    """One decoded `snakebridge.call` payload (refs in args/kwargs already resolved)."""

    call_type: str
    payload: dict[str, Any]
    args: list[Any]
    kwargs: dict[str, Any]
    resolve: Callable[[Any], Any]  # wire ref -> object, in the caller's session
    used_refs: list[str] = field(default_factory=list)  # ids resolved so far (the call may change them)

    def text(self, key: str, *fallbacks: str, required: str | None = None) -> str | None:
        """A string field of the payload (first present of key, *fallbacks)."""
        for name in (key, *fallbacks):
            value = self.payload.get(name)
            if value is not None:
                if not isinstance(value, str):
                    raise TypeError(f"{name} must be a string, not {type(value).__name__}")
                if value:
                    return value
        if required is not None:
            raise ValueError(required)
        return None

    def instance(self, key: str = "instance") -> Any:
        if key not in self.payload:
            raise ValueError(f"snakebridge.call {self.call_type} requires {key}")
        return self.resolve(self.payload[key])


def _module(call: Call) -> str:
    return call.text("python_module", "module", required="snakebridge.call requires python_module")  # type: ignore[return-value]


def call_function(call: Call, surface: Surface) -> Any:
    function = call.text("function", required="snakebridge.call requires function")
    target = surface.module_attr(_module(call), function)
    return target(*call.args, **call.kwargs)


def call_dynamic(call: Call, surface: Surface) -> Any:
    module = call.text("module_path", required="snakebridge.call dynamic requires module_path")
    function = call.text("function", required="snakebridge.call requires function")
    return surface.module_attr(module, function)(*call.args, **call.kwargs)


def call_class(call: Call, surface: Surface) -> Any:
    name = call.text("class", "class_name", required="snakebridge.call class requires class")
    cls = surface.module_attr(_module(call), name)
    if not isinstance(cls, type):
        raise TypeError(f"{_module(call)}.{name} is not a class")
    return cls(*call.args, **call.kwargs)


def call_method(call: Call, surface: Surface) -> Any:
    function = call.text("function", required="snakebridge.call method requires function")
    return surface.method(call.instance(), function)(*call.args, **call.kwargs)


def get_attr(call: Call, surface: Surface) -> Any:
    attr = call.text("attr", "function", required="snakebridge.call get_attr requires attr")
    return surface.get_attr(call.instance(), attr)


def set_attr(call: Call, surface: Surface) -> Any:
    attr = call.text("attr", "function", required="snakebridge.call set_attr requires attr")
    if len(call.args) != 1:
        # Without it the field would be set to None, silently: a caller that sent `value` loses it.
        raise ValueError(
            f"snakebridge.call set_attr requires the value as args: [value], got {len(call.args)} args"
        )
    surface.set_attr(call.instance(), attr, call.args[0])
    return True


def module_attr(call: Call, surface: Surface) -> Any:
    attr = call.text("attr", "function", required="snakebridge.call module_attr requires attr")
    return surface.module_attr(_module(call), attr)


def stream_next(call: Call, surface: Surface) -> Any:
    iterator = call.instance("stream_ref")
    try:
        return surface.method(iterator, "__next__")()
    except StopIteration:
        return codec.STOP_ITERATION


def call_helper(call: Call, surface: Surface) -> Any:
    name = call.text("helper", "function") or ""
    if not name:
        raise SnakeBridgeHelperNotFoundError("Helper name is required")
    raise SnakeBridgeHelperNotFoundError(f"Helper '{name}' not found")


HANDLERS: dict[str, Callable[[Call, Surface], Any]] = {
    "function": call_function,
    "dynamic": call_dynamic,
    "class": call_class,
    "method": call_method,
    "get_attr": get_attr,
    "set_attr": set_attr,
    "module_attr": module_attr,
    "stream_next": stream_next,
    "helper": call_helper,
}
