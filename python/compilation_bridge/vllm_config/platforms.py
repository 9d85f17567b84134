"""The platforms vLLM's config logic branches on: `cpu` (vLLM's CpuPlatform) and `cuda` (CudaPlatform).

`cuda` is planning, not running: it models one node of 8 GPUs of compute capability 9.0 with 80 GiB
each, so the whole CUDA side of `VllmConfig.__post_init__` runs on a machine without a GPU. The operator
picks the platform (`COMPILATION_BRIDGE_PLATFORM`, `--platform`); otherwise it is detected from the
installed torch build without importing torch.
"""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compilation_bridge.settings import PLATFORM_ENV, PLATFORMS, choose, get_settings
from compilation_bridge.vllm_config.logs import logger, warning_once

if TYPE_CHECKING:
    from compilation_bridge.vllm_config.vllm import VllmConfig


class Platform:
    name = "unspecified"
    device_type = "cpu"
    simple_compile_backend = "inductor"

    def is_cpu(self) -> bool:
        return False

    def is_cuda(self) -> bool:
        return False

    def is_cuda_alike(self) -> bool:
        return self.is_cuda()

    def get_compile_backend(self) -> str:
        return self.simple_compile_backend

    def support_static_graph_mode(self) -> bool:
        return False

    def support_hybrid_kv_cache(self) -> bool:
        return False

    def get_device_capability(self) -> tuple[int, int] | None:
        return None

    def is_device_capability_family(self, capability: int) -> bool:
        """vLLM's `Platform.is_device_capability_family`: whether the device is any <major>.x of
        `capability` (e.g. 100 for 10.x, Blackwell); no device (cpu) is no family."""
        current = self.get_device_capability()
        if current is None:
            return False
        major, minor = current
        return (major * 10 + minor) // 10 == capability // 10

    def device_count(self) -> int:
        return 0

    def default_block_size(self) -> int:
        return 16

    def device_total_memory(self) -> int:
        """Memory of one device, which picks the engine's default batch sizes (none known: 0)."""
        return 0

    def device_name(self) -> str:
        return ""

    def host_memory_bytes(self) -> int:
        """RAM of the planning host (vLLM reads the machine's): 2 TiB on both platforms, as a node of
        8 such GPUs has, so swap-space checks never depend on the machine that answers."""
        return 2 * 2**40

    def use_custom_allreduce(self) -> bool:
        return False

    def worker_cls(self) -> str:
        return "auto"

    def check_and_update_config(self, vllm_config: VllmConfig) -> None:
        """The compilation-relevant part of the platform's `check_and_update_config`."""
        if vllm_config.cache_config.block_size is None:
            vllm_config.cache_config.block_size = self.default_block_size()
        if vllm_config.parallel_config.worker_cls == "auto":
            vllm_config.parallel_config.worker_cls = self.worker_cls()

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class CpuPlatform(Platform):
    name = "cpu"
    device_type = "cpu"

    def is_cpu(self) -> bool:
        return True

    def support_hybrid_kv_cache(self) -> bool:
        return True

    def default_block_size(self) -> int:
        return 128

    def worker_cls(self) -> str:
        return "vllm.v1.worker.cpu_worker.CPUWorker"

    def kv_cache_space_bytes(self) -> int:
        """vLLM's `CpuPlatform.get_device_total_memory`: VLLM_CPU_KVCACHE_SPACE (GiB), else half the
        host's memory per NUMA node; the planning host (one NUMA node) stands in for this machine."""
        space = os.environ.get("VLLM_CPU_KVCACHE_SPACE")
        if space is None:
            kv_cache_space = int(self.host_memory_bytes() * 0.5)
            gib = f"{round(kv_cache_space / 2**30, 2)}"
            warning_once("VLLM_CPU_KVCACHE_SPACE not set. Using %s GiB for KV cache.", gib)
            return kv_cache_space
        return int(space) * 2**30

    def check_and_update_config(self, vllm_config: VllmConfig) -> None:
        from compilation_bridge.vllm_config.enums import CompilationMode

        super().check_and_update_config(vllm_config)
        if vllm_config.model_config is not None:
            vllm_config.model_config.disable_cascade_attn = True
        cache_config = vllm_config.cache_config
        if cache_config.block_size % 32 != 0:
            logger.warning(
                "CPU backend prefers block_size is multiples of 32, "
                "otherwise the performance is not optimized."
            )
        scheduler_config = vllm_config.scheduler_config
        scheduler_config.async_scheduling = False
        if (
            scheduler_config.enable_chunked_prefill or cache_config.enable_prefix_caching
        ) and cache_config.cache_dtype != "auto":
            raise RuntimeError(
                "Chunked-prefill and prefix-cache on the CPU backend is not compatible with FP8 KV cache."
            )
        if cache_config.cache_dtype != "auto":
            logger.warning("CPU backend doesn't support KV cache quantization fallback to auto.")
            cache_config.cache_dtype = "auto"
        cache_config.cpu_kvcache_space_bytes = self.kv_cache_space_bytes()
        parallel = vllm_config.parallel_config
        if parallel.world_size > 1 and parallel.distributed_executor_backend not in (None, "mp"):
            parallel.distributed_executor_backend = "mp"
        parallel.enable_dbo = False  # dual-batch overlap is not supported on CPU
        compilation_config = vllm_config.compilation_config
        compilation_config.cudagraph_capture_sizes = []
        if compilation_config.mode == CompilationMode.VLLM_COMPILE:
            # vLLM's CPU backend runs one Dynamo trace handed whole to Inductor.
            backend = "eager" if os.environ.get("VLLM_CPU_CI_ENV", "0") != "0" else "inductor"
            compilation_config.mode = CompilationMode.DYNAMO_TRACE_ONCE
            compilation_config.backend = backend
            compilation_config.inductor_compile_config.update(
                {"dce": True, "size_asserts": False, "nan_asserts": False, "epilogue_fusion": True}
            )
        if vllm_config.lora_config is not None:  # vLLM's CPU backend runs LoRA uncompiled
            compilation_config.mode = CompilationMode.NONE


