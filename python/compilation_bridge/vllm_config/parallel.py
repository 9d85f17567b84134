"""`ParallelConfig`: the parallel layout that vLLM's compilation planning reads (world size, TP, DP,
all2all backend), with vLLM 0.14.0's fields, checks and hash.

Not modelled: Ray (never found here, as on the oracle machine: asking for it fails as vLLM fails without it),
placement groups and executor classes (no class of vLLM's engine exists here), and the process groups of
data parallelism (`stateless_init_dp_group`, `has_unfinished_dp`, `sync_kv_cache_memory_size` need
torch.distributed peers: the surface refuses them by name). Free ports for the data-parallel master are
picked as vLLM picks them (vllm_config/network.py).
"""

import os
from functools import cache
from typing import Any, Literal, Self, get_args

from pydantic import Field, field_validator, model_validator
from pydantic.dataclasses import dataclass

from compilation_bridge.vllm_config.env import env_with_choices
from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors, qualified_name, vllm_name
from compilation_bridge.vllm_config.logs import logger, warning_once
from compilation_bridge.vllm_config.network import get_open_ports_list
from compilation_bridge.vllm_config.platforms import current_platform

ExpertPlacementStrategy = Literal["linear", "round_robin"]
DistributedExecutorBackend = Literal["ray", "mp", "uni", "external_launcher"]
DataParallelBackend = Literal["ray", "mp"]
EPLBPolicyOption = Literal["default"]
All2AllBackend = Literal[
    "naive",
    "pplx",
    "deepep_high_throughput",
    "deepep_low_latency",
    "allgather_reducescatter",
    "flashinfer_all2allv",
]

_IGNORED_HASH_FACTORS = {
    "data_parallel_rank",
    "data_parallel_rank_local",
    "data_parallel_size_local",
    "data_parallel_index",
    "data_parallel_backend",
    "data_parallel_external_lb",
    "data_parallel_hybrid_lb",
    "data_parallel_master_ip",
    "data_parallel_master_port",
    "_data_parallel_master_port_list",
    "data_parallel_rpc_port",
    "rank",
    "master_addr",
    "master_port",
    "node_rank",
    "nnodes",
    "max_parallel_loading_workers",
    "disable_custom_all_reduce",
    "ray_workers_use_nsight",
    "ray_runtime_env",
    "placement_group",
    "distributed_executor_backend",
    "worker_cls",
    "sd_worker_cls",
    "worker_extension_cls",
    "_api_process_count",
    "_api_process_rank",
}
# What ParallelConfig's __post_init__ asks of get_open_ports_list when data parallelism needs a master port.
_DP_MASTER_PORTS = 5
# vLLM's message when Ray cannot be imported (vllm/v1/executor/ray_utils.py), with ImportError's own text.
_NO_RAY = "Failed to import Ray: No module named 'ray'.Please install Ray with `pip install ray`."


@cache
def _batch_invariant() -> bool:
    """vLLM's VLLM_BATCH_INVARIANT, which it reads once, when its batch-invariance module is imported."""
    try:
        return int(os.getenv("VLLM_BATCH_INVARIANT", "0")) != 0
    except ValueError:
        return False


@vllm_name("vllm.config.parallel.EPLBConfig")
@dataclass
class EPLBConfig:
    """Configuration for Expert Parallel Load Balancing (EP)."""

    window_size: int = 1000
    """Window size for expert load recording."""
    step_interval: int = 3000
    """
    Interval for rearranging experts in expert parallelism.

    Note that if this is greater than the EPLB window size, only the metrics
    of the last `lb_window_size` steps will be used for rearranging experts.
    """
    num_redundant_experts: int = Field(default=0, ge=0)
    """Number of redundant experts to use for expert parallelism."""
    log_balancedness: bool = False
    """
    Log the balancedness each step of expert parallelism.
    This is turned off by default since it will cause communication overhead.
    """
    log_balancedness_interval: int = 1
    """
    Interval for logging the balancedness.
    """
    use_async: bool = False
    """
    Whether to use non-blocking EPLB.
    """
    policy: EPLBPolicyOption = "default"
    """The policy type for expert parallel load balancing (EPLB)."""

    @model_validator(mode="after")
    def _validate_eplb_config(self) -> Self:
        if self.use_async and self.policy != "default":
            raise ValueError("Async EPLB is only supported with the default policy.")
        if self.log_balancedness and self.log_balancedness_interval <= 0:
            raise ValueError("log_balancedness_interval must be greater than 0.")
        return self


