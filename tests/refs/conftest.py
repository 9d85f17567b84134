"""Ref store fixtures: a private state folder per test, and one real Redis per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.refs.redisserver import RedisServer, available

from compilation_bridge.refs.keys import KEY_FILE, StateFolder
from compilation_bridge.refs.signing import Signer


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[StateFolder]:
    folder = StateFolder(tmp_path / "state")
    yield folder
    folder.close()


@pytest.fixture
def state_dir(folder: StateFolder) -> Path:
    return folder.path


@pytest.fixture
def signer(folder: StateFolder) -> Signer:
    return Signer(folder.key(), folder.path / KEY_FILE)


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    if not available():
        pytest.skip("redis-server is not installed (scripts/redis_for_tests.sh installs it)")
    server = RedisServer.start()
    yield server
    server.stop()
