"""`ParallelConfig`: the parallel layout that vLLM's compilation planning reads (world size, TP, DP,
all2all backend), with vLLM 0.14.0's fields, checks and hash.

Not modelled: Ray (never found here, as on the oracle machine), placement groups and executor classes;
a data-parallel master port is never opened (it is not part of any hash or compilation decision).
"""

import os
from typing import Any, Literal, Self, get_args

from pydantic import Field, field_validator, model_validator
from pydantic.dataclasses import dataclass

from compilation_bridge.vllm_config.env import env_with_choices
from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors, vllm_name
from compilation_bridge.vllm_config.logs import warning_once
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


@vllm_name("vllm.config.parallel.EPLBConfig")
@dataclass
class EPLBConfig:
    window_size: int = 1000
    step_interval: int = 3000
    num_redundant_experts: int = Field(default=0, ge=0)
    log_balancedness: bool = False
    log_balancedness_interval: int = 1
    use_async: bool = False
    policy: EPLBPolicyOption = "default"

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
    pipeline_parallel_size: int = 1
    tensor_parallel_size: int = 1
    prefill_context_parallel_size: int = 1
    data_parallel_size: int = 1
    data_parallel_size_local: int = 1
    data_parallel_rank: int = 0
    data_parallel_rank_local: int | None = None
    data_parallel_master_ip: str = "127.0.0.1"
    data_parallel_rpc_port: int = 29550
    data_parallel_master_port: int = 29500
    data_parallel_backend: DataParallelBackend = "mp"
    data_parallel_external_lb: bool = False
    data_parallel_hybrid_lb: bool = False
    is_moe_model: bool | None = None
    enable_expert_parallel: bool = False
    enable_eplb: bool = False
    eplb_config: EPLBConfig = Field(default_factory=EPLBConfig)
    expert_placement_strategy: ExpertPlacementStrategy = "linear"
    all2all_backend: All2AllBackend = "allgather_reducescatter"
    max_parallel_loading_workers: int | None = None
    disable_custom_all_reduce: bool = False
    enable_dbo: bool = False
    ubatch_size: int = 0
    dbo_decode_token_threshold: int = 32
    dbo_prefill_token_threshold: int = 512
    disable_nccl_for_dp_synchronization: bool = Field(default=None)
    ray_workers_use_nsight: bool = False
    # Ray objects cannot arrive over the wire; the fields exist so the field set (and repr) is vLLM's.
    ray_runtime_env: None = None
    placement_group: None = None
    distributed_executor_backend: str | DistributedExecutorBackend | None = None
    worker_cls: str = "auto"
    sd_worker_cls: str = "auto"
    worker_extension_cls: str = ""
    master_addr: str = "127.0.0.1"
    master_port: int = 29501
    node_rank: int = 0
    nnodes: int = 1
    world_size: int = Field(init=False)
    rank: int = 0
    _data_parallel_master_port_list: list[int] = Field(default_factory=list)
    decode_context_parallel_size: int = 1
    dcp_kv_cache_interleave_size: int = 1
    cp_kv_cache_interleave_size: int = 1
    data_parallel_index: int = Field(init=False)
    _api_process_count: int = Field(default=1, gt=0)
    _api_process_rank: int = Field(default=0, ge=-1)

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
        if not current_platform.use_custom_allreduce() or self.nnodes > 1:
            self.disable_custom_all_reduce = True
        if self.ray_workers_use_nsight and self.distributed_executor_backend != "ray":
            raise ValueError("Unable to use nsight profiling unless workers run with Ray.")
        return self

    @property
    def world_size_across_dp(self) -> int:
        return self.world_size * self.data_parallel_size

    @property
    def use_ubatching(self) -> bool:
        return self.enable_dbo or self.ubatch_size > 1

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
            if not 0 <= self.data_parallel_rank < self.data_parallel_size:
                raise ValueError(
                    f"data_parallel_rank ({self.data_parallel_rank})"
                    f" must be in the range [0, {self.data_parallel_size})"
                )
        else:
            self._take_data_parallel_settings_from_env()
        self.data_parallel_index = self.data_parallel_rank
        self._default_executor_backend()
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
