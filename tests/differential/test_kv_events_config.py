"""``KVEventsConfig``: defaults, keyword sets (listed and random, valid and invalid), the publisher its
``__post_init__`` chooses, every attribute the ``vllm`` hex package's generated module reads, and inside
``VllmConfig`` (which warns about it and turns the hybrid KV cache manager off for it)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from config_strategies import sampled
from diff_harness import FIELDS, REPR, build_new, get, new, op, scheduler, tiny_model
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

# What the generated module (Vllm.Config.KVEventsConfig, vllm hex 0.3.0) reads with get_attr; it calls no
# method besides the constructor.
ATTRS = GETTERS["KVEventsConfig"]
CLS = "KVEventsConfig"


def request(*args: Any, **kwargs: Any) -> dict[str, Any]:
    ops = [REPR, op("deepcopy_eq"), op("eq", other=None), op("eq", other=new(CLS))]
    ops += [op("eq", other=new(CLS, *args, **kwargs)), *[get(a) for a in ATTRS], FIELDS]
    return {"build": build_new(CLS, *args, **kwargs), "ops": ops}


CASES: list[dict[str, Any]] = [
    {},
    {"enable_kv_cache_events": True},
    *[{"publisher": v} for v in ("null", "zmq", "ZMQ", "kafka", "", None, 1)],
    {"enable_kv_cache_events": True, "publisher": "null"},
    {"enable_kv_cache_events": False, "publisher": "zmq"},
    {"enable_kv_cache_events": "yes"},
    *[{"endpoint": v} for v in ("tcp://127.0.0.1:6000", "", None, 5)],
    *[{"replay_endpoint": v} for v in ("tcp://*:5558", None, 3)],
    *[{"buffer_steps": v} for v in (0, -1, "10", 2.0, 2.5)],
    {"hwm": 1, "max_queue_size": 0, "topic": "kv"},
    {"hwm": "x"},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_kv_events_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(**kwargs))


def test_positional(check: Any, platform: str) -> None:
    check(platform, request(True, None, "tcp://*:7000", None, 5))


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "enable_kv_cache_events": sampled(True, False, 1, "off"),
    "publisher": sampled(None, "null", "zmq", "x"),
    "endpoint": sampled("tcp://*:5557", "", "ipc:///s", 1),
    "replay_endpoint": sampled(None, "tcp://*:1", 2),
    "buffer_steps": st.one_of(st.integers(-5, 100_000), sampled("7")),
    "hwm": st.integers(-5, 10**6),
    "max_queue_size": st.one_of(st.integers(-5, 10**6), sampled(1.5)),
    "topic": sampled("", "t", None),
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


EVENTS = [
    {},
    {"enable_kv_cache_events": True},
    {"enable_kv_cache_events": True, "publisher": "null"},
    {"publisher": "zmq"},
    {"publisher": "bad"},
]


@pytest.mark.parametrize("model", [False, True], ids=["no-model", "tiny-llama"])
@pytest.mark.parametrize("hybrid", [None, False, True], ids=lambda h: f"disable_hybrid={h}")
@pytest.mark.parametrize("events", EVENTS, ids=repr)
def test_inside_vllm_config(
    check: Any, platform: str, events: dict[str, Any], hybrid: bool | None, model: bool
) -> None:
    """VllmConfig keeps the config, and with one the hybrid KV cache manager is off (refused when the
    caller explicitly enabled it)."""
    build: dict[str, Any] = {
        "kind": "vllm",
        "kv_events_config": events,
        "scheduler_config": scheduler(disable_hybrid_kv_cache_manager=hybrid),
        "cache_config": {"enable_prefix_caching": model},  # the warning without prefix caching
    }
    if model:
        build["model"] = tiny_model()
    # With a model the engine hash folds in transformers' config (a listed departure): left out then.
    ops = ([] if model else [op("hash", on="")]) + [
        op("fields", on="kv_events_config"),
        get("disable_hybrid_kv_cache_manager", on="scheduler_config"),
    ]
    check(platform, {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})


@pytest.mark.parametrize("hybrid", [None, False], ids=lambda h: f"disable_hybrid={h}")
def test_vllm_config_without_kv_events(check: Any, platform: str, hybrid: bool | None) -> None:
    build = {"kind": "vllm", "scheduler_config": scheduler(disable_hybrid_kv_cache_manager=hybrid)}
    ops = [op("repr", on="kv_events_config"), get("disable_hybrid_kv_cache_manager", on="scheduler_config")]
    check(platform, {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})
