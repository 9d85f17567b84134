"""The differential request interpreter, shared by the oracle server and the product runner.

A request is a small JSON program: build one object from constructor arguments, then run a list of
operations on it, and answer everything in one canonical JSON encoding. The same function runs against
vLLM 0.14.0 (``oracle_server.py``, in the oracle environment) and against
``compilation_bridge.vllm_config`` (``tests/differential/runner.py``), each given its own table of
classes, so a differential test is ``assert product(request) == oracle(request)``.

This module imports neither vLLM nor the product: it only sees the classes it is handed.

Request::

    {"build": BUILD, "ops": [OP, ...], "final": true, "env": {NAME: VALUE | null}, "sequential_uuid4": true}

``sequential_uuid4`` makes ``uuid.uuid4()`` answer the version-4 UUIDs 1, 2, 3, ... during the request, on
both sides alike: the KV and EC transfer configs draw their default ``engine_id`` from it, and a random id
would make every answer that shows it differ.

BUILD is one of:

- ``{"kind": "new", "cls": NAME, "args": [...], "kwargs": {...}}``: ``NAME(*args, **kwargs)``;
- ``{"kind": "vllm", "compilation_config": VALUE, "model": {...} | null, "scheduler_config": {...},
  "parallel_config": {...}, "device_config": {...}, "cache_config": {...}, "load_config": {...},
  "observability_config": {...}, "attention_config": {...}, "lora_config": {...},
  "structured_outputs_config": {...}, "speculative_config": {...},
  "profiler_config": {...}, "kv_transfer_config": {...}, "kv_events_config": {...},
  "ec_transfer_config": {...}, "optimization_level": VALUE, "kwargs": {...}}``:
  the sub-configs are built in that order (``model`` gives ``ModelConfig(**model)``), then the
  speculative config against that model and parallel config (as vLLM's engine arguments build it), then
  ``VllmConfig(...)``; an absent key is not passed. The default target is ``vllm.compilation_config``;
- ``{"kind": "enum", "enum": NAME, "name": MEMBER}`` or ``{"kind": "enum", "enum": NAME, "value": VALUE}``;
- ``{"kind": "class", "cls": NAME}``: the class itself (to read class attributes).

VALUE is JSON, with tagged objects decoded first: ``{"__tuple__": [...]}``, ``{"__enum__": NAME, "name":
MEMBER}``, ``{"__new__": NAME, "args": [...], "kwargs": {...}}``, ``{"__path__": "..."}`` and
``{"__attention_ops__": true}`` (a fresh copy of ``CompilationConfig._attention_ops``).

OP is ``{"op": NAME, "on": PATH, ...}``; ``on`` is a dotted attribute path from the built object (``""``
is the object itself; absent means the default target), or from what the last ``keep`` kept when it
starts with ``@`` (``"@"`` is that object, ``"@cache_config"`` an attribute of it). Operations:

- ``fields``: field names in declaration order and encoded values; ``hash``: ``compute_hash()``;
  ``repr`` / ``str``;
- ``call``: ``{"name": METHOD, "args": [...], "kwargs": {...}}``, the encoded return value;
- ``keep``: as ``call``, keeping the returned object for later ``@`` paths (answers its class name);
- ``call_qualname``: as ``call``, but a class that comes back is answered by its qualified name
  (``module.QualName``): the product answers a class of vLLM's engine by that name (``get_scheduler_cls``);
- ``len``: ``len(target)``;
- ``get``: ``{"name": ATTR}``; ``set``: ``{"name": ATTR, "value": VALUE}`` (``setattr``);
  ``eq`` / ``ne``: ``{"other": VALUE}``; ``deepcopy_eq``;
- ``contains``: ``{"value": VALUE}`` (``value in target``); ``pyhash_eq``: ``hash(target) == hash(other)``;
- ``members``: an enum class's ``__members__`` in order, as ``[name, member]`` pairs;
- ``init_backend``: ``target.init_backend(None)`` (only meaningful where it fails before using the
  argument, or returns a backend name);
- ``same_compilation_config``: for ``vllm`` builds, whether ``VllmConfig`` kept the very object passed in;
- ``is_uuid4``: ``{"name": ATTR}``, whether the attribute is a string that spells a version-4 UUID.

Answer::

    {"build": "ok" | ERROR, "stage": STAGE, "ops": [{"ok": ENC} | ERROR, ...], "final": FIELDS}

ERROR is ``{"error": type name, "module": type module, "message": str(e)}``. ``final`` is the ``fields``
snapshot of the default target after all operations (when it is a dataclass). Encoding (``enc``): an enum
member is ``{"enum": class, "name": ..., "value": ...}`` (so an ``IntEnum`` and an ``int`` differ),
dataclasses and msgspec Structs become field dicts, sets sorted lists, tuples lists, Counters dicts,
other objects their ``repr`` (callables and classes their qualified name).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import itertools
import os
import pathlib
import uuid
from collections.abc import Callable, Mapping
from typing import Any

Api = Mapping[str, Any]

# The names a side must provide. Both sides hand in exactly these.
API_NAMES = (
    "CompilationConfig",
    "CompilationMode",
    "CUDAGraphMode",
    "PassConfig",
    "DynamicShapesConfig",
    "DynamicShapesType",
    "Range",
    "OptimizationLevel",
    "VllmConfig",
    "SchedulerConfig",
    "ParallelConfig",
    "ModelConfig",
    "DeviceConfig",
    "CacheConfig",
    "LoadConfig",
    "ObservabilityConfig",
    "AttentionConfig",
    "AttentionBackendEnum",
    "SpeechToTextConfig",
    "StructuredOutputsConfig",
    "ProfilerConfig",
    "PoolerConfig",
    "EPLBConfig",
    "KVEventsConfig",
    "SamplingParams",
    "SamplingType",
    "RequestOutputKind",
    "StructuredOutputsParams",
    "BeamSearchParams",
    "PoolingParams",
    "KVTransferConfig",
    "ECTransferConfig",
    "MultiModalConfig",
    "LoRAConfig",
    "EngineArgs",
    "AsyncEngineArgs",
    "UsageContext",
    "SpeculativeConfig",
)


class HarnessError(Exception):
    """A malformed request: a bug in the test, never an answer to compare."""


def enc(v: Any) -> Any:
    """Canonical JSON-able encoding of a value (see the module docstring)."""
    if isinstance(v, enum.Enum):
        return {"enum": type(v).__name__, "name": v.name, "value": enc(v.value)}
    names = field_names(v)
    if names is not None:
        return {name: enc(getattr(v, name)) for name in names}
    if isinstance(v, dict):
        return {str(k): enc(x) for k, x in v.items()}
    if isinstance(v, (set, frozenset)):
        return [enc(x) for x in sorted(v)]
    if isinstance(v, (list, tuple)):
        return [enc(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, type):
        return {"class": v.__qualname__}
    if callable(v) and not isinstance(v, pathlib.PurePath):
        return {"callable": getattr(v, "__qualname__", type(v).__qualname__)}
    return repr(v)


def err(e: BaseException) -> dict[str, str]:
    return {"error": type(e).__name__, "module": type(e).__module__, "message": str(e)}


def decode(api: Api, v: Any, root: Any = None) -> Any:
    """Turns a request VALUE into the Python value it stands for; `{"__root__": path}` is that attribute
    path of the built object (`root`), as it is (a sub-config, or vLLM's transformers config where the
    product holds a dict)."""
    if isinstance(v, list):
        return [decode(api, x, root) for x in v]
    if not isinstance(v, dict):
        return v
    if "__root__" in v:
        if root is None:
            raise HarnessError("__root__ outside an op on a built object")
        return _resolve(root, v["__root__"])
    if "__tuple__" in v:
        return tuple(decode(api, x, root) for x in v["__tuple__"])
    if "__enum__" in v:
        return api[v["__enum__"]][v["name"]]
    if "__new__" in v:
        cls = api[v["__new__"]]
        return cls(*decode(api, v.get("args", [])), **decode(api, v.get("kwargs", {})))
    if "__path__" in v:
        return pathlib.Path(v["__path__"])
    if "__attention_ops__" in v:
        return list(api["CompilationConfig"]._attention_ops)
    return {k: decode(api, x, root) for k, x in v.items()}


def field_names(obj: Any) -> list[str] | None:
    """The fields of a dataclass or of a msgspec Struct (vLLM's request parameters), in order; None for
    anything else."""
    if isinstance(obj, type):
        return None
    if dataclasses.is_dataclass(obj):
        return [f.name for f in dataclasses.fields(obj)]
    struct_fields = getattr(type(obj), "__struct_fields__", None)
    return list(struct_fields) if struct_fields is not None else None


def _fields(obj: Any) -> dict[str, Any]:
    names = field_names(obj)
    if names is None:
        raise TypeError(f"fields: a {type(obj).__name__} has no fields")
    return {"names": names, "values": {name: enc(getattr(obj, name)) for name in names}}


def _resolve(root: Any, path: str, state: dict[str, Any] | None = None) -> Any:
    """`path` from the built object, or from what a `keep` op kept when it starts with "@"."""
    obj = root
    if path.startswith("@"):
        obj, path = (state or {})["kept"], path[1:]
    for part in filter(None, path.split(".")):
        obj = getattr(obj, part)
    return obj


def _build_vllm(api: Api, b: dict[str, Any], state: dict[str, Any]) -> Any:
    kw: dict[str, Any] = dict(decode(api, b.get("kwargs", {})))
    state["stage"] = "compilation_config"
    if "compilation_config" in b:
        cc = decode(api, b["compilation_config"])
        state["cc"] = cc
        kw["compilation_config"] = cc
    state["stage"] = "model_config"
    if b.get("model") is not None:
        kw["model_config"] = api["ModelConfig"](**decode(api, b["model"]))
    for key, cls in (
        ("scheduler_config", "SchedulerConfig"),
        ("parallel_config", "ParallelConfig"),
        ("device_config", "DeviceConfig"),
        ("cache_config", "CacheConfig"),
        ("load_config", "LoadConfig"),
        ("observability_config", "ObservabilityConfig"),
        ("attention_config", "AttentionConfig"),
        ("lora_config", "LoRAConfig"),
        ("structured_outputs_config", "StructuredOutputsConfig"),
        ("profiler_config", "ProfilerConfig"),
        ("kv_transfer_config", "KVTransferConfig"),
        ("kv_events_config", "KVEventsConfig"),
        ("ec_transfer_config", "ECTransferConfig"),
    ):
        state["stage"] = key
        if key in b:
            kw[key] = api[cls](**decode(api, b[key]))
    state["stage"] = "speculative_config"
    if "speculative_config" in b:
        # As vLLM's engine arguments build it: against the model and the parallel layout VllmConfig gets.
        parallel = kw.setdefault("parallel_config", api["ParallelConfig"]())
        spec = dict(decode(api, b["speculative_config"]))
        spec.update(target_model_config=kw.get("model_config"), target_parallel_config=parallel)
        kw["speculative_config"] = api["SpeculativeConfig"](**spec)
    if "optimization_level" in b:
        kw["optimization_level"] = decode(api, b["optimization_level"])
    state["stage"] = "vllm_config"
    return api["VllmConfig"](**kw)


def _build(api: Api, b: dict[str, Any], state: dict[str, Any]) -> tuple[Any, str]:
    """Returns the built object and the default target path."""
    kind = b.get("kind")
    if kind == "new":
        state["stage"] = "args"
        cls = api[b["cls"]]
        args = decode(api, b.get("args", []))
        kwargs = decode(api, b.get("kwargs", {}))
        state["stage"] = "construct"
        return cls(*args, **kwargs), ""
    if kind == "vllm":
        return _build_vllm(api, b, state), "compilation_config"
    if kind == "enum":
        cls = api[b["enum"]]
        state["stage"] = "construct"
        if "name" in b:
            return cls[b["name"]], ""
        return cls(decode(api, b["value"])), ""
    if kind == "class":
        return api[b["cls"]], ""
    raise HarnessError(f"unknown build kind {kind!r}")


def _public(name: str) -> str:
    if name.startswith("__"):
        raise HarnessError(f"dunder {name!r} is not callable through a request")
    return name


def _op(api: Api, op: dict[str, Any], target: Any, state: dict[str, Any]) -> Any:
    name = op["op"]
    if name == "fields":
        return _fields(target)
    if name == "hash":
        return target.compute_hash()
    if name == "repr":
        return repr(target)
    if name == "str":
        return str(target)
    if name == "call":
        fn: Callable[..., Any] = getattr(target, _public(op["name"]))
        root = state.get("root")
        return enc(fn(*decode(api, op.get("args", []), root), **decode(api, op.get("kwargs", {}), root)))
    if name == "keep":  # a call whose result later ops address as "@..." (an object built from the root)
        fn = getattr(target, _public(op["name"]))
        root = state.get("root")
        state["kept"] = fn(*decode(api, op.get("args", []), root), **decode(api, op.get("kwargs", {}), root))
        return type(state["kept"]).__name__
    if name == "call_qualname":
        fn = getattr(target, _public(op["name"]))
        result = fn(*decode(api, op.get("args", [])), **decode(api, op.get("kwargs", {})))
        return f"{result.__module__}.{result.__qualname__}" if isinstance(result, type) else enc(result)
    if name == "len":
        return len(target)
    if name == "get":
        return enc(getattr(target, _public(op["name"])))
    if name == "set":
        setattr(target, _public(op["name"]), decode(api, op["value"]))
        return None
    if name == "eq":
        return bool(target == decode(api, op["other"]))
    if name == "ne":
        return bool(target != decode(api, op["other"]))
    if name == "deepcopy_eq":
        return bool(copy.deepcopy(target) == target)
    if name == "contains":
        return bool(decode(api, op["value"]) in target)
    if name == "pyhash_eq":
        return hash(target) == hash(decode(api, op["other"]))
    if name == "members":
        return [[n, enc(m)] for n, m in target.__members__.items()]
    if name == "init_backend":
        result = target.init_backend(None)
        return result if isinstance(result, str) else {"not_a_name": enc(result)}
    if name == "same_compilation_config":
        return state.get("cc") is state["root"].compilation_config
    if name == "is_uuid4":
        return _is_uuid4(getattr(target, _public(op["name"])))
    raise HarnessError(f"unknown op {name!r}")


def execute(api: Api, req: dict[str, Any]) -> dict[str, Any]:
    """Runs one request against the classes in `api` and returns its canonical answer, with the
    request's ``env`` (name -> value, or null to unset) in ``os.environ`` meanwhile."""
    env: dict[str, str | None] = req.get("env") or {}
    saved = {k: os.environ.get(k) for k in env}
    random_uuid4 = uuid.uuid4
    try:
        for k, v in env.items():
            _setenv(k, v)
        if req.get("sequential_uuid4"):
            count = itertools.count(1)
            uuid.uuid4 = lambda: uuid.UUID(int=next(count), version=4)
        return _execute(api, req)
    finally:
        uuid.uuid4 = random_uuid4
        for k, v in saved.items():
            _setenv(k, v)


def _is_uuid4(value: Any) -> bool:
    try:
        return isinstance(value, str) and str(uuid.UUID(value)) == value and uuid.UUID(value).version == 4
    except ValueError:
        return False


def _setenv(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _execute(api: Api, req: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = {"stage": "build"}
    out: dict[str, Any] = {}
    try:
        root, default_on = _build(api, req["build"], state)
    except HarnessError:
        raise
    except Exception as e:
        out["build"] = err(e)
        out["stage"] = state["stage"]
        return out
    state["root"] = root
    out["build"] = "ok"
    results: list[Any] = []
    for op in req.get("ops", []):
        try:
            target = _resolve(root, op.get("on", default_on), state)
            results.append({"ok": _op(api, op, target, state)})
        except HarnessError:
            raise
        except Exception as e:
            results.append(err(e))
    out["ops"] = results
    if req.get("final", True):
        try:
            target = _resolve(root, default_on)
            if field_names(target) is not None:
                out["final"] = _fields(target)
        except Exception as e:
            out["final"] = err(e)
    return out


def api_from_module(module: Any, **extra: Any) -> dict[str, Any]:
    """The class table from a module that exports the API names (plus overrides)."""
    api = {n: getattr(module, n) for n in API_NAMES if hasattr(module, n)}
    api.update(extra)
    return api
