"""``StructuredOutputsConfig``: defaults, keyword sets (listed and random, valid and invalid), its model
validator called again, every attribute and method the ``vllm`` hex package's generated module calls,
hashes, and inside ``VllmConfig`` (which hashes it into the engine hash)."""

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

# What the generated module (Vllm.Config.StructuredOutputsConfig, vllm hex 0.3.0) reads with get_attr ...
ATTRS = GETTERS["StructuredOutputsConfig"]
# ... and calls with call_method (besides the constructor).
METHODS = [call("compute_hash"), call("_validate_structured_output_config")]
CLS = "StructuredOutputsConfig"


def request(*args: Any, **kwargs: Any) -> dict[str, Any]:
    ops = [HASH, REPR, op("deepcopy_eq"), op("eq", other=None), op("eq", other=new(CLS))]
    ops += [op("eq", other=new(CLS, *args, **kwargs)), *[get(a) for a in ATTRS], *METHODS, FIELDS]
    return {"build": build_new(CLS, *args, **kwargs), "ops": ops}


BACKENDS = ("auto", "xgrammar", "guidance", "outlines", "lm-format-enforcer")
CASES: list[dict[str, Any]] = [
    {},
    *[{"backend": v} for v in (*BACKENDS, "XGrammar", "", None, 1)],
    *[{"backend": b, "disable_any_whitespace": True} for b in BACKENDS],
    *[{"backend": b, "disable_additional_properties": True} for b in BACKENDS],
    {"backend": "guidance", "disable_any_whitespace": True, "disable_additional_properties": True},
    {"disable_any_whitespace": True, "disable_additional_properties": True},  # the first check wins
    *[{"disable_fallback": v} for v in (True, "yes", 0, 2, None)],
    *[{"reasoning_parser": v} for v in ("deepseek_r1", "", 3, None)],
    {"reasoning_parser_plugin": "/plugins/parser.py", "enable_in_reasoning": True},
    {"enable_in_reasoning": "off"},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_structured_outputs_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(**kwargs))


def test_positional(check: Any, platform: str) -> None:
    check(platform, request("guidance", True, True, True))
    check(platform, request("xgrammar", False, False, True))  # additional properties need guidance


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "backend": sampled(*BACKENDS, "Guidance", "x", None),
    "disable_fallback": sampled(True, False, "true", 3),
    "disable_any_whitespace": sampled(True, False, 1, "no"),
    "disable_additional_properties": sampled(True, False, "y"),
    "reasoning_parser": sampled("", "qwen3", None, 1),
    "reasoning_parser_plugin": sampled("", "p.py", 2.5),
    "enable_in_reasoning": sampled(True, False, "on"),
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


@pytest.mark.parametrize("model", [False, True], ids=["no-model", "tiny-llama"])
@pytest.mark.parametrize(
    "structured",
    [{}, {"backend": "guidance", "disable_additional_properties": True}, {"backend": "nope"}],
    ids=repr,
)
def test_inside_vllm_config(check: Any, platform: str, structured: dict[str, Any], model: bool) -> None:
    build: dict[str, Any] = {"kind": "vllm", "structured_outputs_config": structured}
    if model:
        build["model"] = tiny_model()
    # With a model the engine hash folds in transformers' config (a listed departure): left out then.
    ops = ([] if model else [op("hash", on="")]) + [
        op("hash", on="structured_outputs_config"),
        op("fields", on="structured_outputs_config"),
        op("repr", on="structured_outputs_config"),
    ]
    check(platform, {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})
