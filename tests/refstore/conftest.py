"""Ref store fixtures: a private state folder per test, and one real Redis per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.refstore.redisserver import RedisServer, available

from compilation_bridge.protocol.refsign import KEY_FILE, Signer, load_or_create_key
from compilation_bridge.protocol.statedir import private_state_dir


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return private_state_dir(tmp_path / "state")


@pytest.fixture
def signer(state_dir: Path) -> Signer:
    return Signer(load_or_create_key(state_dir), state_dir / KEY_FILE)


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    if not available():
        pytest.skip("redis-server is not installed (scripts/redis_for_tests.sh installs it)")
    server = RedisServer.start()
    yield server
    server.stop()
