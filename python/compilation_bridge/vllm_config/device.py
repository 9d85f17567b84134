"""`DeviceConfig`: which device type the model runs on ("auto" follows the platform)."""

from dataclasses import field
from typing import Any

from pydantic.dataclasses import dataclass

from compilation_bridge.vllm_config.hashing import safe_hash, vllm_name
from compilation_bridge.vllm_config.platforms import current_platform


@vllm_name("vllm.config.device.DeviceConfig")
@dataclass
class DeviceConfig:
    # vLLM turns this into a torch.device; it stays the device-type string here so that config work
    # never imports torch.
    """Configuration for the device to use for vLLM execution."""

    device: str | None = "auto"
    """Device type for vLLM execution.
    This parameter is deprecated and will be
    removed in a future release.
    It will now be set automatically based
    on the current platform."""
    device_type: str = field(init=False)
    """Device type from the current platform. This is set in
    `__post_init__`."""

    def __repr__(self) -> str:
        # vLLM holds a torch.device here; print it the way torch does.
        device = f"device(type={self.device!r})" if self.device is not None else "None"
        return f"DeviceConfig(device={device}, device_type={self.device_type!r})"

    def compute_hash(self) -> str:
        factors: list[Any] = []
        return safe_hash(str(factors).encode()).hexdigest()

    def __post_init__(self) -> None:
        if self.device == "auto":
            self.device_type = current_platform.device_type
        else:
            self.device_type = str(self.device).split(":")[0]
        self.device = None if self.device_type == "tpu" else self.device_type
