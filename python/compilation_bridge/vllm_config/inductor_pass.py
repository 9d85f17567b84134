"""`InductorPass` / `CallableInductorPass`: what `inductor_passes` entries resolve to.

Their `uuid()` (a sha256 of the pass's source) is what the config hash records for them, as in vLLM.
The compile layer runs them as Inductor custom graph passes.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import types
from collections.abc import Callable
from typing import Any


class InductorPass:
    def __call__(self, graph: Any) -> None:
        raise NotImplementedError

    def uuid(self) -> Any:
        return InductorPass.hash_source(self)

    @staticmethod
    def hash_source(*srcs: str | Any) -> str:
        hasher = hashlib.sha256()
        for src in srcs:
            if isinstance(src, str):
                src_str = src
            elif isinstance(src, (types.FunctionType, type)):
                src_str = inspect.getsource(src)
            else:
                src_str = inspect.getsource(src.__class__)
            hasher.update(src_str.encode("utf-8"))
        return hasher.hexdigest()

    @staticmethod
    def hash_dict(dict_: dict[Any, Any]) -> str:
        return hashlib.sha256(json.dumps(dict_, sort_keys=True).encode("utf-8")).hexdigest()


class CallableInductorPass(InductorPass):
    def __init__(self, callable: Callable[[Any], None], uuid: Any | None = None) -> None:
        self.callable = callable
        self._uuid = self.hash_source(callable) if uuid is None else uuid

    def __call__(self, graph: Any) -> None:
        self.callable(graph)

    def uuid(self) -> Any:
        return self._uuid
