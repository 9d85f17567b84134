"""The memory soak's probe (`compilation_bridge.testing.heap`): it sees what the program holds."""

from __future__ import annotations

from compilation_bridge.testing import hooks


def test_heap_counts_what_the_program_holds() -> None:
    before = hooks.heap()
    held = bytearray(b"\x01") * (32 << 20)  # 32 MiB from glibc's malloc, written, so resident
    after = hooks.heap()
    assert after["in_use_kib"] - before["in_use_kib"] >= 32 << 10
    assert after["rss_kib"] - before["rss_kib"] >= 30 << 10
    del held
    assert hooks.heap(trim=True)["in_use_kib"] < after["in_use_kib"] - (30 << 10)