@vllm_name("vllm.config.parallel.ParallelConfig")
@dataclass
class ParallelConfig:
    """Configuration for the distributed execution."""

    pipeline_parallel_size: int = 1
    """Number of pipeline parallel groups."""
    tensor_parallel_size: int = 1
    """Number of tensor parallel groups."""
    prefill_context_parallel_size: int = 1
    """Number of prefill context parallel groups."""
    data_parallel_size: int = 1
    """Number of data parallel groups. MoE layers will be sharded according to
    the product of the tensor parallel size and data parallel size."""
    data_parallel_size_local: int = 1
    """Number of local data parallel groups."""
    data_parallel_rank: int = 0
    """Rank of the data parallel group."""
    data_parallel_rank_local: int | None = None
    """Local rank of the data parallel group,
    set only in SPMD mode."""
    data_parallel_master_ip: str = "127.0.0.1"
    """IP of the data parallel master."""
    data_parallel_rpc_port: int = 29550
    """Port for data parallel messaging."""
    data_parallel_master_port: int = 29500
    """Port of the data parallel master."""
    data_parallel_backend: DataParallelBackend = "mp"
    """Backend to use for data parallel, either "mp" or "ray"."""
    data_parallel_external_lb: bool = False
    """Whether to use "external" DP LB mode. Applies only to online serving
    and when data_parallel_size > 0. This is useful for a "one-pod-per-rank"
    wide-EP setup in Kubernetes. Set implicitly when --data-parallel-rank
    is provided explicitly to vllm serve."""
    data_parallel_hybrid_lb: bool = False
    """Whether to use "hybrid" DP LB mode. Applies only to online serving
    and when data_parallel_size > 0. Enables running an AsyncLLM
    and API server on a "per-node" basis where vLLM load balances
    between local data parallel ranks, but an external LB balances
    between vLLM nodes/replicas. Set explicitly in conjunction with
    --data-parallel-start-rank."""
    is_moe_model: bool | None = None
    """Whether the deployed model is MoE (if known)."""
    enable_expert_parallel: bool = False
    """Use expert parallelism instead of tensor parallelism for MoE layers."""
    enable_eplb: bool = False
    """Enable expert parallelism load balancing for MoE layers."""
    eplb_config: EPLBConfig = Field(default_factory=EPLBConfig)
    """Expert parallelism configuration."""
    expert_placement_strategy: ExpertPlacementStrategy = "linear"
    """The expert placement strategy for MoE layers:\n
    - "linear": Experts are placed in a contiguous manner. For example, with 4
      experts and 2 ranks, rank 0 will have experts [0, 1] and rank 1 will have
      experts [2, 3].\n
    - "round_robin": Experts are placed in a round-robin manner. For example,
      with 4 experts and 2 ranks, rank 0 will have experts [0, 2] and rank 1
      will have experts [1, 3]. This strategy can help improve load balancing
      for grouped expert models with no redundant experts."""
    all2all_backend: All2AllBackend = "allgather_reducescatter"
    """All2All backend for MoE expert parallel communication. Available options:

    - "naive": Naive all2all implementation using broadcasts\n
    - "allgather_reducescatter": All2all based on allgather and reducescatter\n
    - "pplx": Use pplx kernels\n
    - "deepep_high_throughput": Use deepep high-throughput kernels\n
    - "deepep_low_latency": Use deepep low-latency kernels\n
    - "flashinfer_all2allv": Use flashinfer alltoallv kernels for mnnvl"""
    max_parallel_loading_workers: int | None = None
    """Maximum number of parallel loading workers when loading model
    sequentially in multiple batches. To avoid RAM OOM when using tensor
    parallel and large models."""
    disable_custom_all_reduce: bool = False
    """Disable the custom all-reduce kernel and fall back to NCCL."""
    enable_dbo: bool = False
    """Enable dual batch overlap for the model executor."""
    ubatch_size: int = 0
    """Number of ubatch size."""
    dbo_decode_token_threshold: int = 32
    """The threshold for dual batch overlap for batches only containing decodes.
    If the number of tokens in the request is greater than this threshold,
    microbatching will be used. Otherwise, the request will be processed in a
    single batch."""
    dbo_prefill_token_threshold: int = 512
    """The threshold for dual batch overlap for batches that contain one or more
    prefills. If the number of tokens in the request is greater than this
    threshold, microbatching will be used. Otherwise, the request will be
    processed in a single batch."""
    disable_nccl_for_dp_synchronization: bool = Field(default=None)
    """Forces the dp synchronization logic in vllm/v1/worker/dp_utils.py
    to use Gloo instead of NCCL for its all reduce.

    Defaults to True when async scheduling is enabled, False otherwise.
    """
    ray_workers_use_nsight: bool = False
    """Whether to profile Ray workers with nsight, see https://docs.ray.io/en/latest/ray-observability/user-guides/profiling.html#profiling-nsight-profiler."""
    # vLLM types these with Ray's classes, which resolve to Any without Ray: any value is kept as given (and
    # read only where Ray is found, which is never here).
    ray_runtime_env: Any | None = None
    """Ray runtime environment to pass to distributed workers."""
    placement_group: Any | None = None
    """ray distributed model workers placement group."""
    # vLLM's `type[Executor]` resolves to `type[Any]` (a class is accepted, then refused by _verify_args
    # unless it is an Executor, and no Executor exists here).
    distributed_executor_backend: str | DistributedExecutorBackend | type[Any] | None = None
    """Backend to use for distributed model workers, either "ray" or "mp"
    (multiprocessing). If the product of pipeline_parallel_size and tensor_parallel_size
    is less than or equal to the number of GPUs available, "mp" will be used to
    keep processing on a single host. Otherwise, an error will be raised. To use "mp"
    you must also set nnodes, and to use "ray" you must manually set
    distributed_executor_backend to "ray".

    Note that tpu only support Ray for distributed inference."""
    worker_cls: str = "auto"
    """The full name of the worker class to use. If "auto", the worker class
    will be determined based on the platform."""
    sd_worker_cls: str = "auto"
    """The full name of the worker class to use for speculative decoding.
    If "auto", the worker class will be determined based on the platform."""
    worker_extension_cls: str = ""
    """The full name of the worker extension class to use. The worker extension
    class is dynamically inherited by the worker class. This is used to inject
    new attributes and methods to the worker class for use in collective_rpc
    calls."""
    master_addr: str = "127.0.0.1"
    """distributed master address for multi-node distributed
    inference when distributed_executor_backend is mp."""
    master_port: int = 29501
    """distributed master port for multi-node distributed
    inference when distributed_executor_backend is mp."""
    node_rank: int = 0
    """distributed node rank for multi-node distributed
    inference when distributed_executor_backend is mp."""
    nnodes: int = 1
    """num of nodes for multi-node distributed
    inference when distributed_executor_backend is mp."""
    world_size: int = Field(init=False)
    """world_size is TPxPP, it affects the number of workers we create."""
    rank: int = 0
    """Global rank in distributed setup."""
    _data_parallel_master_port_list: list[int] = Field(default_factory=list)
    """List of open port auto-queried for data parallel messaging.
    Set to be private as it's not intended to be configured by users.
    """
    decode_context_parallel_size: int = 1
    """Number of decode context parallel groups, because the world size does
    not change by dcp, it simply reuse the GPUs of TP group, and tp_size
    needs to be divisible by dcp_size."""
    dcp_kv_cache_interleave_size: int = 1
    """
    Interleave size of kv_cache storage while using DCP.
    dcp_kv_cache_interleave_size has been replaced by cp_kv_cache_interleave_size,
    and will be deprecated when PCP is fully supported.

    """
    cp_kv_cache_interleave_size: int = 1
    """Interleave size of kv_cache storage while using DCP or PCP.
    For `total_cp_rank = pcp_rank * dcp_world_size + dcp_rank`,
        and `total_cp_world_size = pcp_world_size * dcp_world_size`.
    store interleave_size tokens on total_cp_rank i,
    then store next interleave_size tokens on total_cp_rank i+1.
    Interleave_size=1: token-level alignment, where token `i` is stored on
        total_cp_rank `i % total_cp_world_size`.
    Interleave_size=block_size: block-level alignment, where tokens are
        first populated to the preceding ranks. Tokens are then stored
        in (rank i+1, block j) only after (rank i, block j) is fully occupied.
    Block_size should be greater than or equal to cp_kv_cache_interleave_size.
    Block_size should be divisible by cp_kv_cache_interleave_size.
    """
    data_parallel_index: int = Field(init=False)
    """Equal to the data parallel rank but not used for torch process groups
    and not overridden for dense models."""
    _api_process_count: int = Field(default=1, gt=0)
    """
    The number of API processes initialized.

    Note:
        This is an internal config that is only valid for and
        should only be set by API server scale-out.
    """
    _api_process_rank: int = Field(default=0, ge=-1)
    """
    The rank of this API process, or `-1` for engine core processes
    under API server scale-out.

    Note:
        This is an internal config that is only valid for and
        should only be set by API server scale-out.
    """

    @field_validator("disable_nccl_for_dp_synchronization", mode="wrap")
    @classmethod
    def _skip_none_validation(cls, value: Any, handler: Any) -> Any:
        return None if value is None else handler(value)

    @model_validator(mode="after")
    def _validate_parallel_config(self) -> Self:
        if self._api_process_rank >= self._api_process_count:
            raise ValueError(
                "Invalid value of `_api_process_rank`. "
                f"Expected to be `-1` or `[0, {self._api_process_count})`,"
                f" but found: {self._api_process_rank}"
            )
        if self.data_parallel_size_local > self.data_parallel_size:
            raise ValueError(
                f"data_parallel_size_local ({self.data_parallel_size_local}) "
                f"must be <= data_parallel_size ({self.data_parallel_size})"
            )
        if self.data_parallel_size <= 1 and self.data_parallel_external_lb:
            raise ValueError("data_parallel_external_lb can only be set when data_parallel_size > 1")
        if self.enable_eplb:
            if not current_platform.is_cuda_alike():
                raise ValueError(
                    "Expert parallelism load balancing is only supported on CUDA devices or ROCm devices now."
                )
            if not self.enable_expert_parallel:
                raise ValueError("enable_expert_parallel must be True to use EPLB.")
            if self.tensor_parallel_size * self.data_parallel_size <= 1:
                raise ValueError(
                    "EPLB requires tensor_parallel_size or data_parallel_size "
                    f"to be greater than 1, but got "
                    f"TP={self.tensor_parallel_size},DP={self.data_parallel_size}."
                )
        elif self.eplb_config.num_redundant_experts != 0:
            raise ValueError(
                f"num_redundant_experts is set to {self.eplb_config.num_redundant_experts} but EPLB is not "
                "enabled. Either enable EPLB or unset num_redundant_experts."
            )
        return self

    @model_validator(mode="after")
    def _verify_args(self) -> Self:
        if _batch_invariant():
            self.disable_custom_all_reduce = True
        backend = self.distributed_executor_backend
        if backend is not None and not isinstance(backend, str):
            # vLLM accepts an Executor subclass here; none exists in this worker, so every class is refused.
            shown = f"<class '{qualified_name(backend)}'>" if isinstance(backend, type) else backend
            raise ValueError(
                f"Unrecognized distributed executor backend {shown}. Supported "
                "values are 'ray', 'mp' 'uni', 'external_launcher', "
                " custom Executor subclass or its import path."
            )
        if self.use_ray:
            raise ValueError(_NO_RAY)
        if not current_platform.use_custom_allreduce() or self.nnodes > 1:
            self.disable_custom_all_reduce = True
        if self.ray_workers_use_nsight and not self.use_ray:
            raise ValueError("Unable to use nsight profiling unless workers run with Ray.")
        return self

    @property
    def world_size_across_dp(self) -> int:
        """world_size_across_dp is TPxPPxDP, it is the size of the world
        including data parallelism."""
        return self.world_size * self.data_parallel_size

    @property
    def use_ubatching(self) -> bool:
        return self.enable_dbo or self.ubatch_size > 1

    @property
    def num_ubatches(self) -> int:
        return 2 if self.enable_dbo else self.ubatch_size

    def get_next_dp_init_port(self) -> int:
        """
        We might need to initialize process groups in multiple
        processes that is related to data parallelism,
        e.g. both in the worker and in the engine, which
        can live in different processes. To avoid port conflicts, we
        pop a new port from the prepared port list each time we need to
        initialize a new process group related to data parallelism.
        """
        if self._data_parallel_master_port_list:
            return self._data_parallel_master_port_list.pop()
        answer = self.data_parallel_master_port
        self.data_parallel_master_port += 1
        return answer

    # The all_reduce at the end of attention (during o_proj) means that
    # inputs are replicated across each rank of the tensor parallel group.
    # If using expert-parallelism with DeepEP All2All ops, replicated
    # tokens results in useless duplicate computation and communication.
    #
    # In this case, ensure the input to the experts is sequence parallel
    # to avoid the excess work.
    #
    # Not needed for pplx-kernels as it can handle duplicate input tokens.
    @property
    def use_sequence_parallel_moe(self) -> bool:
        return (
            self.all2all_backend
            in ("allgather_reducescatter", "naive", "deepep_high_throughput", "deepep_low_latency")
            and self.enable_expert_parallel
            and self.tensor_parallel_size > 1
            and self.data_parallel_size > 1
        )

    @property
    def node_rank_within_dp(self) -> int:
        return self.node_rank % self.nnodes_within_dp

    @property
    def nnodes_within_dp(self) -> int:
        if self.nnodes == 1:
            return 1
        data_parallel_node_size = self.data_parallel_size // self.data_parallel_size_local
        return self.nnodes // data_parallel_node_size

    @property
    def local_world_size(self) -> int:
        return self.world_size // self.nnodes_within_dp

    @property
    def use_ray(self) -> bool:
        # vLLM also answers True for an Executor class with `uses_ray`; no such class exists here.
        return self.distributed_executor_backend == "ray"

    def compute_hash(self) -> str:
        return hash_factors(get_hash_factors(self, _IGNORED_HASH_FACTORS))

    def __post_init__(self) -> None:
        all2all_from_env = env_with_choices("VLLM_ALL2ALL_BACKEND", None, get_args(All2AllBackend))
        if all2all_from_env is not None:
            warning_once(
                "VLLM_ALL2ALL_BACKEND environment variable is deprecated and will be removed in v0.15.0. "
                "Please use the --all2all-backend command-line argument instead."
            )
            self.all2all_backend = all2all_from_env
        self.world_size = (
            self.pipeline_parallel_size * self.tensor_parallel_size * self.prefill_context_parallel_size
        )
        if self.distributed_executor_backend == "external_launcher":
            self.world_size *= self.data_parallel_size
        if self.data_parallel_size > 1 or self.data_parallel_size_local == 0:
            if self.distributed_executor_backend == "external_launcher":
                ranks_per_dp = self.world_size // self.data_parallel_size
                self.data_parallel_rank = int(os.environ["RANK"]) // ranks_per_dp
            if not self._data_parallel_master_port_list:
                self._data_parallel_master_port_list = get_open_ports_list(_DP_MASTER_PORTS)
            self.data_parallel_master_port = self._data_parallel_master_port_list.pop()
            if not 0 <= self.data_parallel_rank < self.data_parallel_size:
                raise ValueError(
                    f"data_parallel_rank ({self.data_parallel_rank})"
                    f" must be in the range [0, {self.data_parallel_size})"
                )
        else:
            self._take_data_parallel_settings_from_env()
        self.data_parallel_index = self.data_parallel_rank
        # vLLM also sets VLLM_ENABLE_V1_MULTIPROCESSING=0 in its process for an external launcher: no config
        # reads it, and a caller may not change this worker's environment.
        self._default_executor_backend()
        if self.max_parallel_loading_workers is not None:
            logger.warning("max_parallel_loading_workers is currently not supported and will be ignored.")
        allowed_backends = ("mp", "uni", "external_launcher")
        if self.distributed_executor_backend not in allowed_backends and self.nnodes > 1:
            raise ValueError(
                "nnodes > 1 can only be set when distributed executor "
                "backend is mp, uni or external_launcher."
            )

    def _take_data_parallel_settings_from_env(self) -> None:
        # Offline data parallelism (vLLM's VLLM_DP_* variables).
        self.data_parallel_size = int(os.getenv("VLLM_DP_SIZE", "1"))
        self.data_parallel_rank = int(os.getenv("VLLM_DP_RANK", "0"))
        self.data_parallel_rank_local = int(os.getenv("VLLM_DP_RANK_LOCAL", str(self.data_parallel_rank)))
        self.data_parallel_master_ip = os.getenv("VLLM_DP_MASTER_IP", "127.0.0.1")
        self.data_parallel_master_port = int(os.getenv("VLLM_DP_MASTER_PORT", "0"))
        if self.data_parallel_size > 1 and self.is_moe_model is False:
            raise ValueError("Offline data parallel mode is not supported/useful for dense models.")

    def _default_executor_backend(self) -> None:
        if self.distributed_executor_backend is None and self.world_size > 1:
            backend = "mp"
            if current_platform.is_cuda() and self.nnodes > 1:
                backend = "mp"
            elif current_platform.is_cuda() and current_platform.device_count() < self.world_size:
                gpu_count = current_platform.device_count()
                raise ValueError(
                    f"World size ({self.world_size}) is larger than "
                    f"the number of available GPUs ({gpu_count}) in this node. "
                    "If this is intentional and you are using:\n"
                    "- ray, set '--distributed-executor-backend ray'.\n"
                    "- multiprocessing, set '--nnodes' appropriately."
                )
            elif self.data_parallel_backend == "ray":
                backend = "ray"
            self.distributed_executor_backend = backend
        if self.distributed_executor_backend is None and self.world_size == 1:
            self.distributed_executor_backend = "uni"
