"""vLLM's choice of free ports for a data-parallel master (vllm/utils/network_utils.py): a port is found by
binding a socket to port 0 and closing it at once, so nothing stays open and nothing listens.

One departure: with `VLLM_PORT` set, vLLM's `get_open_ports_list` never returns (each try answers the same
port, and it waits for five distinct ones); here that case is refused with a ValueError instead of holding
the worker forever.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

# vLLM reserves ten ports from VLLM_DP_MASTER_PORT for the data-parallel master (get_open_port).
_RESERVED_FOR_DP_MASTER = 10


def get_open_ports_list(count: int = 5) -> list[int]:
    """`count` distinct free ports, as vLLM's `get_open_ports_list` picks them."""
    reserved = _reserved_for_dp_master()  # vLLM reads VLLM_DP_MASTER_PORT before VLLM_PORT
    if vllm_port() is not None:
        raise ValueError(
            f"VLLM_PORT is set: vLLM 0.14.0 would wait forever for {count} distinct open ports (every try "
            "answers the same port); pass `_data_parallel_master_port_list` or unset VLLM_PORT"
        )
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(_get_open_port(reserved))
    return list(ports)


def vllm_port() -> int | None:
    """vLLM's `envs.VLLM_PORT` (`get_vllm_port`), with its errors for a value that is no integer."""
    if "VLLM_PORT" not in os.environ:
        return None
    port = os.getenv("VLLM_PORT", "0")
    try:
        return int(port)
    except ValueError as err:
        if urlparse(port).scheme:
            raise ValueError(
                f"VLLM_PORT '{port}' appears to be a URI. "
                "This may be caused by a Kubernetes service discovery issue,"
                "check the warning in: https://docs.vllm.ai/en/stable/serving/env_vars.html"
            ) from None
        raise ValueError(f"VLLM_PORT '{port}' must be a valid integer") from err


def _reserved_for_dp_master() -> range:
    if "VLLM_DP_MASTER_PORT" not in os.environ:
        return range(0)
    first = int(os.getenv("VLLM_DP_MASTER_PORT", "0"))
    return range(first, first + _RESERVED_FOR_DP_MASTER)


def _get_open_port(reserved: range) -> int:
    while True:
        candidate = _bind_port_zero()
        if candidate not in reserved:
            return candidate


def _bind_port_zero() -> int:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("", 0))
            return int(s.getsockname()[1])
    except OSError:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("", 0))
            return int(s.getsockname()[1])
