"""``SpeechToTextConfig``: defaults, keyword sets (listed and random, valid and invalid, positional too),
every attribute the ``vllm`` hex package's generated module reads, equality and repr. vLLM's
``VllmConfig`` does not hold one (a speech model's own class does), so there is no engine case."""

from __future__ import annotations

import os
from typing import Any

import pytest
from config_strategies import sampled
from diff_harness import FIELDS, REPR, build_new, get, new, op
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

# What the generated module (Vllm.Config.SpeechToTextConfig, vllm hex 0.3.0) reads with get_attr; it
# calls no method besides the constructor.
ATTRS = GETTERS["SpeechToTextConfig"]


def request(*args: Any, **kwargs: Any) -> dict[str, Any]:
    ops = [REPR, op("deepcopy_eq"), op("eq", other=None), op("eq", other=new("SpeechToTextConfig"))]
    ops += [op("eq", other=new("SpeechToTextConfig", *args, **kwargs)), *[get(a) for a in ATTRS], FIELDS]
    ops.append(op("str"))
    return {"build": build_new("SpeechToTextConfig", *args, **kwargs), "ops": ops}


CASES: list[dict[str, Any]] = [
    {},
    *[{"sample_rate": v} for v in (8000, 44_100.0, "16000", 0, -1.5, "x", None, True)],
    *[{"max_audio_clip_s": v} for v in (None, 0, 600, -1, "30", 2.0, 2.5)],
    *[{"overlap_chunk_second": v} for v in (0, 5, "2", None, 1.5)],
    *[{"min_energy_split_window_size": v} for v in (None, 0, 800, "1600", 3.5)],
    {"min_energy_split_window_size": None, "max_audio_clip_s": None},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_speech_to_text_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(**kwargs))


def test_positional(check: Any, platform: str) -> None:
    check(platform, request(22_050, 10, 2, None))
    check(platform, request(1, 2, 3, 4, 5))  # one argument too many


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "sample_rate": st.one_of(st.floats(-10, 96_000, allow_nan=False), st.integers(-1, 96_000), sampled("8k")),
    "max_audio_clip_s": st.one_of(st.none(), st.integers(-5, 3600), sampled("10", 1.5)),
    "overlap_chunk_second": st.one_of(st.integers(-2, 10), sampled(None, "1", 0.5)),
    "min_energy_split_window_size": st.one_of(st.none(), st.integers(-1, 4000), sampled("x", 2.0)),
}


@st.composite
def keyword_sets(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(sampled(*VALUES), unique=True, max_size=4))
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
