"""Command-line conventions: `--version`, and usage errors that name the flag (exit 2, argparse's
format) before anything heavy runs."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from compilation_bridge import __version__
from compilation_bridge.cli import main

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "compilation_bridge", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def test_version_prints_the_package_version() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert __version__ == project["version"]
    done = run_cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"compilation-bridge {project['version']}\n"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["inspect", "--config", "{mode:3}"], "argument --config: not valid JSON"),
        (["inspect", "--config", "[3]"], "argument --config: expected a JSON object"),
        (["inspect", "--scheduler", "nope"], "argument --scheduler: not valid JSON"),
        (["inspect", "--parallel", "1"], "argument --parallel: expected a JSON object"),
        (
            ["inspect", "--model", "tiny-lama"],
            "argument --model: unknown model 'tiny-lama'; bundled models: tiny-llama",
        ),
        (["compile", "--config", "{"], "argument --config: not valid JSON"),
        (
            ["compile", "--tokens", "abc"],
            "argument --tokens: expected comma-separated positive integers, got 'abc'",
        ),
        (["compile", "--tokens", "0,16"], "argument --tokens: expected comma-separated positive integers"),
        (["compile", "--tokens", ""], "argument --tokens: expected comma-separated positive integers"),
        (["compile", "--option", "num_layers=abc"], "argument --option: the value of num_layers is not JSON"),
        (["compile", "--option", "num_layers"], "argument --option: expected KEY=VALUE"),
        (
            ["compile", "--option", "foo=1"],
            "argument --option: model 'toy-llama' has no option foo; its options:",
        ),
        (
            ["compile", "--model", "toy-lama"],
            "argument --model: unknown model 'toy-lama'; known models: toy-llama",
        ),
        (
            ["serve", "--port", "99999"],
            "argument --port: expected a port number from 0 to 65535, got '99999'",
        ),
        (["serve", "--port", "-1"], "argument --port: expected a port number from 0 to 65535"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_usage_errors_name_the_flag_and_exit_2(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: compilation-bridge {argv[0]} ")
    last = err.rstrip("\n").splitlines()[-1]
    assert last.startswith(f"compilation-bridge {argv[0]}: error: {expected}"), last
    assert "Traceback" not in err


def test_syntax_errors_come_before_torch_is_imported() -> None:
    """--tokens, --config and --option are checked by argparse itself: no torch import, no NumPy warning."""
    code = (
        "import sys; from compilation_bridge.cli import main\n"
        "try: main(['compile', '--tokens', 'abc'])\n"
        "except SystemExit as e: print(e.code, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout == "2 False\n", done.stderr


def test_semantic_config_errors_keep_vllms_message() -> None:
    """A value vLLM rejects is not a usage error: its own message, exit 1, as before."""
    done = run_cli("inspect", "--config", '{"mode": 7}', "--platform", "cpu")
    assert done.returncode == 1
    assert done.stderr.startswith("ValidationError: ") and "usage:" not in done.stderr
