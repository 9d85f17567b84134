"""A worker started before `refstore.key` was copied in says what to do: the ref it cannot find names
the key file and the restart, and its log says so as soon as the file changes. A Redis store that does
not answer is reported at start-up, not at the first write."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.refs.redisserver import free_port
from tests.workers import construct, payload

from compilation_bridge.protocol.dispatch import Dispatcher
from compilation_bridge.refs import shared
from compilation_bridge.refs.keys import KEY_FILE, StateFolder
from compilation_bridge.refs.limits import RefLimits
from compilation_bridge.refs.setup import open_ref_table
from compilation_bridge.refs.shared import SharedRefTable
from compilation_bridge.refs.signing import Signer
from compilation_bridge.refs.store.sqlite import SqliteStore


@pytest.fixture
def tables(folder: StateFolder) -> Iterator[list[SharedRefTable]]:
    opened: list[SharedRefTable] = []
    yield opened
    for table in opened:
        table.close(0)


def _worker(folder: StateFolder, opened: list[SharedRefTable]) -> Dispatcher:
    """A worker as `open_ref_table` builds one: it reads the key file once, at its start."""
    signer = Signer(folder.key(), folder.path / KEY_FILE, folder.key_on_disk)
    table = SharedRefTable(SqliteStore(folder), signer, "default", RefLimits())
    table.start()
    opened.append(table)
    return Dispatcher(refs=table)


def _copy_another_hosts_key(folder: StateFolder) -> None:
    folder.write(KEY_FILE, secrets.token_hex(32).encode())


def _get_mode(dispatcher: Dispatcher, ref: dict[str, object]) -> dict[str, str]:
    reply = dispatcher.execute(
        "snakebridge.call", payload("S", call_type="get_attr", attr="mode", instance=ref), "w"
    )
    assert not reply.success, reply.result
    return reply.error


def test_a_ref_from_the_new_key_names_the_restart(folder: StateFolder, tables: list[SharedRefTable]) -> None:
    early = _worker(folder, tables)
    _copy_another_hosts_key(folder)
    late = _worker(folder, tables)  # started after the copy: signs with the new key
    ref = construct(late, "S", None, 3, None)
    error = _get_mode(early, ref)
    assert error["type"] == "KeyError"
    assert f"Unknown SnakeBridge reference: {ref['id']}" in error["message"]
    assert f"{folder.path / KEY_FILE} holds another key than this worker read at start-up" in error["message"]
    assert "restart this worker" in error["message"]


def test_an_unknown_ref_is_only_that_while_the_key_stands(
    folder: StateFolder, tables: list[SharedRefTable]
) -> None:
    worker = _worker(folder, tables)
    never_made = dict(construct(worker, "S", None, 3, None), id="0" * 32)
    error = _get_mode(worker, never_made)
    assert error["type"] == "KeyError"
    assert "Unknown SnakeBridge reference" in error["message"]
    assert "another key" not in error["message"]


def test_the_log_says_so_without_a_call(
    folder: StateFolder,
    tables: list[SharedRefTable],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shared, "KEY_CHECK_EVERY_S", 0.0)
    caplog.set_level(logging.WARNING, logger="compilation_bridge.refs")
    _worker(folder, tables)
    _copy_another_hosts_key(folder)
    deadline = time.monotonic() + 30  # the table's thread looks every MAINTAIN_EVERY_S
    while "restart this worker" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert f"{folder.path / KEY_FILE} holds another key than this worker read at start-up" in caplog.text
    assert caplog.text.count("restart this worker") == 1


def test_an_unreachable_redis_is_reported_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"redis://bridge:hunter2-secret@127.0.0.1:{free_port()}/0"
    monkeypatch.setenv("COMPILATION_BRIDGE_REF_STORE", url)
    monkeypatch.setenv("COMPILATION_BRIDGE_STATE_DIR", str(tmp_path / "state"))
    caplog.set_level(logging.WARNING, logger="compilation_bridge.refs")
    table = open_ref_table()
    table.close(0)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"ref store redis://127.0.0.1:{url.rsplit(':', 1)[1]} is unreachable: ")
    assert "check COMPILATION_BRIDGE_REF_STORE" in warnings[0]
    assert "hunter2" not in caplog.text
