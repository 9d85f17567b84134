"""The exposure registry: which modules, classes, attributes and methods a remote caller may touch.

Nothing outside this allowlist is imported, constructed, read, written or called (docs/design.md,
Security model). `default_surface()` is the worker's surface: vLLM's config modules mapped onto
`compilation_bridge.vllm_config`, and `compilation_bridge.compile` for real compilation.
"""

from compilation_bridge.surface.catalog import default_surface
from compilation_bridge.surface.registry import ExposedModule, ExposedType, Surface

__all__ = ["ExposedModule", "ExposedType", "Surface", "default_surface"]
