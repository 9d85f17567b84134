"""Flag checks shared by the sub-commands, so a mistyped flag is reported the argparse way (the flag's
name, exit status 2) before anything heavy, such as torch, is imported."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


class UsageError(Exception):
    """A flag's value that could only be judged after parsing (an unknown model, a model option):
    `compilation_bridge.cli` reports it through the sub-command's parser, like argparse's own errors."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(f"argument {flag}: {message}")
        self.flag = flag
        self.message = message


def json_object(text: str) -> dict[str, Any]:
    """`type=` for flags that take keyword arguments as a JSON object (`--config '{"mode": 3}'`)."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"mode\": 3}}', got {text!r}")
    return value


def token_counts(text: str) -> list[int]:
    """`type=` for `--tokens 1,16,64`: one or more positive integers, comma-separated."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return [int(part) for part in parts]


def key_json_value(text: str) -> tuple[str, Any]:
    """`type=` for `--option KEY=VALUE`, VALUE being JSON (`num_layers=4`, `name="x"`)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        message = f'the value of {key.strip()} is not JSON (e.g. 4, true, "x"): {text!r}'
        raise argparse.ArgumentTypeError(message) from None


def at_least(least: int) -> Callable[[str], int]:
    """`type=` for a whole-number flag of at least `least` (`--iterations 0` would divide by nothing
    later; argparse reports it now, naming the flag)."""

    def whole_number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"expected a whole number of at least {least}, got {text!r}")
        return value

    return whole_number


def file_in_existing_folder(text: str) -> Path:
    """`type=` for a file the command writes at its end: the folder must exist now, not after the run."""
    path = Path(text).expanduser()
    if not text or path.is_dir():
        raise argparse.ArgumentTypeError(f"expected a file name, got the folder {text!r}")
    folder = path.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"the folder {str(folder)!r} does not exist (create it first)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"the folder {str(folder)!r} is not writable")
    return path