class CudaPlatform(Platform):
    name = "cuda"
    device_type = "cuda"
    capability = (9, 0)
    gpus_per_node = 8
    memory_per_gpu = 80 * 2**30

    def is_cuda(self) -> bool:
        return True

    def support_static_graph_mode(self) -> bool:
        return True

    def support_hybrid_kv_cache(self) -> bool:
        return True

    def get_device_capability(self) -> tuple[int, int] | None:
        return self.capability

    def device_count(self) -> int:
        return self.gpus_per_node

    def device_total_memory(self) -> int:
        return self.memory_per_gpu

    def device_name(self) -> str:
        return "sm90"  # an H100-class GPU: not an A100, whose defaults vLLM keeps small

    def use_custom_allreduce(self) -> bool:
        return True

    def worker_cls(self) -> str:
        return "vllm.v1.worker.gpu_worker.Worker"


_PLATFORM_CLASSES: dict[str, type[Platform]] = {"cpu": CpuPlatform, "cuda": CudaPlatform}
_selected: Platform | None = None


def _detect() -> str:
    """CUDA when the installed torch is a CUDA build and an NVIDIA driver is present; CPU otherwise."""
    try:
        torch_build = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "cpu"
    if "+cpu" in torch_build or not Path("/proc/driver/nvidia/version").exists():
        return "cpu"
    return "cuda"


def set_platform(name: str) -> Platform:
    """Select the platform for this process (the operator's choice, or a test's)."""
    global _selected
    if name not in _PLATFORM_CLASSES:
        raise ValueError(f"platform must be one of {', '.join(PLATFORMS)}, got {name!r}")
    _selected = _PLATFORM_CLASSES[name]()
    return _selected


def use_platform(name: str) -> Platform:
    """`--platform`: the operator's choice for this process, through the settings (as if
    COMPILATION_BRIDGE_PLATFORM held it: the compile cache's key sees it too), never the environment."""
    platform = set_platform(name)
    choose(PLATFORM_ENV, name)
    return platform


def get_platform() -> Platform:
    if _selected is None:
        return set_platform(get_settings().platform or _detect())
    return _selected


class _CurrentPlatform:
    """`current_platform` as in vLLM: attribute access goes to the platform selected now."""

    def __getattr__(self, name: str) -> Any:
        return getattr(get_platform(), name)

    def __repr__(self) -> str:
        return repr(get_platform())


current_platform: Any = _CurrentPlatform()
