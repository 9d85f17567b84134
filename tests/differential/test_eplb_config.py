"""``EPLBConfig``: defaults, keyword sets (listed and random, valid and invalid), its model validator
called again, every attribute and method the ``vllm`` hex package's generated module calls, and inside
``ParallelConfig`` and ``VllmConfig`` with the mixture-of-experts model (whose checks read it)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from config_strategies import sampled
from diff_harness import FIELDS, REPR, build_new, call, get, new, op, tiny_moe_model
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

# What the generated module (Vllm.Config.EPLBConfig, vllm hex 0.3.0) reads with get_attr ...
ATTRS = GETTERS["EPLBConfig"]
# ... and calls with call_method (besides the constructor).
METHODS = [call("_validate_eplb_config")]
CLS = "EPLBConfig"


def request(*args: Any, **kwargs: Any) -> dict[str, Any]:
    ops = [REPR, op("deepcopy_eq"), op("eq", other=None), op("eq", other=new(CLS))]
    ops += [op("eq", other=new(CLS, *args, **kwargs)), *[get(a) for a in ATTRS], *METHODS, FIELDS]
    return {"build": build_new(CLS, *args, **kwargs), "ops": ops}


CASES: list[dict[str, Any]] = [
    {},
    *[{"window_size": v} for v in (1, 0, -5, "100", 2.0, 2.5, None)],
    *[{"step_interval": v} for v in (10, 0, "x")],
    *[{"num_redundant_experts": v} for v in (0, 4, -1, "2", None)],
    *[{"log_balancedness": True, "log_balancedness_interval": v} for v in (1, 10, 0, -1)],
    {"log_balancedness": False, "log_balancedness_interval": 0},
    *[{"use_async": True, "policy": v} for v in ("default", "other")],
    *[{"policy": v} for v in ("default", "Default", "", None)],
    {"use_async": "yes"},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_eplb_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(**kwargs))


def test_positional(check: Any, platform: str) -> None:
    check(platform, request(500, 1000, 2, True, 0))  # the interval check runs after field validation


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "window_size": st.one_of(st.integers(-10, 5000), sampled("10", 1.5)),
    "step_interval": st.one_of(st.integers(-10, 10_000), sampled(None)),
    "num_redundant_experts": st.one_of(st.integers(-2, 64), sampled("3")),
    "log_balancedness": sampled(True, False, "on"),
    "log_balancedness_interval": st.integers(-3, 100),
    "use_async": sampled(True, False),
    "policy": sampled("default", "x"),
}


@st.composite
def keyword_sets(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(sampled(*VALUES), unique=True, max_size=5))
    kwargs = {name: draw(VALUES[name]) for name in names}
    if draw(st.integers(0, 19)) == 10:
        kwargs["not_a_field"] = 1
    return kwargs


def test_random_keyword_sets(check: Any, platform: str) -> None:
    @SETTINGS
    @given(keyword_sets())
    def run(kwargs: dict[str, Any]) -> None:
        check(platform, request(**kwargs))

    run()


PARALLEL_CASES: list[dict[str, Any]] = [
    {"eplb_config": new(CLS)},
    {"eplb_config": new(CLS, num_redundant_experts=2)},  # refused without EPLB
    {"eplb_config": {"num_redundant_experts": 2}, "enable_eplb": True},  # needs expert parallelism
    {"eplb_config": new(CLS, num_redundant_experts=2), "enable_eplb": True, "enable_expert_parallel": True},
    {
        "eplb_config": new(CLS, window_size=10),
        "enable_eplb": True,
        "enable_expert_parallel": True,
        "tensor_parallel_size": 2,
    },
    {"eplb_config": {"use_async": True, "policy": "x"}},
    {"eplb_config": new(CLS, step_interval=10, use_async=True, log_balancedness=True)},
    {
        "eplb_config": {"num_redundant_experts": 1, "log_balancedness": True},
        "enable_eplb": True,
        "enable_expert_parallel": True,
        "tensor_parallel_size": 4,
    },
]
HELD = [op("fields", on="eplb_config"), get("window_size", on="eplb_config"), op("hash")]


@pytest.mark.parametrize("parallel", PARALLEL_CASES, ids=repr)
def test_inside_parallel_config(check: Any, platform: str, parallel: dict[str, Any]) -> None:
    check(platform, {"build": build_new("ParallelConfig", **parallel), "ops": HELD})


@pytest.mark.parametrize("parallel", [PARALLEL_CASES[i] for i in (3, 4, 7)], ids=repr)
def test_inside_vllm_config_with_experts(check: Any, platform: str, parallel: dict[str, Any]) -> None:
    build = {"kind": "vllm", "model": tiny_moe_model(), "parallel_config": parallel}
    ops = [op("fields", on="parallel_config.eplb_config"), op("hash", on="parallel_config")]
    check(platform, {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})
