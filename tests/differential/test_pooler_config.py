"""``PoolerConfig``: defaults, keyword sets (listed and random, valid and invalid), the resolution of
``pooling_type`` and of the deprecated ``normalize``/``softmax``/``activation``, every attribute and method
the ``vllm`` hex package's generated module calls, and inside ``ModelConfig`` (which holds it and fills in
the pooling runner's defaults) and ``VllmConfig`` (whose cudagraph plan reads it)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from config_strategies import sampled
from diff_harness import FIELDS, HASH, REPR, build_new, call, get, new, op, tiny_model, tiny_moe_model
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

# What the generated module (Vllm.Config.PoolerConfig, vllm hex 0.3.0) reads with get_attr ...
ATTRS = GETTERS["PoolerConfig"]
# ... and calls with call_method (an unresolved type fails vLLM's assertion).
METHODS = [call("compute_hash"), call("get_seq_pooling_type"), call("get_tok_pooling_type")]
CLS = "PoolerConfig"


def request(*args: Any, **kwargs: Any) -> dict[str, Any]:
    ops = [HASH, REPR, op("deepcopy_eq"), op("eq", other=None), op("eq", other=new(CLS))]
    ops += [op("eq", other=new(CLS, *args, **kwargs)), *[get(a) for a in ATTRS], *METHODS, FIELDS]
    return {"build": build_new(CLS, *args, **kwargs), "ops": ops}


CASES: list[dict[str, Any]] = [
    {},
    *[{"pooling_type": v} for v in ("CLS", "LAST", "MEAN", "ALL", "STEP", "cls", "", "MAX", None, 1)],
    {"pooling_type": "MEAN", "seq_pooling_type": "CLS"},
    {"pooling_type": "ALL", "tok_pooling_type": "STEP"},
    {"pooling_type": "STEP", "seq_pooling_type": "LAST"},  # refused: either one set is refused
    {"seq_pooling_type": "MEAN", "tok_pooling_type": "STEP"},
    *[{"seq_pooling_type": v} for v in ("ALL", "last")],
    *[{"tok_pooling_type": v} for v in ("CLS", "STEP")],
    {"normalize": True},
    {"normalize": False, "softmax": 1.0, "activation": 0.0, "use_activation": True},  # normalize wins
    {"softmax": 0.0, "activation": 1.0},  # softmax wins
    {"activation": 2.5, "use_activation": False},
    {"use_activation": "yes"},
    *[{"dimensions": v} for v in (64, 0, -1, "32", 1.5)],
    {"enable_chunked_processing": True, "max_embed_len": 8192},
    {"logit_bias": -1.5, "step_tag_id": 12, "returned_token_ids": [648, 387]},
    *[{"returned_token_ids": v} for v in ([], (1, 2), ["3"], "1", [1.5])],
    {"softmax": "x"},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_pooler_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(**kwargs))


def test_positional(check: Any, platform: str) -> None:
    check(platform, request("MEAN", None, "STEP", True))


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "pooling_type": sampled(None, "CLS", "LAST", "MEAN", "ALL", "STEP", "x"),
    "seq_pooling_type": sampled(None, "CLS", "LAST", "MEAN", "ALL"),
    "tok_pooling_type": sampled(None, "ALL", "STEP", "MEAN"),
    "normalize": sampled(None, True, False, "n"),
    "dimensions": st.one_of(st.none(), st.integers(-2, 4096)),
    "enable_chunked_processing": sampled(None, True, False),
    "max_embed_len": st.one_of(st.none(), st.integers(-1, 10**6)),
    "softmax": st.one_of(st.none(), st.floats(-2, 2, allow_nan=False), sampled(True)),
    "activation": st.one_of(st.none(), st.floats(-2, 2, allow_nan=False)),
    "use_activation": sampled(None, True, False),
    "logit_bias": st.one_of(st.none(), st.floats(-5, 5, allow_nan=False), sampled("b")),
    "step_tag_id": st.one_of(st.none(), st.integers(-1, 50_000)),
    "returned_token_ids": sampled(None, [], [1, 2], ["x"]),
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


# --- inside ModelConfig and VllmConfig ----------------------------------------------------------------

POOLERS: list[Any] = [
    None,
    new(CLS),
    new(CLS, pooling_type="MEAN"),
    new(CLS, tok_pooling_type="STEP", normalize=False),
    {"pooling_type": "CLS", "dimensions": 16},  # a dict, validated into a PoolerConfig on both sides
    {"pooling_type": "bad"},
]
HELD = [
    op("fields", on="pooler_config"),
    op("hash", on="pooler_config"),
    call("get_seq_pooling_type", on="pooler_config"),
    call("get_tok_pooling_type", on="pooler_config"),
    get("runner_type", on=""),
]


@pytest.mark.parametrize("model", [tiny_model, tiny_moe_model], ids=["tiny-llama", "tiny-mixtral"])
@pytest.mark.parametrize("runner", ["pooling", "generate"])
@pytest.mark.parametrize("pooler", POOLERS, ids=repr)
def test_inside_model_config(check: Any, platform: str, pooler: Any, runner: str, model: Any) -> None:
    kwargs = {"runner": runner} if pooler is None else {"runner": runner, "pooler_config": pooler}
    check(platform, {"build": build_new("ModelConfig", **model(**kwargs)), "ops": HELD, "final": False})


@pytest.mark.parametrize("pooler", POOLERS[:4], ids=repr)
@pytest.mark.parametrize("cudagraph_mode", [None, "FULL_AND_PIECEWISE", "FULL"])
def test_inside_vllm_config(check: Any, platform: str, pooler: Any, cudagraph_mode: str | None) -> None:
    """A pooling model: VllmConfig's cudagraph plan turns full cudagraphs into piecewise ones."""
    kwargs = {"runner": "pooling"} if pooler is None else {"runner": "pooling", "pooler_config": pooler}
    cc = {} if cudagraph_mode is None else {"cudagraph_mode": cudagraph_mode}
    build = {
        "kind": "vllm",
        "model": tiny_model(**kwargs),
        "compilation_config": new("CompilationConfig", **cc),
    }
    ops = [op("fields", on="model_config.pooler_config"), get("cudagraph_mode"), op("hash")]
    check(platform, {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})
