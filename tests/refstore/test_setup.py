"""Choosing the store from the operator's setting, and the private state folder it lives in."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from compilation_bridge.protocol import refsetup
from compilation_bridge.protocol.refs import RefTable
from compilation_bridge.protocol.refsign import KEY_FILE, load_or_create_key
from compilation_bridge.protocol.refstore_redis import RedisStore, redacted
from compilation_bridge.protocol.refstore_sqlite import SqliteStore
from compilation_bridge.protocol.sharedrefs import SharedRefTable
from compilation_bridge.protocol.statedir import StateDirError, private_file, private_state_dir


@pytest.fixture
def state_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COMPILATION_BRIDGE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_default_is_sqlite_in_a_private_folder(state_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPILATION_BRIDGE_REF_STORE", raising=False)
    table = refsetup.open_ref_table()
    assert isinstance(table, SharedRefTable) and isinstance(table.store, SqliteStore)
    assert stat.S_IMODE(state_env.stat().st_mode) == 0o700
    assert stat.S_IMODE((state_env / KEY_FILE).stat().st_mode) == 0o600


def test_off_keeps_refs_in_the_worker(state_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPILATION_BRIDGE_REF_STORE", "off")
    assert type(refsetup.open_ref_table()) is RefTable
    assert not state_env.exists()


def test_redis_also_switches_inductor_remote_caches_on(
    state_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "redis://user:pw@127.0.0.1:1/0"
    monkeypatch.setenv("COMPILATION_BRIDGE_REF_STORE", url)
    for name in ("TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE", "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TORCHINDUCTOR_REDIS_URL", "redis://operator-choice:6379")  # the operator's wins
    table = refsetup.open_ref_table()  # nothing connects until a ref is used
    assert isinstance(table.store, RedisStore) and "pw" not in table.store.location
    assert os.environ["TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE"] == "1"
    assert os.environ["TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE"] == "1"
    assert os.environ["TORCHINDUCTOR_REDIS_URL"] == "redis://operator-choice:6379"


def test_an_unknown_setting_is_refused(state_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPILATION_BRIDGE_REF_STORE", "postgres://x")
    with pytest.raises(ValueError, match="COMPILATION_BRIDGE_REF_STORE must be"):
        refsetup.open_ref_table()


def test_redacted_hides_the_password() -> None:
    assert redacted("redis://u:secret@h:6379/1") == "redis://u:***@h:6379/1"


def test_an_open_state_folder_is_closed(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    private_state_dir(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder another user's needs root")
def test_a_state_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir()
    os.chown(folder, 65534, 65534)
    with pytest.raises(StateDirError, match="belongs to uid 65534"):
        private_state_dir(folder)


def test_a_key_others_may_write_is_refused(tmp_path: Path) -> None:
    folder = private_state_dir(tmp_path / "state")
    load_or_create_key(folder)
    (folder / KEY_FILE).chmod(0o666)
    with pytest.raises(StateDirError, match="not private"):
        private_file(folder / KEY_FILE)
