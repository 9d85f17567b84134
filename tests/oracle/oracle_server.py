#!/usr/bin/env python3
"""A persistent vLLM 0.14.0 oracle: line-delimited JSON requests on stdin, one JSON answer per line.

Run with the oracle environment's interpreter, the platform fixed for the life of the process:

    PYTHONHASHSEED=0 HF_HUB_OFFLINE=1 .oracle-venv/bin/python tests/oracle/oracle_server.py cpu|cuda

The platform is set up exactly as ``oracle_cli.py`` does (``cuda``: vLLM's CUDA platform logic with a
stand-in node of 8 sm_90 GPUs of 80 GiB, no GPU needed). Each input line is one request of
``program.py`` (or a JSON list of them, answered with a list); ``{"ping": true}`` answers the platform
class name. vLLM's logs and anything else printed go to stderr: stdout carries only the answers.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import types
from typing import Any, TextIO

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # vLLM logs to stdout by default
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import program


def _answers_stream() -> TextIO:
    """Keeps the real stdout for answers and points fd 1 and sys.stdout at stderr."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def _setup_platform(plat: str) -> Any:
    import vllm.platforms as P

    if plat == "cpu":
        from vllm.platforms.cpu import CpuPlatform

        P._current_platform = CpuPlatform()
    elif plat == "cuda":  # CUDA platform logic without a GPU: one node of 8 sm_90 GPUs, 80 GiB each
        sys.modules.setdefault("vllm._C", types.ModuleType("vllm._C"))
        import vllm.utils.torch_utils as TU
        from vllm.platforms import cuda as C
        from vllm.platforms.interface import DeviceCapability

        K = C.CudaPlatform
        K.get_device_capability = classmethod(lambda cls, device_id=0: DeviceCapability(9, 0))
        K.get_device_name = classmethod(lambda cls, device_id=0: "fake-sm90")
        K.get_device_total_memory = classmethod(lambda cls, device_id=0: 80 * 2**30)
        K.device_count = classmethod(lambda cls: 8)
        TU._cuda_device_count_stateless = lambda *a, **k: 8  # what ParallelConfig checks world size against
        P._current_platform = K()
        _tolerate_modelinfo_cache_save()
        _sm90_kernel_support_answers()
    else:
        raise SystemExit(f"usage: oracle_server.py cpu|cuda (got {plat!r})")
    _fixed_host_memory()
    return P.current_platform


def _fixed_host_memory() -> None:
    """``CacheConfig.verify_with_parallel_config`` compares swap space (4 GiB per GPU) with the RAM of the
    machine that runs the tests, so tensor parallelism 8 would fail on a small test machine and pass on a
    large one. The machine is not behaviour: the stand-in host has 2 TiB of RAM on both platforms, as a
    node of 8 such GPUs would, so those checks never depend on where the tests run."""
    import vllm.config.cache as cache

    cache.get_cpu_memory = lambda: 2 * 2**40


def _tolerate_modelinfo_cache_save() -> None:
    """Under the stand-in CUDA platform, saving vLLM's model-info cache imports quantization kernels that
    query ``vllm._C`` (absent here) and raises, which makes ``ModelConfig`` fail whenever the cache file
    does not exist yet (a fresh machine). The cache is a pure speed-up, so a failed save is ignored: the
    inspected model info itself is unchanged."""
    from vllm.model_executor.models import registry

    cls = registry._LazyRegisteredModel
    save = cls._save_modelinfo_to_cache

    def tolerant_save(self: Any, mi: Any, module_hash: str) -> None:
        try:
            save(self, mi, module_hash)
        except Exception as e:
            print(f"oracle: model info cache not saved ({type(e).__name__})", file=sys.stderr)

    cls._save_modelinfo_to_cache = tolerant_save


def _sm90_kernel_support_answers() -> None:
    """Importing a model module that uses quantization kernels (Jamba, LFM2, LFM2-MoE: vLLM's
    ``HybridAttentionMambaModelConfig`` resolves the model class to read its Mamba state shapes) asks
    ``vllm._C`` at import time whether CUTLASS supports FP8 and block FP8 on this device. ``vllm._C`` is
    absent from this CPU-only oracle environment, so the import raises and vLLM reports that the
    architecture "failed to be inspected", where a real installation on an sm_90 GPU imports it. The two
    queries answer here as vLLM's build does for the stand-in's capability 9.0 (both supported since
    CUDA 12.0); they pick kernels, never config values."""
    import vllm._custom_ops as ops

    ops.cutlass_scaled_mm_supports_fp8 = lambda cuda_device_capability: True
    ops.cutlass_scaled_mm_supports_block_fp8 = lambda cuda_device_capability: True


