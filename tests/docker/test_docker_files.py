"""The Docker files, checked as text (no Docker engine where the tests run): a small build context, no
image built FROM a locally built name, and a test container whose exit status is the tests'."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "docker" / "Dockerfile").read_text()
COMPOSE = (REPO / "docker" / "compose.yaml").read_text()


def test_dockerignore_keeps_environments_and_builds_out_of_the_context() -> None:
    patterns = {
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    wanted = {".git", ".venv", ".oracle-venv", ".realclient", "**/_build", "**/deps", "**/__pycache__"}
    assert wanted <= patterns
    needed = {"pyproject.toml", "README.md", "python", "proto", "elixir_stub"}
    assert not needed & patterns


def test_every_from_is_a_registry_image_or_an_earlier_stage() -> None:
    stages: list[str] = []
    for image, stage in re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?\s*$", DOCKERFILE, re.M | re.I):
        assert image in stages or re.fullmatch(r"[\w.-]+(/[\w.-]+)*:[\w.-]+", image), image
        assert image != "compilation-bridge" and not image.startswith("compilation-bridge:")
        if stage:
            stages.append(stage)
    assert stages == ["worker", "elixir-tests"]
    # the last stage is what a plain `docker build` makes: the worker
    assert re.findall(r"^FROM\s+(\S+)", DOCKERFILE, re.M)[-1] == "worker"


def test_compose_builds_stages_and_names_no_image_to_pull() -> None:
    assert re.findall(r"^\s+target:\s*(\S+)", COMPOSE, re.M) == ["worker", "elixir-tests"]
    assert not re.search(r"^\s+image:", COMPOSE, re.M)
    assert not re.search(r"^\s*(ARG|FROM)\s+.*WORKER_IMAGE", DOCKERFILE, re.M)


def test_the_test_container_exits_with_the_tests_status() -> None:
    for text in (DOCKERFILE, COMPOSE):
        assert "|| true" not in text and "|| :" not in text
    tests_stage = DOCKERFILE.split("AS elixir-tests", 1)[1]
    # exec form: mix is PID 1, no shell in between
    assert re.search(r'^CMD \["mix", "test"\]$', tests_stage, re.M)
    assert "--exit-code-from elixir-tests" in COMPOSE
