"""What the differential tests cannot compare for ParallelConfig: a VLLM_PORT under which vLLM 0.14.0 would
never return (so the oracle cannot be asked), the free ports picked for a data-parallel master (different
on each side), and VLLM_BATCH_INVARIANT, which vLLM reads once when it is imported (the oracle server
starts before any request sets it)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from compilation_bridge.vllm_config import ParallelConfig
from compilation_bridge.vllm_config import parallel as parallel_module


@pytest.fixture
def batch_invariant_read_again() -> Iterator[None]:
    parallel_module._batch_invariant.cache_clear()
    yield
    parallel_module._batch_invariant.cache_clear()


def test_vllm_port_is_refused_instead_of_waiting_forever(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_PORT", "40000")
    with pytest.raises(ValueError, match=r"would wait forever for 5 distinct open ports"):
        ParallelConfig(data_parallel_size=2)
    # Given ports need no free ones: the variable does not matter then.
    assert (
        ParallelConfig(data_parallel_size=2, _data_parallel_master_port_list=[7]).data_parallel_master_port
        == 7
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x", "VLLM_PORT 'x' must be a valid integer"),
        ("tcp://10.0.0.1:80", "VLLM_PORT 'tcp://10.0.0.1:80' appears"),
    ],
)
def test_a_vllm_port_that_is_no_integer_fails_as_in_vllm(
    monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    monkeypatch.setenv("VLLM_PORT", value)
    with pytest.raises(ValueError, match=message):
        ParallelConfig(data_parallel_size=2)


def test_free_ports_are_distinct_free_and_outside_the_reserved_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_PORT", raising=False)
    monkeypatch.setenv("VLLM_DP_MASTER_PORT", "30000")
    config = ParallelConfig(data_parallel_size=2)
    ports = [config.data_parallel_master_port, *config._data_parallel_master_port_list]
    assert len(set(ports)) == 5
    assert not set(ports) & set(range(30000, 30010))
    for port in ports:  # nothing holds them: each can be bound again
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("", port))
    assert config.get_next_dp_init_port() == ports[-1]


@pytest.mark.parametrize(("value", "disabled"), [("1", True), ("0", False), ("yes", False), ("-2", True)])
def test_batch_invariance_disables_custom_all_reduce(
    monkeypatch: pytest.MonkeyPatch, batch_invariant_read_again: None, cuda: None, value: str, disabled: bool
) -> None:
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", value)
    assert ParallelConfig(tensor_parallel_size=2).disable_custom_all_reduce is disabled


def test_batch_invariance_is_read_once(
    monkeypatch: pytest.MonkeyPatch, batch_invariant_read_again: None, cuda: None
) -> None:
    """vLLM reads it when its module is imported: a later change does not count."""
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "0")
    assert ParallelConfig().disable_custom_all_reduce is False
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "1")
    assert ParallelConfig().disable_custom_all_reduce is False
