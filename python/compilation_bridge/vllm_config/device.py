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
        # vLLM holds a torch.device here; print it the way torch does (`cuda:1` has an index).
        device = "None"
        if self.device is not None:
            kind, _, index = str(self.device).partition(":")
            device = f"device(type={kind!r}, index={int(index)})" if index else f"device(type={kind!r})"
        return f"DeviceConfig(device={device}, device_type={self.device_type!r})"

    def compute_hash(self) -> str:
        factors: list[Any] = []
        return safe_hash(str(factors).encode()).hexdigest()

    def __post_init__(self) -> None:
        if self.device == "auto":
            self.device_type = current_platform.device_type
        else:
            # Device type is assigned explicitly: as given, index included (`cuda:1`), as in vLLM
            self.device_type = str(self.device)
        if self.device_type == "tpu":  # Some device types require processing inputs on CPU
            self.device = None
        else:
            self.device = _checked_device(self.device_type)


# torch 2.13's device types, in the order its error message lists them.
TORCH_DEVICE_TYPES = (
    "cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, maia, xla, lazy, vulkan, mps, meta, "
    "hpu, mtia, privateuseone"
)


def _checked_device(device: str) -> str:
    """What vLLM's `torch.device(device_type)` accepts (a type, optionally `:index`), with torch's errors;
    kept as the string."""
    kind, colon, index = device.partition(":")
    if kind not in TORCH_DEVICE_TYPES.split(", "):
        raise RuntimeError(
            f"Expected one of {TORCH_DEVICE_TYPES} device type at start of device string: {device}"
        )
    if colon and not (index.isdigit() and index.isascii()):
        raise RuntimeError(f"Invalid device string: '{device}'")
    return device
