#!/usr/bin/env python3
"""Writes the model facts `ModelConfig` answers from vLLM's model registry, as data, from vLLM 0.14.0 itself.

Run with the oracle environment's interpreter (it imports vLLM and transformers; the product never does):

    PYTHONHASHSEED=0 .oracle-venv/bin/python scripts/gen_model_registry.py > \
        python/compilation_bridge/vllm_config/model_registry.json

What it writes (sorted keys, one JSON document):

- `models`: for every architecture of vLLM's registry whose model class the CPU build can import, the
  `_ModelInfo` vLLM inspects from that class (runner kinds, attention type, default pooling types, the
  `SupportsPP`/`IsHybrid`/`IsAttentionFree`/... flags). Architectures whose class needs a package the
  reference build lacks (`einops`, `torchvision`, ...) are left out: vLLM there answers "failed to be
  inspected", and so does the worker.
- `supported_architectures`: every name of the registry in vLLM's order (its "not supported" message
  prints them), `previously_supported` and the Transformers modelling backend's own classes.
- `transformers_backend_compatible`: for each name of `models` that transformers 4.57 defines, whether its
  class works with vLLM's Transformers backend (`model_impl="transformers"`).
- `generation_config_defaults` and `transformers_version`: `GenerationConfig().to_dict()`, what
  `try_get_generation_config` compares a model's generation config with.
- `quantization_methods` and `deprecated_quantization_methods`: vLLM's lists.

tests/differential/test_model_registry.py runs this script and compares its output with the file in the
package, so the table cannot drift from vLLM.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")


def main() -> None:
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # vLLM and its imports print to stdout; only the JSON goes there
    logging.disable(logging.CRITICAL)

    import transformers
    import vllm.platforms as platforms
    from transformers import GenerationConfig
    from vllm.model_executor.layers import quantization
    from vllm.model_executor.models import registry
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()
    models = {}
    for arch, entry in registry.ModelRegistry.models.items():
        try:
            info = registry._ModelInfo.from_model_cls(entry.load_model_cls())
        except Exception as e:  # a class the reference build cannot import: left out
            print(f"gen_model_registry: {arch} left out ({type(e).__name__}: {e})", file=sys.stderr)
            continue
        models[arch] = dataclasses.asdict(info)
    compatible = {}
    for arch in models:
        cls = getattr(transformers, arch, None)
        if cls is not None and hasattr(cls, "is_backend_compatible"):
            compatible[arch] = bool(cls.is_backend_compatible())
    defaults = GenerationConfig().to_dict()
    version = defaults.pop("transformers_version")
    data = {
        "vllm_version": "0.14.0",
        "models": models,
        "supported_architectures": list(registry.ModelRegistry.models),
        "previously_supported": dict(registry._PREVIOUSLY_SUPPORTED_MODELS),
        "transformers_backend_models": list(registry._TRANSFORMERS_BACKEND_MODELS),
        "transformers_backend_compatible": compatible,
        "generation_config_defaults": defaults,
        "transformers_version": version,
        "quantization_methods": list(quantization.QUANTIZATION_METHODS),
        "deprecated_quantization_methods": list(quantization.DEPRECATED_QUANTIZATION_METHODS),
    }
    out.write(json.dumps(data, indent=1, sort_keys=True) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
