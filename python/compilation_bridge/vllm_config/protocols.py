"""vLLM 0.14.0's `SupportsMetricsInfo` (vllm.config.utils): the protocol of configs that publish metrics
labels. A Protocol: constructing one fails with Python's TypeError, as in vLLM, so no instance exists."""

from typing import Protocol

from compilation_bridge.vllm_config.hashing import vllm_name


@vllm_name("vllm.config.utils.SupportsMetricsInfo")
class SupportsMetricsInfo(Protocol):
    def metrics_info(self) -> dict[str, str]: ...
