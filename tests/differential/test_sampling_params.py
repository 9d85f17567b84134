"""``vllm.sampling_params``: ``SamplingParams``, ``BeamSearchParams``, ``StructuredOutputsParams`` and
the two enums, against vLLM 0.14.0: defaults, keyword and positional construction (msgspec's binding and
messages), the normalisation and validation of ``__post_init__`` (listed and random keyword sets, valid
and invalid), every attribute the ``vllm`` hex package's generated modules read, every method they call
that needs no tokenizer, equality, copies and ``repr``. The request parameters do not depend on the
platform; both are run all the same, as for every class."""

from __future__ import annotations

import os
from typing import Any

import pytest
from config_strategies import sampled
from diff_harness import FIELDS, REPR, STR, build_new, call, enum, get, new, op
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

SP = "SamplingParams"


def common_ops(cls: str, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return [
        REPR,
        STR,
        op("deepcopy_eq"),
        op("eq", other=None),
        op("eq", other=new(cls)) if cls != "BeamSearchParams" else op("eq", other=new(cls, 1, 1)),
        op("eq", other=new(cls, *args, **kwargs)),
        op("pyhash_eq", other=new(cls, *args, **kwargs)),
        *[get(a) for a in GETTERS[cls]],
        FIELDS,
    ]


def sampling(*args: Any, **kwargs: Any) -> dict[str, Any]:
    ops = common_ops(SP, *args, **kwargs)
    ops += [call("_verify_args"), call("_verify_greedy_sampling"), call("clone"), op("eq", on="", other=None)]
    ops += [call("_validate_msgspec", {"n": 2}), call("_validate_msgspec", kwargs)]
    return {"build": build_new(SP, *args, **kwargs), "ops": ops}


CASES: list[dict[str, Any]] = [
    {},
    *[{"n": v} for v in (2, 0, -1, "3", 1.0, True, None)],
    *[{"presence_penalty": v} for v in (2.0, -2.0, 2.5, "x", None)],
    *[{"frequency_penalty": v} for v in (-2, 3)],
    *[{"repetition_penalty": v} for v in (0.0, 0.5, 2, -1)],
    *[{"temperature": v} for v in (0, 0.0, 1e-6, 0.005, 0.01, 2.0, -0.1, "0.5", None)],
    {"temperature": 0.0, "n": 2},
    {"temperature": 0.0, "top_p": 0.5, "top_k": 5, "min_p": 0.2},
    *[{"top_p": v} for v in (0.0, 0.5, 1.0, 1.5, -1)],
    *[{"top_k": v} for v in (-1, -2, 0, 5, 1.5, "1", None)],
    *[{"min_p": v} for v in (0.0, 1.0, 1.5, -0.1)],
    *[{"seed": v} for v in (-1, 0, 42, "x")],
    {"seed": 42, "temperature": 0.5},
    *[{"stop": v} for v in ("ab", ["a", "bcd"], [""], [], None, ("a",), 5)],
    {"stop": ["abc"], "include_stop_str_in_output": True},
    {"stop": ["x"], "detokenize": False},
    *[{"stop_token_ids": v} for v in ([1, 2], [1, "a"], [], (1,), None)],
    {"ignore_eos": True},
    *[{"max_tokens": v} for v in (None, 1, 0, -5, 100)],
    *[{"min_tokens": v} for v in (0, 5, 20, -1)],
    {"max_tokens": None, "min_tokens": 50},
    *[{"logprobs": v} for v in (None, 0, 5, -1, -2, True, False)],
    *[{"prompt_logprobs": v} for v in (None, 0, 3, -1, -2, True)],
    {"flat_logprobs": True, "detokenize": False},
    {"skip_special_tokens": False, "spaces_between_special_tokens": False},
    {"logits_processors": [1, 2]},
    *[{"truncate_prompt_tokens": v} for v in (None, -1, 0, -2, 10)],
    {"output_kind": enum("RequestOutputKind", "DELTA")},
    {"output_kind": 2},
    {"skip_clone": True},
    {"structured_outputs": new("StructuredOutputsParams", regex="a+")},
    {"logit_bias": {"1": 0.5}},
    {"allowed_token_ids": [1, 2, 3]},
    {"extra_args": {"k": [1, {"x": None}]}},
    *[{"bad_words": v} for v in (["bad"], [], None)],
    *[{"skip_reading_prefix_cache": v} for v in (True, False, None)],
    {"prompt_logprobs": 2, "skip_reading_prefix_cache": None},
    {"output_text_buffer_length": 7},
    {"_all_stop_token_ids": [5]},
    {"_bad_words_token_ids": [[1, 2]]},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_sampling_params(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, sampling(**kwargs))


def test_positional(check: Any, platform: str) -> None:
    check(platform, sampling(2, 0.5, 0.1, 1.2, 0.7, 0.9, 10))
    check(platform, {"build": build_new(SP, *range(40)), "ops": [REPR]})  # more than its 34 fields
    check(platform, {"build": build_new(SP, 2, n=3), "ops": [REPR]})  # one argument twice


def test_setting_fields_then_reading(check: Any, platform: str) -> None:
    ops = [
        op("set", name="temperature", value=0.0),
        get("sampling_type"),  # computed now, then kept: a later change does not move it
        op("set", name="seed", value=3),
        op("set", name="temperature", value=0.8),
        get("sampling_type"),
        op("deepcopy_eq"),
        call("clone"),
        op("set", name="n", value="x"),  # msgspec checks no type on assignment either
        get("n"),
        call("_verify_args"),
        REPR,
    ]
    check(platform, {"build": build_new(SP), "ops": ops})


def test_update_from_generation_config(check: Any, platform: str) -> None:
    configs: list[tuple[dict[str, Any], int | None]] = [
        ({}, None),
        ({}, 2),
        ({"eos_token_id": 5}, None),
        ({"eos_token_id": [5, 6]}, 5),
        ({"eos_token_id": [7]}, 7),
        ({"eos_token_id": None}, 3),
    ]
    for ignore_eos in (False, True):
        for generation_config, eos in configs:
            ops = [
                call("update_from_generation_config", generation_config, eos),
                get("stop_token_ids"),
                get("all_stop_token_ids"),
                FIELDS,
            ]
            build = build_new(SP, stop_token_ids=[1], ignore_eos=ignore_eos)
            check(platform, {"build": build, "ops": ops})


FROM_OPTIONAL: list[dict[str, Any]] = [
    {},
    {"n": None, "presence_penalty": None, "frequency_penalty": None, "repetition_penalty": None},
    {"temperature": None, "top_p": None},
    {"logit_bias": {"3": 250, "4": -300.5, "5": 0.25}},
    {"logit_bias": {"x": 1}},
    {"top_k": -3},
    {"stop": "end", "bad_words": ["w"], "skip_clone": True},
]


@pytest.mark.parametrize("kwargs", FROM_OPTIONAL, ids=repr)
def test_from_optional(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, {"build": build_new(SP), "ops": [call("from_optional", **kwargs)]})


@pytest.mark.parametrize("value", [1, [1], "x", None, 1.5, True, {"bogus": 1}, {"n": 0}], ids=repr)
def test_validate_msgspec(check: Any, platform: str, value: Any) -> None:
    check(platform, {"build": build_new(SP), "ops": [call("_validate_msgspec", value)]})


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "n": st.one_of(st.integers(-1, 4), sampled("2", 1.0, None)),
    "presence_penalty": st.one_of(st.floats(-3, 3, allow_nan=False), sampled(1)),
    "frequency_penalty": st.floats(-3, 3, allow_nan=False),
    "repetition_penalty": st.floats(-1, 3, allow_nan=False),
    "temperature": st.one_of(st.floats(-0.5, 3, allow_nan=False), sampled(0, 0.0, 1e-3)),
    "top_p": st.floats(-0.5, 1.5, allow_nan=False),
    "top_k": st.one_of(st.integers(-3, 50), sampled(2.0)),
    "min_p": st.floats(-0.5, 1.5, allow_nan=False),
    "seed": st.one_of(st.none(), st.integers(-2, 2**31)),
    "stop": st.one_of(st.none(), st.text(max_size=4), st.lists(st.text(max_size=4), max_size=3)),
    "stop_token_ids": st.one_of(st.none(), st.lists(st.integers(0, 100), max_size=3)),
    "ignore_eos": st.booleans(),
    "max_tokens": st.one_of(st.none(), st.integers(-2, 64)),
    "min_tokens": st.integers(-2, 64),
    "logprobs": st.one_of(st.none(), st.integers(-3, 20)),
    "prompt_logprobs": st.one_of(st.none(), st.integers(-3, 20)),
    "detokenize": st.booleans(),
    "include_stop_str_in_output": st.booleans(),
    "truncate_prompt_tokens": st.one_of(st.none(), st.integers(-3, 10)),
    "skip_reading_prefix_cache": st.one_of(st.none(), st.booleans()),
    "bad_words": st.one_of(st.none(), st.lists(st.text(max_size=4), max_size=2)),
}


@st.composite
def keyword_sets(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(sampled(*VALUES), unique=True, max_size=6))
    kwargs = {name: draw(VALUES[name]) for name in names}
    if draw(st.integers(0, 19)) == 10:
        kwargs["not_a_field"] = 1
    return kwargs


def test_random_keyword_sets(check: Any, platform: str) -> None:
    @SETTINGS
    @given(keyword_sets())
    def run(kwargs: dict[str, Any]) -> None:
        check(platform, sampling(**kwargs))

    run()


BEAM: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    ((2,), {}),
    ((2, 16), {}),
    ((), {"beam_width": 4, "max_tokens": 8, "ignore_eos": True, "temperature": 0.5}),
    ((4, 8, False, 0.0, 1.2, True), {}),
    ((4, 8, False, 0.0, 1.2, True, 1), {}),
    ((2,), {"beam_width": 3, "max_tokens": 1}),
    (("x", None), {"length_penalty": "y"}),
    ((), {"max_tokens": 2}),
    ((1, 1), {"bogus": 1}),
]


