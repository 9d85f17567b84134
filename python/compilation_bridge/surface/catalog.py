"""The worker's concrete surface: vLLM's module names mapped onto our implementations.

Callers (SnakeBridge-generated Elixir code) name vLLM's modules, for example `python_module:
"vllm.config"`, class "CompilationConfig". They resolve here to `compilation_bridge.vllm_config`;
vLLM itself is never imported. `compilation_bridge.compile` (which imports torch) is loaded only when
a call names it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from typing import Any

from compilation_bridge.surface.registry import ExposedModule, ExposedType, Surface

CONFIG_PACKAGE = "compilation_bridge.vllm_config"
COMPILE_PACKAGE = "compilation_bridge.compile"

# vLLM module -> the names of it we expose (each exported by compilation_bridge.vllm_config).
VLLM_MODULES: dict[str, tuple[str, ...]] = {
    "vllm.config": (
        "CompilationConfig",
        "CompilationMode",
        "CUDAGraphMode",
        "PassConfig",
        "DeviceConfig",
        "ModelConfig",
        "ParallelConfig",
        "SchedulerConfig",
        "VllmConfig",
    ),
    "vllm.config.compilation": (
        "CompilationConfig",
        "CompilationMode",
        "CUDAGraphMode",
        "PassConfig",
        "DynamicShapesType",
        "DynamicShapesConfig",
        "Range",
    ),
    "vllm.config.utils": ("Range",),
    "vllm.config.vllm": (
        "VllmConfig",
        "OptimizationLevel",
        "CompilationConfig",
        "CompilationMode",
        "CUDAGraphMode",
        "DeviceConfig",
        "ModelConfig",
        "ParallelConfig",
        "SchedulerConfig",
    ),
    "vllm.config.device": ("DeviceConfig",),
    "vllm.config.model": ("ModelConfig",),
    "vllm.config.parallel": ("ParallelConfig",),
    "vllm.config.scheduler": ("SchedulerConfig",),
}

# Public names of vLLM 0.14.0's `vllm.config` that this worker does not serve: refused by name.
VLLM_CONFIG_NOT_EXPOSED = frozenset(
    {
        "AttentionConfig",
        "CacheConfig",
        "ECTransferConfig",
        "KVEventsConfig",
        "KVTransferConfig",
        "LoadConfig",
        "LoRAConfig",
        "iter_architecture_defaults",
        "str_dtype_to_torch_dtype",
        "try_match_architecture_defaults",
        "MultiModalConfig",
        "ObservabilityConfig",
        "EPLBConfig",
        "PoolerConfig",
        "SpeculativeConfig",
        "SpeechToTextConfig",
        "StructuredOutputsConfig",
        "ProfilerConfig",
        "ConfigType",
        "SupportsMetricsInfo",
        "config",
        "get_attr_docs",
        "is_init_field",
        "update_config",
        "get_cached_compilation_config",
        "get_current_vllm_config",
        "get_current_vllm_config_or_none",
        "set_current_vllm_config",
        "get_layers_from_vllm_config",
    }
)

# Config dataclasses: fields may be set on an instance. Underscore names are the ones the generated
# Elixir modules call (`_skip_none_validation` is a pydantic wrap validator, `_attention_ops` a ClassVar).
CONFIG_TYPES: dict[str, frozenset[str]] = {
    "CompilationConfig": frozenset({"_skip_none_validation", "_attention_ops"}),
    "PassConfig": frozenset({"_skip_none_validation"}),
    "DynamicShapesConfig": frozenset(),
    "VllmConfig": frozenset(),
    "SchedulerConfig": frozenset(),
    "ParallelConfig": frozenset(),
    "ModelConfig": frozenset(),
    "DeviceConfig": frozenset(),
    "Range": frozenset(),
}
ENUM_TYPES = ("CompilationMode", "CUDAGraphMode", "DynamicShapesType", "OptimizationLevel")
# Fields that make the worker allocate or loop in proportion to their value (DESIGN.md): set_attr
# bypasses pydantic's validators, so the cap is applied here too.
SIZE_FIELDS = frozenset(
    {
        "max_cudagraph_capture_size",
        "cudagraph_capture_sizes",
        "compile_sizes",
        "compile_ranges_split_points",
        "bs_to_padded_graph_size",
    }
)


def _config_package() -> Any:
    return importlib.import_module(CONFIG_PACKAGE)


def _vllm_loader(names: tuple[str, ...]) -> Any:
    def load() -> dict[str, Any]:
        package = _config_package()
        # A name the configuration model does not (yet) provide is simply absent.
        return {name: getattr(package, name) for name in names if hasattr(package, name)}

    return load


def _config_types() -> Iterable[ExposedType]:
    package = _config_package()
    for name, extras in CONFIG_TYPES.items():
        cls = getattr(package, name, None)
        if isinstance(cls, type):
            yield ExposedType(cls, extra_names=extras, settable=True)
    for name in ENUM_TYPES:
        cls = getattr(package, name, None)
        if isinstance(cls, type):
            yield ExposedType(cls)


def _compile_loader() -> dict[str, Any]:
    from compilation_bridge.protocol.refcompiled import recording

    module = importlib.import_module(COMPILE_PACKAGE)  # imports torch: only when a call needs it
    # Recording what each model was built from lets another worker rebuild it from the ref store.
    return {"compile_model": recording(module.compile_model)}


def _compile_progress() -> Any:
    return importlib.import_module(f"{COMPILE_PACKAGE}.progress").collect


def _compile_warm() -> None:
    importlib.import_module(COMPILE_PACKAGE).preload()


def _compile_types() -> Iterable[ExposedType]:
    module = importlib.import_module(COMPILE_PACKAGE)
    compiled = getattr(module, "CompiledModel", None)
    if isinstance(compiled, type):
        yield ExposedType(compiled, names=frozenset({"run", "report"}))
    yield from _config_types()  # compile_model accepts and returns config objects


def check_size_value(field: str, value: Any) -> None:
    if field not in SIZE_FIELDS:
        return
    from compilation_bridge.vllm_config.limits import check_size, check_sizes

    if isinstance(value, list | tuple | set | frozenset):
        check_sizes(field, value)
    else:
        check_size(field, value)


def _testing_loader() -> dict[str, Any]:
    from compilation_bridge.surface import testing

    return {"sleep": testing.sleep, "spin": testing.spin, "count": testing.count}


def default_surface() -> Surface:
    modules = [
        ExposedModule(
            name,
            _vllm_loader(names),
            _config_types,
            VLLM_CONFIG_NOT_EXPOSED if name == "vllm.config" else frozenset(),
            implements=CONFIG_PACKAGE,
        )
        for name, names in VLLM_MODULES.items()
    ]
    progress = _compile_progress
    modules.append(
        ExposedModule(
            COMPILE_PACKAGE,
            _compile_loader,
            _compile_types,
            progress=progress,
            warm=_compile_warm,
            implements=COMPILE_PACKAGE,
        )
    )
    if os.environ.get("COMPILATION_BRIDGE_TEST_HOOKS") == "1":  # see surface/testing.py
        modules.append(ExposedModule("compilation_bridge.testing", _testing_loader))
    return Surface(modules, value_check=check_size_value)
