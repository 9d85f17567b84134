"""SNAKEPIT_LOG_LEVEL: a value that is no level falls back to the default, and says so."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from compilation_bridge.transport.logs import configure_logging


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    # Another suite's session fixture may hold the product's logger at ERROR: these tests need its lines.
    product = logging.getLogger("compilation_bridge")
    handlers, level, product_level = list(root.handlers), root.level, product.level
    product.setLevel(logging.NOTSET)
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    product.setLevel(product_level)


@pytest.mark.parametrize("default", ["warning", "info"])
def test_an_unknown_level_keeps_the_default_and_warns(
    default: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SNAKEPIT_LOG_LEVEL", "loud")
    configure_logging(default=default)
    assert logging.getLogger().level == logging.getLevelName(default.upper())
    err = capsys.readouterr().err
    assert (
        "WARNING - [corr=-] ignoring SNAKEPIT_LOG_LEVEL='loud': not one of debug, info, warning, error, "
        f"none; logging at {default}"
    ) in err
    logging.getLogger("compilation_bridge.transport").warning("still heard")
    assert "still heard" in capsys.readouterr().err


def test_a_known_level_is_taken_without_a_word(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SNAKEPIT_LOG_LEVEL", " Error ")
    configure_logging(default="info")
    assert logging.getLogger().level == logging.ERROR
    assert capsys.readouterr().err == ""


def test_none_still_silences(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SNAKEPIT_LOG_LEVEL", "none")
    configure_logging()
    logging.getLogger("compilation_bridge").error("not shown")
    assert capsys.readouterr().err == ""
