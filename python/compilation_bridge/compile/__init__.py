"""Real torch compilation driven by a vLLM 0.14.0 CompilationConfig or VllmConfig.

`compile_model(config, model="toy-llama", max_num_tokens=..., seed=..., **model_size_options)` returns a
`CompiledModel` with `run(num_tokens)` and `report()`. `progress.collect(callback)` streams compile
events. Importing this package registers the VllmBackend factory behind
`CompilationConfig.init_backend` for VLLM_COMPILE.
"""

from compilation_bridge import remote_cache
from compilation_bridge.compile import progress
from compilation_bridge.compile.backend import VllmBackend, vllm_backend_factory
from compilation_bridge.compile.compiler import InductorCompileError
from compilation_bridge.compile.counters import CompilationCounter, compilation_counter
from compilation_bridge.compile.files import PathNotAllowedError
from compilation_bridge.compile.reference_models import MODELS
from compilation_bridge.compile.runner import CompiledModel, compile_model, preload
from compilation_bridge.vllm_config import set_vllm_backend_factory

set_vllm_backend_factory(vllm_backend_factory)
remote_cache.install()  # Inductor's remote caches, when the operator asked for them (before any compile)

__all__ = [
    "MODELS",
    "CompilationCounter",
    "CompiledModel",
    "InductorCompileError",
    "PathNotAllowedError",
    "VllmBackend",
    "compilation_counter",
    "compile_model",
    "preload",
    "progress",
]
