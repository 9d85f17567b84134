"""The ref table: per-session keys, TTL, LRU bounds, exact error messages, thread safety."""

from __future__ import annotations

import threading

import pytest

from compilation_bridge.protocol.codec import ref_identity
from compilation_bridge.refs import limits as refs_module
from compilation_bridge.refs.limits import RefLimits
from compilation_bridge.refs.local import LocalRefTable
from compilation_bridge.settings import SettingError


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_put_get_release() -> None:
    table = LocalRefTable(RefLimits())
    obj = object()
    ref_id = table.put("S", obj)
    assert len(ref_id) == 32 and table.get("S", ref_id) is obj
    assert table.release("S", ref_id) is True
    assert table.release("S", ref_id) is False
    with pytest.raises(KeyError) as info:
        table.get("S", ref_id)
    assert str(info.value) == repr(f"Unknown SnakeBridge reference: {ref_id}")


def test_sessions_are_separate_and_release_session_counts() -> None:
    table = LocalRefTable(RefLimits())
    a = table.put("A", 1)
    table.put("A", 2)
    b = table.put("B", 3)
    with pytest.raises(KeyError):
        table.get("B", a)
    assert table.release_session("A") == 2
    assert table.release_session("A") == 0
    assert table.get("B", b) == 3


def test_ttl_counts_from_last_access() -> None:
    clock = Clock()
    table = LocalRefTable(RefLimits(ttl_seconds=10), clock=clock)
    kept, dropped = table.put("S", "kept"), table.put("S", "dropped")
    clock.now = 8
    table.get("S", kept)
    clock.now = 15
    assert table.get("S", kept) == "kept"
    with pytest.raises(KeyError):
        table.get("S", dropped)


def test_lru_per_session_never_evicts_other_sessions() -> None:
    table = LocalRefTable(RefLimits(max_per_session=2))
    other = table.put("B", "b")
    first, second = table.put("A", 1), table.put("A", 2)
    table.get("A", first)  # now `second` is the least recently used
    table.put("A", 3)
    assert table.get("A", first) == 1
    with pytest.raises(KeyError):
        table.get("A", second)
    assert table.get("B", other) == "b"


def test_total_bound_refuses_instead_of_evicting() -> None:
    table = LocalRefTable(RefLimits(max_total=2))
    table.put("A", 1)
    table.put("B", 2)
    with pytest.raises(RuntimeError, match="table is full"):
        table.put("C", 3)


def test_memory_bound_refuses_new_refs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(refs_module, "resident_bytes", lambda: 10 << 30)
    table = LocalRefTable(RefLimits(max_rss_bytes=1 << 30))
    with pytest.raises(MemoryError, match="COMPILATION_BRIDGE_MAX_RSS_MB"):
        table.put("S", 0)  # every put is checked, not one in 64
    monkeypatch.setattr(refs_module, "resident_bytes", lambda: 1 << 20)
    table.put("S", "fine again")


def test_limits_from_env() -> None:
    limits = RefLimits.from_env({"SNAKEBRIDGE_REF_TTL_SECONDS": "2.5", "SNAKEBRIDGE_REF_MAX": "7"})
    assert limits.ttl_seconds == 2.5 and limits.max_per_session == 7
    with pytest.raises(SettingError, match="SNAKEBRIDGE_REF_MAX='lots' is not a whole number"):
        RefLimits.from_env({"SNAKEBRIDGE_REF_MAX": "lots"})
    assert RefLimits.from_env({"COMPILATION_BRIDGE_MAX_RSS_MB": "512"}).max_rss_bytes == 512 << 20
    assert 0 < refs_module.resident_bytes() < RefLimits.from_env({}).max_rss_bytes


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("nope", "Invalid SnakeBridge reference payload"),
        ({"a": 1}, "Invalid SnakeBridge reference payload"),
        ({"__type__": "ref", "session_id": "S"}, "SnakeBridge reference missing id"),
        ({"__type__": "ref", "id": "x", "session_id": "T"}, "SnakeBridge reference session mismatch"),
    ],
)
def test_ref_identity_errors(ref: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        ref_identity(ref, "S")
    assert str(info.value) == message


def test_ref_identity_forms() -> None:
    assert ref_identity({"__type__": "ref", "id": "x", "session_id": "S"}, "S") == "x"
    assert ref_identity({"__type__": "ref", "id": "x"}, "S") == "x"
    assert ref_identity({"__snakebridge_ref__": True, "ref_id": "y"}, "S") == "y"
    assert ref_identity({"id": "z", "session_id": "S"}, "S") == "z"


def test_concurrent_use_is_consistent() -> None:
    table = LocalRefTable(RefLimits(max_per_session=50))
    errors: list[BaseException] = []

    def work(session: str) -> None:
        try:
            for i in range(300):
                ref_id = table.put(session, i)
                assert table.get(session, ref_id) == i
                if i % 3 == 0:
                    table.release(session, ref_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"S{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert all(table.count(f"S{n}") <= 50 for n in range(8))
    assert table.count() == sum(table.count(f"S{n}") for n in range(8))
