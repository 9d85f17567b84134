"""The environment variables vLLM 0.14.0 reads while building these configs, set for one request on both
sides: ``VLLM_COMPILE_CACHE_SAVE_FORMAT`` (a field default), ``VLLM_DEBUG_DUMP_PATH`` (overrides the
configured dump path in VllmConfig), ``VLLM_CPU_CI_ENV`` (CPU picks the eager backend), and the deprecated
``VLLM_ALL2ALL_BACKEND`` and offline ``VLLM_DP_*`` settings that reach ``set_splitting_ops_for_v1``."""

from __future__ import annotations

from typing import Any

import pytest
from diff_harness import FIELDS, HASH, REPR, cc_request, get, tiny_model, vllm_request


def with_env(req: dict[str, Any], **env: str | None) -> dict[str, Any]:
    return {**req, "env": env}


@pytest.mark.parametrize("value", ["unpacked", "binary", "bogus", "", None])
def test_compile_cache_save_format_default(check: Any, platform: str, value: str | None) -> None:
    for kwargs in ({}, {"compile_cache_save_format": "binary"}):
        check(platform, with_env(cc_request(kwargs, [HASH, REPR]), VLLM_COMPILE_CACHE_SAVE_FORMAT=value))


@pytest.mark.parametrize("configured", [None, "dump"])
@pytest.mark.parametrize("env_path", [None, "env-dump", "~/env-dump"])
def test_debug_dump_path(check: Any, platform: str, configured: str | None, env_path: str | None) -> None:
    kwargs = {} if configured is None else {"debug_dump_path": configured}
    check(platform, with_env(cc_request(kwargs, [FIELDS]), VLLM_DEBUG_DUMP_PATH=env_path))
    req = vllm_request(kwargs, ops=[FIELDS, HASH, REPR])
    check(platform, with_env(req, VLLM_DEBUG_DUMP_PATH=env_path))


@pytest.mark.parametrize("value", ["1", "0", None])
@pytest.mark.parametrize("mode", [None, 3, 2])
def test_cpu_ci_env(check: Any, platform: str, value: str | None, mode: int | None) -> None:
    kwargs = {} if mode is None else {"mode": mode}
    check(platform, with_env(vllm_request(kwargs, ops=[HASH, REPR]), VLLM_CPU_CI_ENV=value))


@pytest.mark.parametrize("backend", ["deepep_high_throughput", "allgather_reducescatter"])
@pytest.mark.parametrize("dp", [None, "2"])
def test_parallel_environment(check: Any, platform: str, backend: str, dp: str | None) -> None:
    req = vllm_request(
        {"mode": 3, "cudagraph_mode": "PIECEWISE"},
        parallel_config={},
        ops=[
            HASH,
            get("all2all_backend", on="parallel_config"),
            get("data_parallel_size", on="parallel_config"),
        ],
    )
    check(platform, with_env(req, VLLM_ALL2ALL_BACKEND=backend, VLLM_DP_SIZE=dp))
    req = vllm_request({"mode": 3}, model=tiny_model(), parallel_config={}, ops=[HASH])
    check(platform, with_env(req, VLLM_ALL2ALL_BACKEND=backend, VLLM_DP_SIZE=dp))