def _kernel_free_fusion_table() -> None:
    """``PassConfig.flashinfer_max_size`` reads ``FI_ALLREDUCE_FUSION_MAX_SIZE_MB`` from
    ``vllm.compilation.collective_fusion``, a module that needs vLLM's compiled kernels (``vllm._C``) at
    import time. They are absent from this CPU-only oracle environment, so the import raises
    ``AttributeError`` where a real installation imports it. When that happens, the module is stood in for
    by one that holds only that table, read from vLLM's own source file, so the method answers as vLLM
    does on a machine with its kernels."""
    import ast
    import importlib
    import importlib.util

    name = "vllm.compilation.collective_fusion"
    try:
        importlib.import_module(name)
        return
    except Exception as e:
        print(
            f"oracle: {name} not importable here ({type(e).__name__}); standing in its table", file=sys.stderr
        )
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    table = None
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "FI_ALLREDUCE_FUSION_MAX_SIZE_MB" for t in targets):
                assert node.value is not None
                table = ast.literal_eval(node.value)
    assert table is not None, "FI_ALLREDUCE_FUSION_MAX_SIZE_MB not found in vLLM's source"
    stub = types.ModuleType(name)
    stub.FI_ALLREDUCE_FUSION_MAX_SIZE_MB = table  # type: ignore[attr-defined]
    sys.modules[name] = stub
    importlib.import_module("vllm.compilation").collective_fusion = stub


def _api() -> dict[str, Any]:
    from vllm.config import (
        AttentionConfig,
        CacheConfig,
        CompilationConfig,
        DeviceConfig,
        ECTransferConfig,
        EPLBConfig,
        KVEventsConfig,
        KVTransferConfig,
        LoadConfig,
        LoRAConfig,
        ModelConfig,
        MultiModalConfig,
        ObservabilityConfig,
        ParallelConfig,
        PoolerConfig,
        ProfilerConfig,
        SchedulerConfig,
        SpeculativeConfig,
        SpeechToTextConfig,
        StructuredOutputsConfig,
        VllmConfig,
    )
    from vllm.config.compilation import (
        CompilationMode,
        CUDAGraphMode,
        DynamicShapesConfig,
        DynamicShapesType,
        PassConfig,
    )
    from vllm.config.utils import Range
    from vllm.config.vllm import OptimizationLevel
    from vllm.engine.arg_utils import AsyncEngineArgs, EngineArgs
    from vllm.pooling_params import PoolingParams
    from vllm.sampling_params import (
        BeamSearchParams,
        RequestOutputKind,
        SamplingParams,
        SamplingType,
        StructuredOutputsParams,
    )
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    return {
        "CompilationConfig": CompilationConfig,
        "CompilationMode": CompilationMode,
        "CUDAGraphMode": CUDAGraphMode,
        "PassConfig": PassConfig,
        "DynamicShapesConfig": DynamicShapesConfig,
        "DynamicShapesType": DynamicShapesType,
        "Range": Range,
        "OptimizationLevel": OptimizationLevel,
        "VllmConfig": VllmConfig,
        "SchedulerConfig": SchedulerConfig,
        "ParallelConfig": ParallelConfig,
        "ModelConfig": ModelConfig,
        "DeviceConfig": DeviceConfig,
        "CacheConfig": CacheConfig,
        "LoadConfig": LoadConfig,
        "ObservabilityConfig": ObservabilityConfig,
        "AttentionConfig": AttentionConfig,
        "AttentionBackendEnum": AttentionBackendEnum,
        "SpeechToTextConfig": SpeechToTextConfig,
        "StructuredOutputsConfig": StructuredOutputsConfig,
        "ProfilerConfig": ProfilerConfig,
        "PoolerConfig": PoolerConfig,
        "EPLBConfig": EPLBConfig,
        "KVEventsConfig": KVEventsConfig,
        "SamplingParams": SamplingParams,
        "SamplingType": SamplingType,
        "RequestOutputKind": RequestOutputKind,
        "StructuredOutputsParams": StructuredOutputsParams,
        "BeamSearchParams": BeamSearchParams,
        "PoolingParams": PoolingParams,
        "KVTransferConfig": KVTransferConfig,
        "ECTransferConfig": ECTransferConfig,
        "MultiModalConfig": MultiModalConfig,
        "LoRAConfig": LoRAConfig,
        "EngineArgs": EngineArgs,
        "AsyncEngineArgs": AsyncEngineArgs,
        "UsageContext": UsageContext,
        "SpeculativeConfig": SpeculativeConfig,
    }


def _answer(api: dict[str, Any], platform_name: str, req: Any) -> Any:
    if isinstance(req, list):
        return [_answer(api, platform_name, r) for r in req]
    if isinstance(req, dict) and req.get("ping"):
        return {"pong": platform_name}
    try:
        return program.execute(api, req)
    except Exception as e:
        return {"harness_error": program.err(e), "traceback": traceback.format_exc()}


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: oracle_server.py cpu|cuda")
    if os.environ.get("PYTHONHASHSEED") != "0":
        raise SystemExit("oracle_server.py must run with PYTHONHASHSEED=0 (compile_sizes go through a set)")
    out = _answers_stream()
    platform = _setup_platform(sys.argv[1])
    _kernel_free_fusion_table()
    api = _api()
    platform_name = type(platform).__name__
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            answer: Any = {"harness_error": program.err(e)}
        else:
            answer = _answer(api, platform_name, req)
        out.write(json.dumps(answer, sort_keys=True) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