@pytest.mark.parametrize(("args", "kwargs"), BEAM, ids=repr)
def test_beam_search_params(check: Any, platform: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    ops = common_ops("BeamSearchParams", *args, **kwargs)
    check(platform, {"build": build_new("BeamSearchParams", *args, **kwargs), "ops": ops})


STRUCTURED: list[dict[str, Any]] = [
    {},
    {"json": "{}"},
    {"json": {"type": "object"}},
    {"json": 1},
    {"regex": "a+", "disable_fallback": True},
    {"choice": ["a", "b"]},
    {"grammar": "root ::= x", "whitespace_pattern": " "},
    {"json_object": True},
    {"structural_tag": "tag"},
    {"json": "{}", "regex": "a"},
    {"choice": ["x"], "structural_tag": "t"},
    {"disable_any_whitespace": True, "disable_additional_properties": True},
    {"_backend": "xgrammar"},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", STRUCTURED, ids=repr)
def test_structured_outputs_params(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    cls = "StructuredOutputsParams"
    ops = common_ops(cls, **kwargs)
    ops += [call("all_constraints_none"), call("all_non_structural_tag_constraints_none")]
    check(platform, {"build": build_new(cls, **kwargs), "ops": ops})


@pytest.mark.parametrize("cls", ["SamplingType", "RequestOutputKind"])
def test_enums(check: Any, platform: str, cls: str) -> None:
    check(platform, {"build": {"kind": "class", "cls": cls}, "ops": [op("members")]})
    for value in (0, 1, 2, 3, "0"):
        check(platform, {"build": {"kind": "enum", "enum": cls, "value": value}, "ops": [REPR, STR]})
