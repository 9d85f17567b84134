"""``LoRAConfig``: defaults, keyword sets (listed and random, valid and invalid), its validator (the CPU
adapter count defaults to, and may not undercut, the batch's), every function the ``vllm`` hex package's
generated module calls (``verify_with_model_config`` settling the adapters' dtype from a model's), and
inside ``VllmConfig``, which verifies it against the model, hashes it, and on the CPU platform compiles
nothing when it is set."""

from __future__ import annotations

import os
from typing import Any

import pytest
from config_strategies import sampled
from diff_harness import FIELDS, HASH, REPR, build_new, call, get, new, op, scheduler, tiny_model
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

ATTRS = GETTERS["LoRAConfig"]
CLS = "LoRAConfig"
RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def request(*args: Any, **kwargs: Any) -> dict[str, Any]:
    ops = [REPR, HASH, op("deepcopy_eq"), op("eq", other=None), op("eq", other=new(CLS))]
    ops += [op("eq", other=new(CLS, *args, **kwargs)), *[get(a) for a in ATTRS]]
    ops += [call("_validate_lora_config"), FIELDS]
    return {"build": build_new(CLS, *args, **kwargs), "ops": ops}


CASES: list[dict[str, Any]] = [
    {},
    *[{"max_lora_rank": v} for v in (*RANKS, 0, 15, 1024, "16", 16.0, True, None)],
    *[{"max_loras": v} for v in (1, 4, 0, -1, "2", 2.0, 2.5, None)],
    *[{"max_cpu_loras": v} for v in (1, 8, 0, None, "3", 1.5)],
    {"max_loras": 4, "max_cpu_loras": 4},
    {"max_loras": 4, "max_cpu_loras": 3},
    {"max_loras": 4, "max_cpu_loras": 16},
    *[{"fully_sharded_loras": v} for v in (True, False, 1, "yes", "x", None)],
    *[{"lora_dtype": v} for v in ("auto", "float16", "bfloat16", "float32", "half", "AUTO", None, 1)],
    *[{"default_mm_loras": v} for v in ({"image": "/adapters/a"}, {}, {"audio": 1}, {1: "a"}, None, [])],
    *[{"enable_tower_connector_lora": v} for v in (True, 0, "n")],
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_lora_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(**kwargs))


def test_positional(check: Any, platform: str) -> None:
    check(platform, request(64, 2, True, 8, "bfloat16", {"image": "a"}, True))


def test_validator_called_again(check: Any, platform: str) -> None:
    """The generated module calls the validator as a method: after a caller lowered the CPU count."""
    ops = [
        op("set", name="max_cpu_loras", value=1),
        call("_validate_lora_config"),
        call("_validate_lora_config"),
    ]
    check(platform, {"build": build_new(CLS, max_loras=2), "ops": ops})


MODEL_DTYPES = ("auto", "float16", "bfloat16", "float32")


@pytest.mark.parametrize("model_dtype", MODEL_DTYPES)
@pytest.mark.parametrize("lora_dtype", ["auto", "float16", "bfloat16"])
def test_verify_with_model_config(check: Any, platform: str, lora_dtype: str, model_dtype: str) -> None:
    """An automatic dtype becomes the model's (a torch dtype), a named one torch's dtype of that name;
    the hash then names the dtype as torch prints it."""
    model = new("ModelConfig", **tiny_model(dtype=model_dtype))
    ops = [call("verify_with_model_config", model), get("lora_dtype"), HASH, REPR]
    ops += [call("verify_with_model_config", model), get("lora_dtype")]
    check(platform, {"build": build_new(CLS, lora_dtype=lora_dtype), "ops": ops})


@pytest.mark.parametrize("lora_dtype", ["auto", "float16"])
def test_verify_without_a_model(check: Any, platform: str, lora_dtype: str) -> None:
    """vLLM reads `.dtype` of whatever it is given, only while the dtype is automatic."""
    ops = [call("verify_with_model_config", None), get("lora_dtype"), HASH]
    check(platform, {"build": build_new(CLS, lora_dtype=lora_dtype), "ops": ops})


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "max_lora_rank": st.one_of(sampled(*RANKS), st.integers(-1, 600), sampled("8", None)),
    "max_loras": st.one_of(st.integers(-1, 16), sampled("2", 1.0, None)),
    "max_cpu_loras": st.one_of(st.integers(-1, 32), sampled(None, "4")),
    "fully_sharded_loras": sampled(True, False, 1, "on", "x"),
    "lora_dtype": sampled("auto", "float16", "bfloat16", "float32", None, 2),
    "default_mm_loras": sampled(None, {}, {"image": "a", "audio": "b"}, {"video": 3}),
    "enable_tower_connector_lora": sampled(True, False, "false", 2),
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


LORAS = [
    None,
    {},
    {"lora_dtype": "float16", "max_lora_rank": 64, "max_loras": 2},
    {"lora_dtype": "bfloat16", "fully_sharded_loras": True, "max_cpu_loras": 4},
]


@pytest.mark.parametrize("model", [None, "auto", "float16"], ids=["no-model", "model-auto", "model-fp16"])
@pytest.mark.parametrize("lora", LORAS, ids=repr)
def test_inside_vllm_config(
    check: Any, platform: str, lora: dict[str, Any] | None, model: str | None
) -> None:
    """VllmConfig verifies the config against its model (without one, an automatic dtype fails as in
    vLLM), hashes it after the attention config's hash, and on the CPU platform turns compilation off; the
    compilation config is compared whole at the end."""
    build: dict[str, Any] = {"kind": "vllm", "scheduler_config": scheduler()}
    if lora is not None:
        build["lora_config"] = lora
    if model is not None:
        build["model"] = tiny_model(dtype=model)
    # With a model the engine hash folds in transformers' config (a listed departure): left out then.
    ops = ([] if model else [op("hash", on="")]) + [
        get("lora_config", on=""),
        op("repr", on="lora_config"),
        get("mode"),
        get("cudagraph_mode"),
    ]
    check(platform, {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})
