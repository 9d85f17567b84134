"""The memory soak's probe (`compilation_bridge.testing.heap`): it sees what the program holds."""

from __future__ import annotations

import gc

from compilation_bridge.testing import hooks

HELD_KIB = 64 << 10  # 64 MiB
# What other threads of a long test session allocate or free between two readings (seen: about 250 KiB).
NOISE_KIB = 4 << 10


def test_heap_counts_what_the_program_holds() -> None:
    gc.collect()
    before = hooks.heap()
    held = bytearray(b"\x01") * (HELD_KIB << 10)  # from glibc's malloc, written, so resident
    after = hooks.heap()
    assert after["in_use_kib"] - before["in_use_kib"] >= HELD_KIB - NOISE_KIB
    assert after["rss_kib"] - before["rss_kib"] >= HELD_KIB - NOISE_KIB
    del held
    assert hooks.heap(trim=True)["in_use_kib"] <= after["in_use_kib"] - (HELD_KIB - NOISE_KIB)
