"""``KVTransferConfig``: defaults, keyword sets (listed and random, valid and invalid), the engine id and
role checks of its ``__post_init__``, its role properties and methods (every function the ``vllm`` hex
package's generated module calls), and inside ``VllmConfig``: the engine hash, the hybrid KV cache manager
it turns off, and the offloading connector vLLM makes from ``CacheConfig.kv_offloading_size``.

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

ATTRS = GETTERS["KVTransferConfig"]
CLS = "KVTransferConfig"
KV_SPACE = {"VLLM_CPU_KVCACHE_SPACE": "4"}
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
    *[{"kv_role": v} for v in ("kv_producer", "kv_consumer", "kv_both", "KV_BOTH", "x", None, 1)],
    *[{"kv_connector": "NixlConnector", "kv_role": v} for v in ("kv_producer", "kv_consumer", "kv_both")],
    {"kv_connector": "NixlConnector"},
    {"kv_connector": "", "kv_role": "kv_both"},
    {"kv_connector": 3, "kv_role": "kv_both"},
    *[{"kv_buffer_size": v} for v in (5, 1.5, "2e9", -1, None, "x")],
    *[{"kv_buffer_device": v} for v in ("cpu", "xpu", None)],
    *[{"kv_rank": v} for v in (0, 1, "1", 1.0, 1.5, None)],
    {"kv_parallel_size": 2, "kv_ip": "10.0.0.1", "kv_port": 20001},
    {"kv_port": "x"},
    *[{"kv_connector_extra_config": v} for v in ({"a": 1, "b": [2]}, {}, {1: 2}, None, [("a", 1)])],
    {"kv_connector_module_path": "my.connectors", "enable_permute_local_kv": True},
    {"enable_permute_local_kv": "yes"},
    *[{"kv_load_failure_policy": v} for v in ("recompute", "fail", "FAIL", None)],
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_kv_transfer_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(**kwargs))


def test_positional(check: Any, platform: str) -> None:
    check(platform, request("P2pNcclConnector", "e", "cpu", 2e8, "kv_producer", 0, 2))


def test_default_engine_id_is_a_fresh_uuid4(check: Any, platform: str) -> None:
    """Without the fixed sequence: a real uuid4 each time (the ids themselves differ by design)."""
    ops = [op("is_uuid4", name="engine_id"), op("eq", other=new(CLS)), op("deepcopy_eq")]
    check(platform, {"build": build_new(CLS), "ops": ops, "final": False})


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "kv_connector": sampled(None, "NixlConnector", "LMCacheConnectorV1", 1),
    "engine_id": sampled(None, "e", 2),
    "kv_buffer_device": sampled("cuda", "cpu", None),
    "kv_buffer_size": st.one_of(st.floats(-1, 1e12, allow_nan=False), st.integers(-5, 10**9), sampled("1")),
    "kv_role": sampled(None, "kv_producer", "kv_consumer", "kv_both", "other"),
    "kv_rank": sampled(None, 0, 1, "2", 0.5),
    "kv_parallel_size": st.integers(-1, 8),
    "kv_ip": sampled("127.0.0.1", "", None),
    "kv_port": st.one_of(st.integers(-1, 70_000), sampled("p")),
    "kv_connector_extra_config": sampled({}, {"a": 1}, {"a": None, "b": "x"}, None, 1),
    "kv_connector_module_path": sampled(None, "m.n", 1),
    "enable_permute_local_kv": sampled(True, False, 0, "no", None),
    "kv_load_failure_policy": sampled("recompute", "fail", "x"),
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
    {},
    {"kv_connector": "NixlConnector", "kv_role": "kv_both", "engine_id": "e"},
    {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_consumer", "kv_connector_extra_config": {"x": 1}},
]
ENGINE_OPS = [
    op("fields", on="kv_transfer_config"),
    op("hash", on="kv_transfer_config"),
    get("disable_hybrid_kv_cache_manager", on="scheduler_config"),
]


def vllm_request(build: dict[str, Any], model: bool) -> dict[str, Any]:
    if model:
        build["model"] = tiny_model()
    # With a model the engine hash folds in transformers' config (a listed departure): left out then.
    ops = ([] if model else [op("hash", on="")]) + ENGINE_OPS
    return {"build": build, "ops": ops, "env": KV_SPACE, "sequential_uuid4": True}


@pytest.mark.parametrize("model", [False, True], ids=["no-model", "tiny-llama"])
@pytest.mark.parametrize("hybrid", [None, False, True], ids=lambda h: f"disable_hybrid={h}")
@pytest.mark.parametrize("transfer", [None, *TRANSFERS], ids=repr)
def test_inside_vllm_config(
    check: Any, platform: str, transfer: dict[str, Any] | None, hybrid: bool | None, model: bool
) -> None:
    """VllmConfig keeps the config and hashes it; with one and no preference the hybrid KV cache manager
    is off (an explicit choice stands, unlike with KV events)."""
    build: dict[str, Any] = {
        "kind": "vllm",
        "scheduler_config": scheduler(disable_hybrid_kv_cache_manager=hybrid),
    }
    if transfer is not None:
        build["kv_transfer_config"] = transfer
    check(platform, vllm_request(build, model))


OFFLOADING = [
    ({"kv_offloading_size": 4.0}, {}),
    ({"kv_offloading_size": 2, "kv_offloading_backend": "native"}, {"tensor_parallel_size": 2}),
    ({"kv_offloading_size": 3.0, "kv_offloading_backend": "lmcache"}, {}),
    ({"kv_offloading_size": 3.0, "kv_offloading_backend": "lmcache"}, {"tensor_parallel_size": 4}),
    ({"kv_offloading_size": 0.0, "kv_offloading_backend": "lmcache"}, {"tensor_parallel_size": 2}),
    ({"kv_offloading_backend": "lmcache"}, {}),
]


@pytest.mark.parametrize("model", [False, True], ids=["no-model", "tiny-llama"])
@pytest.mark.parametrize("transfer", [None, TRANSFERS[1], TRANSFERS[2]], ids=repr)
@pytest.mark.parametrize(("cache", "parallel"), OFFLOADING, ids=repr)
def test_kv_offloading_makes_a_connector(
    check: Any,
    platform: str,
    cache: dict[str, Any],
    parallel: dict[str, Any],
    transfer: dict[str, Any] | None,
    model: bool,
) -> None:
    """vLLM's last post-init step: an offloading size makes (or rewrites) the KV transfer config."""
    build: dict[str, Any] = {"kind": "vllm", "cache_config": cache, "parallel_config": parallel}
    if transfer is not None:
        build["kv_transfer_config"] = transfer
    check(platform, vllm_request(build, model))


def test_post_init_kv_transfer_config_again(check: Any, platform: str) -> None:
    """The generated VllmConfig module can call the step again: native offloading adds the same bytes."""
    for backend in ("native", "lmcache"):
        build = {
            "kind": "vllm",
            "cache_config": {"kv_offloading_size": 1.5, "kv_offloading_backend": backend},
        }
        ops = [call("_post_init_kv_transfer_config", on=""), op("fields", on="kv_transfer_config")]
        check(platform, {"build": build, "ops": ops, "env": KV_SPACE, "sequential_uuid4": True})
