"""``SchedulerConfig``: defaults, keyword sets (listed and random, valid and invalid, error for error), and
every function the ``vllm`` hex package's generated module calls (``default_factory``,
``verify_max_model_len``, ``_skip_none_validation``, ``get_scheduler_cls``).

``get_scheduler_cls`` answers vLLM's class by its qualified name (vllm_config/scheduler.py says why); the
``call_qualname`` op reads vLLM's class the same way. vLLM's own two schedulers cannot be imported in the
oracle environment (their modules import vLLM's server, whose packages the CPU oracle does not install), so
the names answered for them are checked against vLLM's source instead."""

from __future__ import annotations

import ast
import os
from typing import Any

import pytest
from config_strategies import sampled
from diff_harness import FIELDS, HASH, REPR, build_new, call, get, new, op, oracle_venv, scheduler
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.generated_getters import GETTERS

from compilation_bridge.vllm_config import SchedulerConfig

EXAMPLES = int(os.environ.get("DIFFERENTIAL_EXAMPLES", "1000"))
SETTINGS = settings(
    max_examples=max(EXAMPLES // 4, 1),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CLS = "SchedulerConfig"
ATTRS = GETTERS[CLS]
# Names the oracle can import (a class of the standard library stands for a custom scheduler), and
# malformed ones that vLLM refuses before importing anything.
CUSTOM = ("collections.OrderedDict", "json.decoder.JSONDecoder", "nodot", "", ".rel", "..rel", ".")


def request(**kwargs: Any) -> dict[str, Any]:
    kwargs = scheduler(**kwargs) if "max_model_len" not in kwargs else kwargs
    ops = [REPR, HASH, op("deepcopy_eq"), op("eq", other=None), op("eq", other=new(CLS, **kwargs))]
    ops += [*[get(a) for a in ATTRS], call("_skip_none_validation", None, None)]
    ops += [call("_skip_none_validation", 1, None), call("default_factory")]
    ops += [call("verify_max_model_len", n) for n in (1, 512, 4096, 10**6)]
    if isinstance(kwargs.get("scheduler_cls"), str):  # else vLLM imports its engine's scheduler: see below
        ops.append(op("call_qualname", name="get_scheduler_cls"))
    return {"build": build_new(CLS, **kwargs), "ops": [*ops, FIELDS]}


CASES: list[dict[str, Any]] = [
    {},
    {"max_model_len": 8192, "is_encoder_decoder": False},
    {"max_model_len": 8192, "is_encoder_decoder": True, "enable_chunked_prefill": False},
    {"max_model_len": 100, "is_encoder_decoder": True, "max_num_batched_tokens": 100},
    {"max_model_len": 2048},  # is_encoder_decoder missing: a TypeError
    *[{"scheduler_cls": v} for v in (*CUSTOM, None, 1, ["a.B"])],
    *[{"async_scheduling": v} for v in (None, True, False, "yes", 2)],
    *[{"runner_type": v} for v in ("generate", "pooling", "draft", "x")],
    *[{"policy": v} for v in ("fcfs", "priority", "lifo")],
    *[{"max_num_partial_prefills": v} for v in (1, 2, 0)],
    {"max_num_partial_prefills": 4, "max_long_partial_prefills": 2, "long_prefill_token_threshold": 100},
    {"max_num_partial_prefills": 2, "max_long_partial_prefills": 3},
    {"max_num_partial_prefills": 2, "enable_chunked_prefill": False},
    {"max_num_partial_prefills": 2, "long_prefill_token_threshold": 10**6},
    {"max_num_batched_tokens": 16, "max_num_seqs": 32},
    {"max_num_batched_tokens": 100, "enable_chunked_prefill": False, "max_model_len": 200},
    {"max_num_batched_tokens": 0},
    {"max_num_seqs": "64"},
    {"stream_interval": 0},
    {"stream_interval": 10},
    {"is_multimodal_model": True, "disable_chunked_mm_input": True},
    {"disable_hybrid_kv_cache_manager": True},
    {"max_num_encoder_input_tokens": 5},  # not an init field
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_scheduler_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(**kwargs))


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "max_model_len": st.one_of(st.integers(1, 10_000), sampled("512")),
    "is_encoder_decoder": sampled(True, False),
    "runner_type": sampled("generate", "pooling", "draft", "x"),
    "max_num_batched_tokens": st.one_of(st.integers(0, 10_000), sampled("64", 1.5)),
    "max_num_seqs": st.integers(0, 512),
    "max_num_partial_prefills": st.integers(0, 4),
    "max_long_partial_prefills": st.integers(0, 4),
    "long_prefill_token_threshold": st.integers(-1, 10_000),
    "enable_chunked_prefill": sampled(True, False),
    "policy": sampled("fcfs", "priority", "x"),
    "scheduler_cls": sampled(*CUSTOM, 2),
    "async_scheduling": sampled(None, True, False),
    "stream_interval": st.integers(0, 20),
}


@st.composite
def keyword_sets(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(sampled(*VALUES), unique=True, max_size=6))
    kwargs = {name: draw(VALUES[name]) for name in names}
    if draw(st.integers(0, 19)) == 10:
        kwargs["not_a_field"] = 1
    kwargs.setdefault("max_model_len", 512)  # the InitVars vLLM requires
    kwargs.setdefault("is_encoder_decoder", False)
    return kwargs


def test_random_keyword_sets(check: Any, platform: str) -> None:
    @SETTINGS
    @given(keyword_sets())
    def run(kwargs: dict[str, Any]) -> None:
        check(platform, request(**kwargs))

    run()


def _vllm_source(module: str) -> ast.Module:
    roots = sorted(oracle_venv().glob("lib/python*/site-packages"))
    path = roots[0].joinpath(*module.split(".")).with_suffix(".py")
    return ast.parse(path.read_text(encoding="utf-8"))


def _imports_in(function: ast.FunctionDef) -> dict[str, str]:
    """name -> qualified name, for the `from module import name` lines inside `function`."""
    return {
        alias.name: f"{node.module}.{alias.name}"
        for node in ast.walk(function)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def test_default_schedulers_are_vllms() -> None:
    """Without scheduler_cls, vLLM's get_scheduler_cls imports AsyncScheduler under async scheduling, else
    Scheduler: the names answered are those imports, and each names a class its module defines."""
    if not oracle_venv().exists():
        pytest.skip("the vLLM 0.14.0 oracle environment is not installed")
    config = _vllm_source("vllm.config.scheduler")
    method = next(
        node
        for node in ast.walk(config)
        if isinstance(node, ast.FunctionDef) and node.name == "get_scheduler_cls"
    )
    imported = _imports_in(method)
    answers = {
        async_scheduling: SchedulerConfig(
            max_model_len=512, is_encoder_decoder=False, async_scheduling=async_scheduling
        ).get_scheduler_cls()
        for async_scheduling in (None, False, True)
    }
    assert answers == {
        None: imported["Scheduler"],
        False: imported["Scheduler"],
        True: imported["AsyncScheduler"],
    }
    for qualname in set(answers.values()):
        module, name = qualname.rsplit(".", 1)
        defined = {node.name for node in _vllm_source(module).body if isinstance(node, ast.ClassDef)}
        assert name in defined, qualname


def test_a_class_is_answered_by_its_vllm_name() -> None:
    """vLLM accepts a class as scheduler_cls and answers it; over the wire only this worker's config classes
    can arrive, and the answer is vLLM's name for the class."""
    from compilation_bridge.vllm_config import CacheConfig

    config = SchedulerConfig(max_model_len=512, is_encoder_decoder=False, scheduler_cls=CacheConfig)
    assert config.get_scheduler_cls() == "vllm.config.cache.CacheConfig"


def test_a_custom_name_is_never_imported() -> None:
    """vLLM imports a custom name (and fails where it cannot); nothing is imported here, so a name of a
    module that does not exist is answered as given: vLLM's engine would fail on it when it starts."""
    config = SchedulerConfig(
        max_model_len=512, is_encoder_decoder=False, scheduler_cls="no_such_module.Sched"
    )
    assert config.get_scheduler_cls() == "no_such_module.Sched"
