"""``ParallelConfig``: defaults, keyword sets (listed and random, valid and invalid, error for error), its
validators called again, every attribute and method the ``vllm`` hex package's generated module calls
(the layout properties, ``use_ray``, the data-parallel master ports and ``get_next_dp_init_port``), the
offline data-parallel environment, and its layout read back from a ``VllmConfig``.

With data parallelism above 1, vLLM picks five free ports for its master unless
``_data_parallel_master_port_list`` is given: the listed cases give one (every value then compares), and
``test_free_ports_are_picked`` compares what does not depend on which ports were free."""

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

CLS = "ParallelConfig"
ATTRS = GETTERS[CLS]
# What the generated module (Vllm.Config.ParallelConfig) calls with call_method, besides compute_hash; the
# port is taken last, as it changes the config.
METHODS = [
    call("_validate_parallel_config"),
    call("_verify_args"),
    call("_skip_none_validation", None, None),
    call("_skip_none_validation", 3, None),
    call("get_next_dp_init_port"),
    call("get_next_dp_init_port"),
]
PORTS = [29700, 29701, 29702, 29703, 29704]


def with_ports(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keywords, with master ports given wherever vLLM would otherwise pick free ones."""
    dp, local = _size(kwargs.get("data_parallel_size", 1)), _size(kwargs.get("data_parallel_size_local", 1))
    picks = (dp is not None and dp > 1) or local == 0
    if picks and "_data_parallel_master_port_list" not in kwargs:
        return {**kwargs, "_data_parallel_master_port_list": list(PORTS)}
    return kwargs


def _size(value: Any) -> int | None:
    """A size as pydantic's lax int validation reads it (`"2"` is 2), None when it is refused."""
    try:
        return int(value) if int(value) == value or isinstance(value, str) else None
    except (TypeError, ValueError):
        return None


def request(*args: Any, env: dict[str, str] | None = None, **kwargs: Any) -> dict[str, Any]:
    kwargs = with_ports(kwargs)
    ops = [REPR, HASH, op("deepcopy_eq"), op("eq", other=None), op("eq", other=new(CLS))]
    ops += [*[get(a) for a in ATTRS], *METHODS, HASH, FIELDS]
    return {"build": build_new(CLS, *args, **kwargs), "ops": ops, "env": env or {}}


CASES: list[dict[str, Any]] = [
    {},
    *[{"tensor_parallel_size": v} for v in (2, 8, 16, 0, -1, "2", 2.0, 2.5, None)],
    {"pipeline_parallel_size": 2, "tensor_parallel_size": 2},
    {"prefill_context_parallel_size": 2},
    {"decode_context_parallel_size": 2, "tensor_parallel_size": 2},
    *[{"data_parallel_size": 2, "data_parallel_size_local": v} for v in (1, 2, 3, 0)],
    *[{"data_parallel_size": 4, "data_parallel_rank": v} for v in (0, 3, 4, -1)],
    {"data_parallel_size": 2, "_data_parallel_master_port_list": [40000]},
    {"data_parallel_size": 2, "data_parallel_master_port": 1234, "_data_parallel_master_port_list": [7, 8]},
    {"data_parallel_size_local": 0, "data_parallel_size": 1},
    {"data_parallel_external_lb": True},
    {"data_parallel_external_lb": True, "data_parallel_size": 2},
    {"data_parallel_hybrid_lb": True, "data_parallel_size": 2, "data_parallel_size_local": 1},
    # Several nodes: the layout properties divide the world among them.
    {"nnodes": 2, "node_rank": 1, "tensor_parallel_size": 4},
    {
        "nnodes": 4,
        "node_rank": 3,
        "tensor_parallel_size": 8,
        "data_parallel_size": 4,
        "data_parallel_size_local": 2,
    },
    {"nnodes": 2, "node_rank": 5, "data_parallel_size": 2},
    {"nnodes": 3, "data_parallel_size": 2, "data_parallel_size_local": 2, "tensor_parallel_size": 2},
    {"nnodes": 2, "distributed_executor_backend": "uni"},
    {"nnodes": 2, "distributed_executor_backend": "x.CustomExecutor"},
    # Micro-batching: num_ubatches is 2 under dual batch overlap, else ubatch_size.
    *[{"enable_dbo": dbo, "ubatch_size": n} for dbo in (True, False) for n in (0, 1, 3)],
    # Sequence-parallel MoE: which all2all backends, with expert parallelism over TP and DP.
    *[
        {
            "all2all_backend": b,
            "enable_expert_parallel": True,
            "tensor_parallel_size": 2,
            "data_parallel_size": 2,
        }
        for b in ("naive", "pplx", "deepep_high_throughput", "deepep_low_latency", "flashinfer_all2allv")
    ],
    {"enable_expert_parallel": True, "tensor_parallel_size": 2},
    {"all2all_backend": "other"},
    # Executor backends: Ray is not installed (as on vLLM's side here), a class is refused.
    *[{"distributed_executor_backend": v} for v in ("mp", "uni", "ray", "my.Executor", "", 1, [], None)],
    {"data_parallel_backend": "ray"},
    {"data_parallel_backend": "ray", "tensor_parallel_size": 2},
    {"data_parallel_backend": "ray", "tensor_parallel_size": 2, "distributed_executor_backend": "mp"},
    {"data_parallel_backend": "x"},
    {"ray_workers_use_nsight": True},
    {"ray_workers_use_nsight": True, "distributed_executor_backend": "ray"},
    *[{"placement_group": v} for v in ({"bundles": 2}, "pg", 0)],
    *[{"ray_runtime_env": v} for v in ({"pip": ["x"]}, [], 1.5)],
    # The API server scale-out's private fields.
    *[{"_api_process_count": c, "_api_process_rank": r} for c, r in ((2, 1), (2, 2), (4, -1), (1, -2))],
    *[{"_api_process_count": v} for v in (0, "3", None)],
    *[{"_data_parallel_master_port_list": v} for v in ([1, 2], [], [1, "x"], None, "12", (3,))],
    *[{"disable_nccl_for_dp_synchronization": v} for v in (None, True, "x")],
    {"disable_custom_all_reduce": False, "nnodes": 2},
    {"max_parallel_loading_workers": 3},
    {"worker_cls": "my.Worker", "sd_worker_cls": "my.SdWorker", "worker_extension_cls": "my.Ext"},
    {"master_addr": "10.0.0.1", "master_port": 1, "rank": 3},
    {"bogus": 1},
]


@pytest.mark.parametrize("kwargs", CASES, ids=repr)
def test_parallel_config(check: Any, platform: str, kwargs: dict[str, Any]) -> None:
    check(platform, request(**kwargs))


def test_positional(check: Any, platform: str) -> None:
    check(platform, request(2, 2, 1, 1, 1))


@pytest.mark.parametrize(
    "env",
    [
        {"VLLM_DP_SIZE": "2", "VLLM_DP_RANK": "1", "VLLM_DP_MASTER_PORT": "40100"},
        {"VLLM_DP_SIZE": "2", "VLLM_DP_RANK_LOCAL": "0", "VLLM_DP_MASTER_IP": "10.1.1.1"},
        {"VLLM_DP_SIZE": "x"},
        {"VLLM_ALL2ALL_BACKEND": "naive"},
        {"VLLM_ALL2ALL_BACKEND": "bad"},
    ],
    ids=repr,
)
@pytest.mark.parametrize("moe", [None, True, False])
def test_offline_data_parallel_environment(
    check: Any, platform: str, env: dict[str, str], moe: bool | None
) -> None:
    """Without data parallelism in the arguments, vLLM takes it from VLLM_DP_* (refused for dense models)."""
    check(platform, request(env=env, is_moe_model=moe, enable_expert_parallel=True, tensor_parallel_size=2))


def test_external_launcher(check: Any, platform: str) -> None:
    """The launcher's RANK sets the data-parallel rank; the master ports are the given ones."""
    check(
        platform,
        request(env={"RANK": "3"}, distributed_executor_backend="external_launcher", data_parallel_size=2),
    )


def test_validators_called_again(check: Any, platform: str) -> None:
    """The generated module calls the model validators as methods: after a caller changed fields."""
    ops = [
        op("set", name="data_parallel_external_lb", value=True),
        call("_validate_parallel_config"),
        op("set", name="data_parallel_external_lb", value=False),
        op("set", name="distributed_executor_backend", value="ray"),
        get("use_ray"),
        call("_verify_args"),
        op("set", name="distributed_executor_backend", value="mp"),
        op("set", name="nnodes", value=2),
        call("_verify_args"),
        get("disable_custom_all_reduce"),
        get("local_world_size"),
    ]
    check(platform, {"build": build_new(CLS, tensor_parallel_size=4), "ops": ops})


def test_ports_are_handed_out_in_turn(check: Any, platform: str) -> None:
    """get_next_dp_init_port pops the prepared ports, then counts up from the master port."""
    ops = [call("get_next_dp_init_port") for _ in range(5)] + [get("data_parallel_master_port"), FIELDS]
    check(
        platform,
        {
            "build": build_new(CLS, data_parallel_size=2, _data_parallel_master_port_list=[5, 6, 7]),
            "ops": ops,
        },
    )


def test_free_ports_are_picked(check: Any, platform: str) -> None:
    """Without a port list, five free ports are picked: one for the master, four kept; which ones differs
    from run to run (and side to side), so the hash (which ignores them) and the count are compared."""
    ops = [op("len", on="_data_parallel_master_port_list"), HASH, get("world_size_across_dp")]
    build = build_new(CLS, data_parallel_size=2, tensor_parallel_size=2)
    answer = check(platform, {"build": build, "ops": ops, "final": False})
    assert answer["ops"][0] == {"ok": 4}


def test_bad_master_port_variable(check: Any, platform: str) -> None:
    """VLLM_DP_MASTER_PORT is read (and must be an integer) while free ports are picked."""
    build = build_new(CLS, data_parallel_size=2)
    check(platform, {"build": build, "ops": [], "final": False, "env": {"VLLM_DP_MASTER_PORT": "x"}})


LAYOUTS = [
    {"tensor_parallel_size": 2, "pipeline_parallel_size": 2, "nnodes": 2, "node_rank": 1},
    # Dual batch overlap needs a DeepEP backend on CUDA (VllmConfig's check).
    {"tensor_parallel_size": 2, "enable_dbo": True, "all2all_backend": "deepep_low_latency"},
]


@pytest.mark.parametrize("parallel", LAYOUTS, ids=repr)
def test_inside_vllm_config(check: Any, platform: str, parallel: dict[str, Any]) -> None:
    """The layout the VllmConfig holds answers the generated getters as vLLM's does."""
    ops = [get(a, on="parallel_config") for a in ATTRS] + [op("hash", on="parallel_config")]
    build = {"kind": "vllm", "parallel_config": parallel, "model": tiny_model()}  # DBO reads the model
    check(platform, {"build": build, "ops": ops, "env": {"VLLM_CPU_KVCACHE_SPACE": "4"}})


VALUES: dict[str, st.SearchStrategy[Any]] = {
    "pipeline_parallel_size": st.one_of(st.integers(0, 4), sampled("2", None)),
    "tensor_parallel_size": st.one_of(st.integers(-1, 16), sampled("4", 2.5)),
    "prefill_context_parallel_size": st.integers(0, 2),
    "data_parallel_size": st.one_of(st.integers(0, 4), sampled("2")),
    "data_parallel_size_local": st.integers(0, 4),
    "data_parallel_rank": st.integers(-1, 4),
    "data_parallel_external_lb": sampled(True, False),
    "is_moe_model": sampled(None, True, False),
    "enable_expert_parallel": sampled(True, False),
    "enable_eplb": sampled(True, False),
    "all2all_backend": sampled("naive", "pplx", "deepep_low_latency", "allgather_reducescatter", "x"),
    "enable_dbo": sampled(True, False),
    "ubatch_size": st.integers(-1, 4),
    "distributed_executor_backend": sampled(None, "mp", "uni", "ray", "external_launcher", "a.B", 3),
    "data_parallel_backend": sampled("mp", "ray"),
    "ray_workers_use_nsight": sampled(True, False),
    "nnodes": st.integers(0, 4),
    "node_rank": st.integers(0, 5),
    "_api_process_count": st.integers(-1, 3),
    "_api_process_rank": st.integers(-2, 3),
    "_data_parallel_master_port_list": sampled([], [9, 8, 7], [1, "x"]),
    "disable_nccl_for_dp_synchronization": sampled(None, True, False),
    "max_parallel_loading_workers": sampled(None, 2),
}


@st.composite
def keyword_sets(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(sampled(*VALUES), unique=True, max_size=6))
    kwargs = {name: draw(VALUES[name]) for name in names}
    if kwargs.get("_data_parallel_master_port_list") == []:
        del kwargs["_data_parallel_master_port_list"]  # vLLM would pick free ports: compared above
    if draw(st.integers(0, 19)) == 10:
        kwargs["not_a_field"] = 1
    return kwargs


def test_random_keyword_sets(check: Any, platform: str) -> None:
    @SETTINGS
    @given(keyword_sets())
    def run(kwargs: dict[str, Any]) -> None:
        # The external launcher reads the launcher's RANK.
        check(platform, request(env={"RANK": "1"}, **kwargs))

    run()
