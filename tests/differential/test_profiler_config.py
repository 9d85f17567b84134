"""``ProfilerConfig``: defaults, keyword sets (listed and random, valid and invalid), the deprecated
``VLLM_*`` profiler variables its validator reads, every attribute and method the ``vllm`` hex package's
generated module calls, hashes, and inside ``VllmConfig`` (which hashes it into the engine hash).

Relative and ``~`` directories become absolute against the process's directory and home: both sides run
in the test's directory with the same environment, so they resolve alike."""

from __future__ import annotations

import os
from typing import Any

import pytest
from config_strategies import sampled
from diff_harness import FIELDS, HASH, REPR, build_new, call, get, new, op, tiny_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.generated_getters import GETTERS

EXAMPLES = int(os.environ.get("DIFFERENTIAL_EXAMPLES", "1000"))
SETTINGS = settings(
    max_examples=max(EXAMPLES // 4, 1),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# What the generated module (Vllm.Config.ProfilerConfig, vllm hex 0.3.0) reads with get_attr ...
ATTRS = GETTERS["ProfilerConfig"]
# ... and calls with call_method; the arguments are this test's (the variables are the profiler's own).
METHODS = [
    call("compute_hash"),
    call("_get_from_env_if_set", "profiler", "VLLM_TORCH_CUDA_PROFILE"),
    call("_get_from_env_if_set", "max_iterations", "VLLM_PROFILER_MAX_ITERS"),
    call("_set_from_env_if_set", "torch_profiler_with_flops", "VLLM_TORCH_PROFILER_WITH_FLOPS"),
    call("_set_from_env_if_set", "torch_profiler_dir", "VLLM_TORCH_PROFILER_DIR", False),
    call("_set_from_env_if_set", "max_iterations", "VLLM_PROFILER_MAX_ITERS", to_bool=False, to_int=True),
    call("_set_from_env_if_set", "delay_iterations", "VLLM_PROFILER_DELAY_ITERS", True, True),
    call("_validate_profiler_config"),
]
CLS = "ProfilerConfig"


def request(kwargs: dict[str, Any], env: dict[str, str | None] | None = None) -> dict[str, Any]:
    ops = [HASH, REPR, op("deepcopy_eq"), op("eq", other=None), op("eq", other=new(CLS))]
    ops += [op("eq", other=new(CLS, **kwargs)), *[get(a) for a in ATTRS], *METHODS, FIELDS]
    return {"build": build_new(CLS, **kwargs), "ops": ops, "env": env or {}}


CASES: list[dict[str, Any]] = [
    {},
    {"profiler": "torch", "torch_profiler_dir": "/traces"},
    {"profiler": "torch", "torch_profiler_dir": "traces/run1"},
    {"profiler": "torch", "torch_profiler_dir": "~/traces"},
    {"profiler": "torch", "torch_profiler_dir": "/a/../b/./c/"},
    *[{"profiler": "torch", "torch_profiler_dir": d} for d in ("gs://bucket/p", "gs://", "gs:///x", "gs:/x")],
    {"profiler": "torch"},  # needs a directory
    {"torch_profiler_dir": "/traces"},  # needs profiler="torch"
    {"profiler": "cuda", "torch_profiler_dir": "/traces"},
    *[{"profiler": v} for v in ("cuda", "CUDA", "nsys", "", None, 1)],
    *[{"delay_iterations": v} for v in (0, 5, -1, "3", 2.0, 2.5, None)],
    *[{"max_iterations": v} for v in (0, 100, -2, "x")],
    {"profiler": "torch", "torch_profiler_dir": "/t", "delay_iterations": 2},  # warned
    {"profiler": "torch", "torch_profiler_dir": "/t", "max_iterations": 9, "ignore_frontend": True},
    {"torch_profiler_with_stack": False, "torch_profiler_with_flops": "yes", "torch_profiler_use_gzip": 0},
    {"torch_profiler_dump_cuda_time_total": "off", "torch_profiler_record_shapes": True},
    {"torch_profiler_with_memory": 2},
    {"torch_profiler_dir": 5},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_profiler_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(kwargs))


ENV_CASES: list[dict[str, str | None]] = [
    {"VLLM_TORCH_CUDA_PROFILE": "1"},
    {"VLLM_TORCH_CUDA_PROFILE": "0"},
    {"VLLM_TORCH_CUDA_PROFILE": "1", "VLLM_TORCH_PROFILER_DIR": "/ignored"},  # the CUDA variable wins
    {"VLLM_TORCH_PROFILER_DIR": "/traces"},
    {"VLLM_TORCH_PROFILER_DIR": "rel/dir"},
    {"VLLM_TORCH_PROFILER_DIR": ""},
    {
        "VLLM_TORCH_PROFILER_DIR": "/traces",
        "VLLM_TORCH_PROFILER_RECORD_SHAPES": "1",
        "VLLM_TORCH_PROFILER_WITH_PROFILE_MEMORY": "1",
        "VLLM_TORCH_PROFILER_WITH_STACK": "0",
        "VLLM_TORCH_PROFILER_WITH_FLOPS": "true",  # only "1" is on
        "VLLM_TORCH_PROFILER_DISABLE_ASYNC_LLM": "1",
        "VLLM_TORCH_PROFILER_USE_GZIP": "0",
        "VLLM_TORCH_PROFILER_DUMP_CUDA_TIME_TOTAL": "",
    },
    {"VLLM_TORCH_PROFILER_RECORD_SHAPES": "1"},  # read only with a profiler directory
    {"VLLM_PROFILER_DELAY_ITERS": "3", "VLLM_PROFILER_MAX_ITERS": "10"},
    {"VLLM_PROFILER_DELAY_ITERS": "-1"},  # set after validation: kept as vLLM keeps it
    {"VLLM_PROFILER_MAX_ITERS": "x"},
    {"VLLM_TORCH_PROFILER_DIR": "/t", "VLLM_PROFILER_DELAY_ITERS": "2"},
]


@pytest.mark.parametrize("env", ENV_CASES, ids=repr)
def test_environment_overrides(check: Any, platform: str, env: dict[str, str | None]) -> None:
    """The validator reads the deprecated variables over the fields (after field validation)."""
    check(platform, request({}, env))
    check(platform, request({"profiler": "torch", "torch_profiler_dir": "/mine"}, env))
    check(platform, request({"profiler": "cuda", "max_iterations": 4}, env))


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "profiler": sampled(None, "torch", "cuda", "x"),
    "torch_profiler_dir": sampled("", "/p", "rel", "~/h", "gs://b/k", "gs://", 3),
    "torch_profiler_with_stack": sampled(True, False, "n"),
    "torch_profiler_with_flops": sampled(True, False),
    "torch_profiler_use_gzip": sampled(True, False, 1),
    "torch_profiler_dump_cuda_time_total": sampled(True, False),
    "torch_profiler_record_shapes": sampled(True, False, "t"),
    "torch_profiler_with_memory": sampled(True, False),
    "ignore_frontend": sampled(True, False, None),
    "delay_iterations": st.one_of(st.integers(-2, 50), sampled("4", 1.5)),
    "max_iterations": st.one_of(st.integers(-2, 50), sampled(None, 3.0)),
}
ENVS = sampled(
    {},
    {"VLLM_TORCH_CUDA_PROFILE": "1"},
    {"VLLM_TORCH_PROFILER_DIR": "/e", "VLLM_TORCH_PROFILER_WITH_STACK": "0"},
    {"VLLM_PROFILER_MAX_ITERS": "7"},
)


@st.composite
def random_requests(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(sampled(*VALUES), unique=True, max_size=5))
    kwargs = {name: draw(VALUES[name]) for name in names}
    if draw(st.integers(0, 19)) == 10:
        kwargs["not_a_field"] = 1
    return request(kwargs, draw(ENVS))


def test_random_keyword_sets(check: Any, platform: str) -> None:
    @SETTINGS
    @given(random_requests())
    def run(req: dict[str, Any]) -> None:
        check(platform, req)

    run()


@pytest.mark.parametrize("model", [False, True], ids=["no-model", "tiny-llama"])
@pytest.mark.parametrize(
    "profiler",
    [{}, {"profiler": "torch", "torch_profiler_dir": "/t"}, {"profiler": "cuda"}, {"profiler": "torch"}],
    ids=repr,
)
def test_inside_vllm_config(check: Any, platform: str, profiler: dict[str, Any], model: bool) -> None:
    build: dict[str, Any] = {"kind": "vllm", "profiler_config": profiler}
    if model:
        build["model"] = tiny_model()
    # With a model the engine hash folds in transformers' config (a listed departure): left out then.
    ops = ([] if model else [op("hash", on="")]) + [
        op("hash", on="profiler_config"),
        op("fields", on="profiler_config"),
    ]
    check(platform, {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})


def test_vllm_config_default_follows_the_environment(check: Any, platform: str) -> None:
    """VllmConfig's default ProfilerConfig reads the variables too."""
    for env in ({"VLLM_TORCH_CUDA_PROFILE": "1"}, {"VLLM_TORCH_PROFILER_DIR": "/env"}):
        ops = [op("hash", on=""), op("fields", on="profiler_config")]
        check(
            platform, {"build": {"kind": "vllm"}, "ops": ops, "env": {**env, "VLLM_CPU_KVCACHE_SPACE": "4"}}
        )
