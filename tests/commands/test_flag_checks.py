"""Every flag a person can mistype is refused before the command runs: exit 2, the flag named in
argparse's format, no traceback (the newcomer trial's inputs, each one that used to run or crash)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MISSING = "{missing}"  # replaced by a folder that does not exist


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    # A subprocess with a deadline: before the checks, some of these ran a whole benchmark or a server.
    command = [sys.executable, "-m", "compilation_bridge", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["serve", "--ready-file", f"{MISSING}/ready"], "argument --ready-file: the folder "),
        (["bench", "--markdown", f"{MISSING}/bench.md"], "argument --markdown: the folder "),
        (["bench", "--iterations", "0"], "argument --iterations: expected a whole number of at least 1"),
        (["bench", "--repeat", "0"], "argument --repeat: expected a whole number of at least 1"),
        (["bench", "--warmup", "-1"], "argument --warmup: expected a whole number of at least 0"),
        (
            ["bench", "--compile-threads", "0"],
            "argument --compile-threads: expected a whole number of at least 1",
        ),
        (["compile", "--repeats", "0"], "argument --repeats: expected a whole number of at least 1"),
        (
            ["compile", "--max-num-tokens", "-5"],
            "argument --max-num-tokens: expected a whole number of at least 1",
        ),
        (
            ["port", "--max-frame-bytes", "-3"],
            "argument --max-frame-bytes: expected a whole number of at least 1024",
        ),
        (["port", "--log-level", "loud"], "argument --log-level: invalid choice: 'loud'"),
        (["serve", "--heartbeat-enabled", "maybe"], "argument --heartbeat-enabled: expected true or false"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_a_bad_flag_is_a_usage_error(argv: list[str], expected: str, tmp_path: Path) -> None:
    argv = [arg.replace(MISSING, str(tmp_path / "missing")) for arg in argv]
    done = run_cli(*argv)
    assert done.returncode == 2, done.stderr
    last = done.stderr.rstrip("\n").splitlines()[-1]
    assert last.startswith(f"compilation-bridge {argv[0]}: error: {expected}"), last
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "missing").exists()


def test_the_markdown_folder_is_checked_before_any_benchmark(tmp_path: Path) -> None:
    done = run_cli("bench", "--only", "rpc", "--markdown", str(tmp_path / "missing" / "bench.md"))
    assert done.returncode == 2
    assert done.stdout == ""  # no benchmark printed a figure first


def test_heartbeat_enabled_takes_the_usual_words() -> None:
    from compilation_bridge.transport.options import parse

    assert parse(["--heartbeat-enabled", "true"]).heartbeat.enabled is True
    assert parse(["--heartbeat-enabled", "OFF"]).heartbeat.enabled is False


def test_tokens_beyond_the_compile_ranges_are_refused_before_the_compile() -> None:
    done = run_cli("compile", "--tokens", "16,3000", "--platform", "cpu")
    assert done.returncode == 2, done.stderr
    last = done.stderr.rstrip("\n").splitlines()[-1]
    assert last == (
        "compilation-bridge compile: error: argument --tokens: 3000 is above the top of the compile "
        "ranges, 2048: pass --max-num-tokens 3000 or more"
    )
    assert "tracing" not in done.stderr  # nothing was compiled


def test_with_a_vllm_config_the_hint_names_the_scheduler() -> None:
    done = run_cli("compile", "--vllm-config", "--tokens", "4096", "--platform", "cpu")
    assert done.returncode == 2, done.stderr
    assert "--scheduler '{\"max_num_batched_tokens\": 4096}'" in done.stderr
    assert "tracing" not in done.stderr
