"""``ECTransferConfig``: defaults, keyword sets (listed and random, valid and invalid), the engine id and
role checks of its ``__post_init__``, its role properties and methods (every function the ``vllm`` hex
package's generated module calls), and inside ``VllmConfig``, which holds and hashes it and does nothing
else with it.

The default ``engine_id`` is ``str(uuid.uuid4())``: the requests fix uuid4's sequence on both sides
(``sequential_uuid4``), and ``test_default_engine_id_is_a_fresh_uuid4`` checks the real draw."""

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

ATTRS = GETTERS["ECTransferConfig"]
CLS = "ECTransferConfig"
EXTRA = [call("get_from_extra_config", k, "dflt") for k in ("a", "missing")]


def request(*args: Any, **kwargs: Any) -> dict[str, Any]:
    ops = [REPR, HASH, op("deepcopy_eq"), op("eq", other=None), op("eq", other=new(CLS))]
    ops += [op("eq", other=new(CLS, *args, **kwargs)), *[get(a) for a in ATTRS], *EXTRA, FIELDS]
    return {"build": build_new(CLS, *args, **kwargs), "ops": ops, "sequential_uuid4": True}


CASES: list[dict[str, Any]] = [
    {},
    {"engine_id": "e1"},
    {"engine_id": None},
    {"engine_id": 5},
    *[{"ec_role": v} for v in ("ec_producer", "ec_consumer", "ec_both", "EC_PRODUCER", "kv_both", None, 1)],
    *[{"ec_connector": "ECExampleConnector", "ec_role": v} for v in ("ec_producer", "ec_consumer")],
    {"ec_connector": "ECExampleConnector"},
    {"ec_connector": "", "ec_role": "ec_consumer"},
    {"ec_connector": 3, "ec_role": "ec_producer"},
    *[{"ec_buffer_size": v} for v in (5, 1.5, "2e9", -1, None, "x")],
    *[{"ec_buffer_device": v} for v in ("cpu", None, 1)],
    *[{"ec_rank": v} for v in (0, 1, "1", 1.0, 1.5, None)],
    {"ec_parallel_size": 2, "ec_ip": "10.0.0.1", "ec_port": 20001},
    {"ec_port": "x"},
    *[{"ec_connector_extra_config": v} for v in ({"a": 1, "b": [2]}, {}, {1: 2}, None, [("a", 1)])],
    {"ec_connector_module_path": "my.connectors"},
    {"ec_connector_module_path": 7},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_ec_transfer_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(**kwargs))


def test_positional(check: Any, platform: str) -> None:
    check(platform, request("ECExampleConnector", "e", "cpu", 2e8, "ec_consumer", 1, 2))


def test_default_engine_id_is_a_fresh_uuid4(check: Any, platform: str) -> None:
    """Without the fixed sequence: a real uuid4 each time (the ids themselves differ by design)."""
    ops = [op("is_uuid4", name="engine_id"), op("eq", other=new(CLS)), op("deepcopy_eq")]
    check(platform, {"build": build_new(CLS), "ops": ops, "final": False})


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "ec_connector": sampled(None, "ECExampleConnector", "", 1),
    "engine_id": sampled(None, "e", 2),
    "ec_buffer_device": sampled("cuda", "cpu", None, 0),
    "ec_buffer_size": st.one_of(st.floats(-1, 1e12, allow_nan=False), st.integers(-5, 10**9), sampled("1")),
    "ec_role": sampled(None, "ec_producer", "ec_consumer", "kv_both", "other"),
    "ec_rank": sampled(None, 0, 1, "2", 0.5),
    "ec_parallel_size": st.integers(-1, 8),
    "ec_ip": sampled("127.0.0.1", "", None),
    "ec_port": st.one_of(st.integers(-1, 70_000), sampled("p")),
    "ec_connector_extra_config": sampled({}, {"a": 1}, {"a": None, "b": "x"}, None, 1),
    "ec_connector_module_path": sampled(None, "m.n", 1),
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
        check(platform, request(**kwargs))

    run()


TRANSFERS = [
    None,
    {},
    {"ec_connector": "ECExampleConnector", "ec_role": "ec_producer", "engine_id": "e"},
    {"ec_connector": "ECExampleConnector", "ec_role": "ec_consumer", "ec_connector_extra_config": {"x": 1}},
]


@pytest.mark.parametrize("model", [False, True], ids=["no-model", "tiny-llama"])
@pytest.mark.parametrize("kv", [False, True], ids=["no-kv-transfer", "kv-transfer"])
@pytest.mark.parametrize("transfer", TRANSFERS, ids=repr)
def test_inside_vllm_config(
    check: Any, platform: str, transfer: dict[str, Any] | None, kv: bool, model: bool
) -> None:
    """VllmConfig keeps the config and hashes it after the KV transfer config's hash; it does not touch
    the hybrid KV cache manager (only a KV connector does)."""
    build: dict[str, Any] = {"kind": "vllm", "scheduler_config": scheduler()}
    if transfer is not None:
        build["ec_transfer_config"] = transfer
    if kv:
        build["kv_transfer_config"] = {
            "kv_connector": "NixlConnector",
            "kv_role": "kv_both",
            "engine_id": "k",
        }
    if model:
        build["model"] = tiny_model()
    # With a model the engine hash folds in transformers' config (a listed departure): left out then.
    ops = ([] if model else [op("hash", on="")]) + [
        op("repr", on="ec_transfer_config"),
        get("disable_hybrid_kv_cache_manager", on="scheduler_config"),
    ]
    req = {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}, "sequential_uuid4": True}
    check(platform, req)
