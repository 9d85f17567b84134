"""Compiled models in the ref store: stored as the call that made them, rebuilt by making it again.

A `CompiledModel` holds torch modules and compiled code, which are not data; what made it is (the config
as it was when `compile_model` was called, and the model options). Another worker rebuilds the model by
calling `compile_model` with them: the compile cache (and, with Redis, Inductor's remote caches) makes
that a warm load, not a new compilation. Run counters start again from zero on the rebuilt model.

The state format learns the kind at this module's import (`register_extension`): `refs/__init__.py`
imports it, so the format never imports back the code that compiles.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

from compilation_bridge.refs import state as refstate

# compiled model -> its recipe (JSON-ready), for as long as the model lives
_recipes: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def recording(compile_model: Callable[..., Any]) -> Callable[..., Any]:
    """`compile_model`, remembering for each result the arguments it was built from."""

    @functools.wraps(compile_model)
    def compile_and_record(*args: Any, **kwargs: Any) -> Any:
        try:  # before the call: compiling writes counters into the config
            recipe = refstate.encode([list(args), kwargs])
        except refstate.NotStorable:
            recipe = None  # e.g. a config holding an allowlisted callable: the ref stays on this worker
        compiled = compile_model(*args, **kwargs)
        if recipe is not None:
            _recipes[compiled] = recipe.decode()
        return compiled

    return compile_and_record


def recipe_of(obj: Any) -> Any:
    try:
        return _recipes.get(obj)
    except TypeError:  # unhashable objects are never compiled models
        return None


def rebuild(recipe: Any) -> Any:
    """The compiled model made again from its recipe (a warm load from the compile cache)."""
    if not isinstance(recipe, str):
        raise refstate.CorruptState("a compiled model's recipe must be a string")
    args, kwargs = refstate.decode(recipe.encode())
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise refstate.CorruptState("a compiled model's recipe must hold arguments")
    from compilation_bridge.compile import compile_model  # imports torch: only when a model is restored

    return recording(compile_model)(*args, **kwargs)


refstate.register_extension("compiled", recipe_of, rebuild)
