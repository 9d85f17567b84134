"""Choosing the store from the operator's setting, the private state folder it lives in, and what a
store's location may say."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from compilation_bridge import remote_cache
from compilation_bridge.refs import keys, setup
from compilation_bridge.refs.keys import KEY_FILE, StateDirError, StateFolder
from compilation_bridge.refs.local import LocalRefTable
from compilation_bridge.refs.shared import SharedRefTable
from compilation_bridge.refs.store import StoreUnavailable
from compilation_bridge.refs.store.redis import RedisStore, redacted
from compilation_bridge.refs.store.sqlite import SqliteStore
from compilation_bridge.safe_files import UnsafeRootError


@pytest.fixture
def state_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COMPILATION_BRIDGE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_default_is_sqlite_in_a_private_folder(state_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPILATION_BRIDGE_REF_STORE", raising=False)
    table = setup.open_ref_table()
    assert isinstance(table, SharedRefTable) and isinstance(table.store, SqliteStore)
    assert stat.S_IMODE(state_env.stat().st_mode) == 0o700
    assert stat.S_IMODE((state_env / KEY_FILE).stat().st_mode) == 0o600
    table.close(0)


def test_off_keeps_refs_in_the_worker(state_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPILATION_BRIDGE_REF_STORE", "off")
    assert type(setup.open_ref_table()) is LocalRefTable
    assert not state_env.exists()


def test_redis_keeps_inductor_remote_caches_off_unless_asked(
    state_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote_cache, "_wanted", None)
    monkeypatch.setenv("COMPILATION_BRIDGE_REF_STORE", "redis://user:pw@127.0.0.1:1/0")
    for name in ("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE"):
        monkeypatch.setenv(name, "unset at the end")  # so that the test's environment comes back
        monkeypatch.delenv(name)
    table = setup.open_ref_table()  # nothing connects until a ref is used
    assert isinstance(table, SharedRefTable) and isinstance(table.store, RedisStore)
    assert "pw" not in table.store.location and "user" not in table.store.location
    assert remote_cache._wanted is None
    assert "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE" not in os.environ
    monkeypatch.setenv("COMPILATION_BRIDGE_INDUCTOR_REMOTE_CACHE", "1")
    monkeypatch.setenv("TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE", "0")  # an operator's own value wins
    setup.open_ref_table()
    assert remote_cache._wanted is not None and remote_cache._wanted[0].startswith("redis://")
    assert os.environ["TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE"] == "1"
    assert os.environ["TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE"] == "0"


def test_an_unknown_setting_is_refused(state_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPILATION_BRIDGE_REF_STORE", "postgres://x")
    with pytest.raises(ValueError, match="COMPILATION_BRIDGE_REF_STORE must be"):
        setup.open_ref_table()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://u:secret@h:6379/1", "redis://h:6379/1"),
        ("redis://h?password=secret&db=2", "redis://h:6379/2"),
        ("rediss://:secret@h.example:6380", "rediss://h.example:6380/0"),
        ("unix:///run/redis.sock?password=secret&db=3", "unix:///run/redis.sock?db=3"),
    ],
)
def test_a_store_location_names_scheme_host_port_and_db_only(url: str, shown: str) -> None:
    assert redacted(url) == shown


def test_a_password_in_the_query_never_reaches_an_error() -> None:
    store = RedisStore("redis://127.0.0.1:1/0?password=hunter2secret")
    with pytest.raises(StoreUnavailable) as caught:
        store.count("a" * 32)
    assert "hunter2secret" not in str(caught.value) and "127.0.0.1:1/0" in str(caught.value)


def test_an_open_state_folder_is_closed(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    StateFolder(folder).close()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_state_folder_under_a_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit: anyone could rename state/ away and put theirs in its place
    with pytest.raises(StateDirError, match="another user owns or may write"):
        StateFolder(shared / "state")


def test_a_state_folder_that_is_a_link_is_followed_once_and_checked(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    folder = StateFolder(tmp_path / "link")  # resolved like an allowed root, then held by descriptor
    assert folder.path == real
    folder.close()


def test_files_in_the_state_folder_are_never_links(tmp_path: Path) -> None:
    folder = StateFolder(tmp_path / "state")
    (tmp_path / "elsewhere").write_text("x")
    (folder.path / KEY_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StateDirError, match="symbolic link"):
        folder.key()


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder another user's needs root")
def test_a_state_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir()
    os.chown(folder, 65534, 65534)
    with pytest.raises((StateDirError, UnsafeRootError), match="owned by uid 65534"):
        StateFolder(folder)


def test_a_key_others_may_write_is_refused(tmp_path: Path) -> None:
    folder = StateFolder(tmp_path / "state")
    folder.key()
    (folder.path / KEY_FILE).chmod(0o666)
    with pytest.raises(StateDirError, match="may be written by other users"):
        folder.key()


def test_a_key_others_may_read_is_closed(tmp_path: Path) -> None:
    folder = StateFolder(tmp_path / "state")
    key = folder.key()
    (folder.path / KEY_FILE).chmod(0o644)
    assert folder.key() == key
    assert stat.S_IMODE((folder.path / KEY_FILE).stat().st_mode) == 0o600


def test_workers_starting_together_never_read_a_partly_made_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nine workers of a new pool made the key of a new folder at once, and one read it while the first was
    still writing it ("does not hold a key of 32 bytes"). Here the first maker pauses while making its key
    until a second worker has read one: the second must get a whole key, and both the same."""
    first_paused = threading.Event()
    second_done = threading.Event()
    real_token_hex = keys.secrets.token_hex

    def slow_first_token(nbytes: int) -> str:
        if not first_paused.is_set():
            first_paused.set()
            second_done.wait(10)
        return real_token_hex(nbytes)

    monkeypatch.setattr(keys.secrets, "token_hex", slow_first_token)
    results: dict[str, bytes | Exception] = {}

    def make(name: str) -> None:
        try:
            results[name] = StateFolder(tmp_path / "state").key()
        except Exception as exc:  # the assertion below names it
            results[name] = exc
        if name == "second":
            second_done.set()

    first = threading.Thread(target=make, args=("first",))
    first.start()
    assert first_paused.wait(10)
    make("second")
    first.join(10)
    assert isinstance(results["second"], bytes), results["second"]
    assert results["first"] == results["second"] and len(results["second"]) == keys.KEY_BYTES
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == [KEY_FILE]
