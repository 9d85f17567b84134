"""Differential tests: every request runs on vLLM 0.14.0 (the oracle, a persistent process per platform
in the oracle environment) and on ``compilation_bridge.vllm_config``; the answers must be equal.

The oracle environment is ``$ORACLE_VENV`` (default ``<repo>/.oracle-venv``); without it these tests are
skipped, with the command that builds it. The test process should run with ``PYTHONHASHSEED=0``
(``scripts/test.sh`` does): then the product runs in-process; otherwise it runs in a child process with
that seed, because ``compile_sizes`` ordering goes through a ``set``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from diff_harness import (
    BUILT,
    COUNTS,
    PLATFORMS,
    REPO,
    TINY_LLAMA,
    TINY_MIXTRAL,
    JsonLineServer,
    category,
    describe,
    differences,
    oracle_python,
    oracle_venv,
    server_env,
    summary_lines,
    typed,
)
from runner import run_product

ORACLE_SERVER = REPO / "tests" / "oracle" / "oracle_server.py"
MODEL_ROOTS_ENV = "COMPILATION_BRIDGE_MODEL_ROOTS"  # the product's operator setting for model folders
RUNNER = Path(__file__).resolve().parent / "runner.py"

Check = Callable[[str, Any], Any]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.differential)
            if config.pluginmanager.has_plugin("warnings"):
                # repr() of a config whose mode is a raw int warns in pydantic's serializer, in vLLM too
                item.add_marker(pytest.mark.filterwarnings("ignore:Pydantic serializer warnings"))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = summary_lines()
    if lines:
        terminalreporter.write_sep("=", "differential (product vs vLLM 0.14.0)")
        for line in lines:
            terminalreporter.write_line(line)


class Servers:
    """One oracle server per platform (and, when the test process's hash seed is not 0, one product
    runner per platform), each started on first use and stopped at the end of the session."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.oracles: dict[str, JsonLineServer] = {}
        self.products: dict[str, JsonLineServer] = {}
        self.in_process = os.environ.get("PYTHONHASHSEED") == "0"

    def oracle(self, platform: str) -> JsonLineServer:
        if platform not in self.oracles:
            self.oracles[platform] = JsonLineServer(
                f"oracle[{platform}]",
                [str(oracle_python()), str(ORACLE_SERVER), platform],
                server_env(os.environ),
                self.logdir / f"oracle-{platform}.log",
                Path.cwd(),
            )
        return self.oracles[platform]

    def product(self, platform: str, req: Any) -> Any:
        if self.in_process:  # the very request the oracle reads: through JSON, as the oracle gets it
            return run_product(platform, json.loads(json.dumps(req)))
        if platform not in self.products:
            self.products[platform] = JsonLineServer(
                f"product[{platform}]",
                [sys.executable, str(RUNNER), platform],
                server_env(os.environ),
                self.logdir / f"product-{platform}.log",
                Path.cwd(),
            )
        return self.products[platform].ask(req)

    def close(self) -> None:
        for s in [*self.oracles.values(), *self.products.values()]:
            s.close()


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    if not oracle_python().exists():
        pytest.skip(
            f"vLLM 0.14.0 oracle environment not found at {oracle_venv()}: "
            "run `bash scripts/setup_oracle.sh` (or set ORACLE_VENV) to run the differential tests"
        )
    # The product reads model folders only under roots the operator allows: allow the tiny test models.
    saved = os.environ.get(MODEL_ROOTS_ENV)
    roots = [saved, str(TINY_LLAMA), str(TINY_MIXTRAL), str(TINY_MIXTRAL.parent)]
    os.environ[MODEL_ROOTS_ENV] = os.pathsep.join(filter(None, roots))
    # The product's warnings (vLLM's, word for word) are not compared; keep them out of failure reports.
    product_logger = logging.getLogger("compilation_bridge")
    saved_level = product_logger.level
    product_logger.setLevel(logging.ERROR)
    s = Servers(tmp_path_factory.mktemp("differential-logs"))
    try:
        yield s
    finally:
        s.close()
        product_logger.setLevel(saved_level)
        if saved is None:
            os.environ.pop(MODEL_ROOTS_ENV, None)
        else:
            os.environ[MODEL_ROOTS_ENV] = saved


@pytest.fixture(params=PLATFORMS)
def platform(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def oracle(servers: Servers) -> Callable[[str, Any], Any]:
    """``oracle(platform, request)``: vLLM 0.14.0's answer (for tests that look at it directly)."""
    return lambda platform, req: servers.oracle(platform).ask(req)


@pytest.fixture(scope="session")
def product(servers: Servers) -> Callable[[str, Any], Any]:
    return servers.product


@pytest.fixture(scope="session")
def check(servers: Servers) -> Check:
    """``check(platform, request)``: asserts that the product answers exactly as vLLM 0.14.0 (fields,
    method results, error types and messages, hashes, repr), and returns the oracle's answer."""

    def run(platform: str, req: Any) -> Any:
        oracle = servers.oracle(platform)
        oracle.send(req)  # vLLM works on it while the product runs here
        try:
            got = servers.product(platform, req)
        finally:
            expected = oracle.receive(req)
        pairs = zip(req, expected, strict=True) if isinstance(req, list) else [(req, expected)]
        for r, answer in pairs:
            COUNTS[(platform, category(r))] += 1
            BUILT[(platform, category(r))] += answer.get("build") == "ok"
        if typed(got) != typed(expected):
            diffs = differences(got, expected)
            shown = "\n  ".join(diffs[:15]) + (f"\n  ... {len(diffs) - 15} more" if len(diffs) > 15 else "")
            pytest.fail(
                f"product differs from vLLM 0.14.0 on {platform}\nrequest: {describe(req)}\n  {shown}",
                pytrace=False,
            )
        return expected

    return run
