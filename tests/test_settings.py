"""Operator settings have one owner, `compilation_bridge.settings`: its parsers, the typed settings read
through them, and an AST scan that keeps every other module of the package off the environment (a short
allowlist below says who may read what, and why). docs/settings.md's table lists every variable settings
documents.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

import compilation_bridge
from compilation_bridge import settings, settings_catalog
from compilation_bridge.refs import limits as refs
from compilation_bridge.refs.limits import RefLimits
from compilation_bridge.refs.local import LocalRefTable
from compilation_bridge.vllm_config import env as vllm_env

PACKAGE = Path(compilation_bridge.__file__).resolve().parent
REPO = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ who may touch the environment
# The owners: any variable.
OWNERS = {"settings.py", "vllm_config/env.py"}
# The test and benchmark harness beside the worker (they start workers with an environment of their own):
# any variable.
HARNESS = ("testing/*", "bench/*")
# Start-up options: `dict(os.environ)` is the default mapping that env_flag / env_int parse (tests pass
# their own), and Snakepit's launch variables are read from that mapping.
MAPPING_READERS = {"transport/options.py"}
# Other modules: only these variables, named by a string literal.
MIRRORS: dict[str, tuple[str, ...]] = {
    # vLLM's own variables, read where and as vLLM 0.14.0's config code reads them (docs/configuration.md).
    "vllm_config/parallel.py": ("VLLM_*", "RANK"),
    "vllm_config/vllm.py": ("VLLM_*",),
    "vllm_config/platforms.py": ("VLLM_*",),
    "vllm_config/model.py": ("VLLM_*",),
    "vllm_config/attention.py": ("VLLM_*",),
    "vllm_config/network.py": ("VLLM_PORT", "VLLM_DP_MASTER_PORT"),
    "vllm_config/engine_args.py": ("VLLM_RAY_DP_PACK_STRATEGY",),
}

ENV_ATTRIBUTES = {"environ", "environb", "getenv", "getenvb"}


class Access(NamedTuple):
    line: int
    column: int
    variable: str | None  # None: not one variable named by a literal (`dict(os.environ)`, `getenv(name)`)


def env_accesses(source: str) -> list[Access]:
    """Every use of `os.environ` / `os.getenv` (any alias, `from os import ...` too), with the variable
    when a string literal names it."""
    tree = ast.parse(source)
    os_names, direct = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            os_names |= {a.asname or "os" for a in node.names if a.name == "os" or a.name.startswith("os.")}
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            direct |= {a.asname or a.name for a in node.names if a.name in ENV_ATTRIBUTES}
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        is_env = (
            isinstance(node, ast.Attribute)
            and node.attr in ENV_ATTRIBUTES
            and isinstance(node.value, ast.Name)
            and node.value.id in os_names
        ) or (isinstance(node, ast.Name) and node.id in direct)
        if is_env:
            found.append(Access(node.lineno, node.col_offset, _variable(node, parents)))
    return sorted(found)


def _literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _variable(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str | None:
    parent = parents.get(node)
    if isinstance(parent, ast.Call) and parent.func is node:  # getenv("X")
        return _literal(parent.args[0]) if parent.args else None
    if isinstance(parent, ast.Subscript) and parent.value is node:  # environ["X"]
        return _literal(parent.slice)
    if isinstance(parent, ast.Compare) and node in parent.comparators:  # "X" in environ
        return _literal(parent.left)
    if isinstance(parent, ast.Attribute) and parent.value is node:  # environ.get("X"), .setdefault, .pop
        call = parents.get(parent)
        if isinstance(call, ast.Call) and call.func is parent and call.args:
            return _literal(call.args[0])
    return None


def is_allowed(module: str, access: Access) -> bool:
    if module in OWNERS or module in MAPPING_READERS:
        return True
    if any(fnmatch.fnmatch(module, pattern) for pattern in HARNESS):
        return True
    patterns = MIRRORS.get(module, ())
    return access.variable is not None and any(fnmatch.fnmatch(access.variable, p) for p in patterns)


def package_modules() -> Iterator[tuple[str, str]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if not module.startswith("transport/generated/"):
            yield module, path.read_text()


def test_only_settings_reads_the_environment() -> None:
    offences = [
        f"{module}:{access.line}: {access.variable or 'the environment'}"
        for module, source in package_modules()
        for access in env_accesses(source)
        if not is_allowed(module, access)
    ]
    assert not offences, "read these through compilation_bridge.settings:\n" + "\n".join(offences)


def test_the_scan_sees_every_spelling() -> None:
    source = """
import os
import os as o
from os import environ, getenv as g
os.environ.get("A"); o.environ["B"]; environ.setdefault("C", "1"); g("D"); "E" in os.environ
os.getenv(name); dict(os.environ); os.environ["F"] = "1"
"""
    assert [a.variable for a in env_accesses(source)] == ["A", "B", "C", "D", "E", None, None, "F"]
    assert not is_allowed("compile/compiler.py", Access(1, 0, "VLLM_DISABLE_COMPILE_CACHE"))
    assert not is_allowed("vllm_config/model.py", Access(1, 0, "COMPILATION_BRIDGE_MODEL_ROOTS"))
    assert not is_allowed("vllm_config/parallel.py", Access(1, 0, None))
    assert is_allowed("testing/worker_process.py", Access(1, 0, None))
    assert is_allowed("bench/port.py", Access(1, 0, None))
    assert not is_allowed("commands/bench.py", Access(1, 0, None))
    # and on the package: the mirrors it allows are really there, so the scan is not looking elsewhere
    seen = {a.variable for a in env_accesses((PACKAGE / "vllm_config/parallel.py").read_text())}
    assert {"VLLM_DP_SIZE", "RANK"} <= seen


# ------------------------------------------------------------------ the parsers
@pytest.mark.parametrize(
    ("text", "on"),
    [
        *[("TRUE", True), (" yes ", True), ("1", True), ("On", True), ("0", False), ("false", False)],
        *[("", False), ("garbage", False), ("2", False), ("off", False)],
    ],
)
def test_flags(text: str, on: bool) -> None:
    assert settings.is_true(text) is on
    assert settings.env_flag("X", {"X": text}) is on
    assert settings.env_flag("X", {}) is False


@pytest.mark.parametrize(
    ("text", "least", "value"),
    [
        *[("7", 1, 7), (" 7 ", 1, 7), ("0", 1, 1), ("0", 0, 0), ("-3", 0, 0), ("", 1, 5)],
        *[("1_000", 1, 1000)],
    ],
)
def test_env_int(text: str, least: int, value: int) -> None:
    assert settings.env_int("X", 5, least=least, env={"X": text}) == value


@pytest.mark.parametrize(
    ("text", "value"), [("2.5", 2.5), (" 3 ", 3.0), ("-1", 0.0), ("", 9.0), ("nan", 0.0)]
)
def test_env_float(text: str, value: float) -> None:
    assert settings.env_float("X", 9.0, env={"X": text}) == value


def test_malformed_numbers_are_refused_with_the_variable_named() -> None:
    with pytest.raises(settings.SettingError, match="SOME_LIMIT='lots' is not a whole number"):
        settings.env_int("SOME_LIMIT", 3, env={"SOME_LIMIT": "lots"})
    with pytest.raises(settings.SettingError, match="SOME_TTL='soon' is not a number"):
        settings.env_float("SOME_TTL", 3.0, env={"SOME_TTL": "soon"})
    assert settings.env_int("SOME_LIMIT", 3, env={"SOME_LIMIT": "  "}) == 3  # blank is unset


def test_check_environment_names_every_malformed_variable() -> None:
    settings.check_environment({})
    bad = {settings.MAX_TOTAL_REFS_ENV: "lots", settings.REF_TTL_ENV: "1h", settings.MAX_RUN_BYTES_ENV: "1e6"}
    with pytest.raises(settings.SettingError) as raised:
        settings.check_environment(bad)
    for name, value in bad.items():
        assert f"{name}={value!r}" in str(raised.value)


def test_a_worker_with_a_malformed_limit_does_not_start(tmp_path: Path) -> None:
    env = {**os.environ, settings.MAX_SESSION_CALLS_ENV: "eight"}
    done = subprocess.run(
        [sys.executable, "-m", "compilation_bridge", "serve", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "COMPILATION_BRIDGE_MAX_SESSION_CALLS='eight' is not a whole number" in done.stderr
    assert "Traceback" not in done.stderr


def test_platform_flag_goes_through_the_settings_not_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from compilation_bridge.transport.launch import apply_platform
    from compilation_bridge.vllm_config import platforms

    monkeypatch.delenv(settings.PLATFORM_ENV, raising=False)
    monkeypatch.setattr(settings, "_chosen", {})
    monkeypatch.setattr(platforms, "_selected", None)
    try:
        apply_platform("cuda")
        assert settings.PLATFORM_ENV not in os.environ
        assert settings.get_settings().platform == "cuda" and platforms.get_platform().name == "cuda"
        assert settings.compiled_code_env()[settings.PLATFORM_ENV] == "cuda"  # the cache key sees it
    finally:
        settings.reload_settings()


def test_no_module_names_a_setting_by_a_literal_at_its_call_site() -> None:
    """`env_flag("X")` at a call site would be a variable settings.py does not name."""
    readers = {"env_flag", "env_int", "env_float", "_env_number"}
    offences = []
    for module, source in package_modules():
        if module == "settings.py":
            continue
        calls = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)]
        for call in calls:
            name = getattr(call.func, "id", getattr(call.func, "attr", ""))
            if name in readers and call.args and isinstance(call.args[0], ast.Constant):
                offences.append(f"{module}:{call.lineno}: {call.args[0].value}")
    assert not offences, "name these in compilation_bridge.settings:\n" + "\n".join(offences)


# ------------------------------------------------------------------ budgets and ref limits
@pytest.mark.parametrize(
    ("text", "value"),
    [(None, None), ("", None), ("4096", 4096), (" 4096 ", 4096), ("0", None), ("-5", None)],
)
def test_budgets_fall_back_to_their_defaults(
    monkeypatch: pytest.MonkeyPatch, text: str | None, value: int | None
) -> None:
    for name, read, default in (
        (settings.MAX_MODEL_BYTES_ENV, settings.max_model_bytes, 1 << 30),
        (settings.MAX_RUN_ELEMENTS_ENV, settings.max_run_elements, 1 << 24),
    ):
        if text is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, text)
        assert read() == (default if value is None else value)  # read at use: tests change them


def test_ref_limits_defaults_and_fallbacks() -> None:
    assert RefLimits.from_env({}) == RefLimits(max_rss_bytes=refs.default_max_rss_mb() << 20)
    blank = {name: " " for name in ("COMPILATION_BRIDGE_MAX_TOTAL_REFS", "COMPILATION_BRIDGE_MAX_SESSIONS")}
    assert RefLimits.from_env(blank) == RefLimits.from_env({})
    with pytest.raises(settings.SettingError, match="SNAKEBRIDGE_REF_MAX='lots'"):
        RefLimits.from_env({"SNAKEBRIDGE_REF_MAX": "lots"})
    limits = RefLimits.from_env(
        {
            "SNAKEBRIDGE_REF_TTL_SECONDS": " 1.5 ",
            "SNAKEBRIDGE_REF_MAX": "3",
            "COMPILATION_BRIDGE_MAX_TOTAL_REFS": "4",
            "COMPILATION_BRIDGE_MAX_SESSIONS": "5",
            "COMPILATION_BRIDGE_MAX_RSS_MB": "6",
        }
    )
    assert limits == RefLimits(1.5, max_per_session=3, max_total=4, max_sessions=5, max_rss_bytes=6 << 20)


def test_ref_limits_zero_means_no_limit_and_negatives_are_zero() -> None:
    names = ["SNAKEBRIDGE_REF_MAX", "COMPILATION_BRIDGE_MAX_TOTAL_REFS", "COMPILATION_BRIDGE_MAX_SESSIONS"]
    names += ["COMPILATION_BRIDGE_MAX_RSS_MB", "SNAKEBRIDGE_REF_TTL_SECONDS"]
    names += ["COMPILATION_BRIDGE_REF_LEASE_SECONDS", "COMPILATION_BRIDGE_MAX_REF_BYTES"]
    names += ["COMPILATION_BRIDGE_MAX_SESSION_BYTES", "COMPILATION_BRIDGE_MAX_STORE_BYTES"]
    nothing = RefLimits(0.0, 0.0, 0, 0, 0, 0, 0, 0, 0)
    for text in ("0", "-7"):
        assert RefLimits.from_env(dict.fromkeys(names, text)) == nothing
    table = LocalRefTable(nothing)
    for n in range(50):
        table.put(f"S{n % 7}", n)  # nothing refused, nothing evicted
    assert sum(len(r) for r in table._sessions.values()) == 50


def test_ref_limits_read_the_environment_without_a_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNAKEBRIDGE_REF_MAX", "11")
    assert RefLimits.from_env().max_per_session == 11


# ------------------------------------------------------------------ the compile cache switches
VLLM_VALUES = ["0", "1", " 1 ", "2", "-1", "007", "yes", "true", "", "1.0"]


def vllm_reads(text: str) -> bool | None:
    """vLLM 0.14.0's envs.py, word for word: None where it raises ValueError."""
    try:
        return bool(int(text))
    except ValueError:
        return None


@pytest.mark.parametrize("text", VLLM_VALUES)
def test_vllm_disable_compile_cache_read_as_vllm_reads_it(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("VLLM_DISABLE_COMPILE_CACHE", text)
    expected = vllm_reads(text)
    if expected is None:
        with pytest.raises(ValueError, match="VLLM_DISABLE_COMPILE_CACHE="):
            vllm_env.disable_compile_cache()
    else:
        assert vllm_env.disable_compile_cache() is expected
    monkeypatch.delenv("VLLM_DISABLE_COMPILE_CACHE")
    assert vllm_env.disable_compile_cache() is False


ORACLE_PYTHON = Path(os.environ.get("ORACLE_VENV") or REPO / ".oracle-venv") / "bin" / "python"
ORACLE_PROGRAM = """
import json, os, sys
import vllm.envs as envs
answers = []
for text in json.loads(sys.argv[1]):
    os.environ["VLLM_DISABLE_COMPILE_CACHE"] = text
    try:
        answers.append(envs.VLLM_DISABLE_COMPILE_CACHE)
    except ValueError:
        answers.append(None)
print(json.dumps(answers))
"""


@pytest.mark.skipif(not ORACLE_PYTHON.exists(), reason="no vLLM 0.14.0 oracle (scripts/setup_oracle.sh)")
def test_vllm_disable_compile_cache_matches_the_oracle() -> None:
    done = subprocess.run(
        [str(ORACLE_PYTHON), "-c", ORACLE_PROGRAM, json.dumps(VLLM_VALUES)],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "VLLM_DISABLE_COMPILE_CACHE"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [vllm_reads(text) for text in VLLM_VALUES]


def test_compile_cache_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    from compilation_bridge.compile.compiler import is_compile_cache_enabled

    monkeypatch.delenv("COMPILATION_BRIDGE_DISABLE_COMPILE_CACHE", raising=False)
    monkeypatch.delenv("VLLM_DISABLE_COMPILE_CACHE", raising=False)
    assert is_compile_cache_enabled({})
    assert not is_compile_cache_enabled({"force_disable_caches": True})
    monkeypatch.setenv("VLLM_DISABLE_COMPILE_CACHE", "1")
    assert not is_compile_cache_enabled({})
    monkeypatch.setenv("VLLM_DISABLE_COMPILE_CACHE", "yes")  # vLLM raises on it, at compile time
    with pytest.raises(ValueError, match="VLLM_DISABLE_COMPILE_CACHE='yes' is not an integer"):
        is_compile_cache_enabled({})
    monkeypatch.setenv("COMPILATION_BRIDGE_DISABLE_COMPILE_CACHE", " TRUE ")  # ours first: vLLM's unread
    assert not is_compile_cache_enabled({})
    monkeypatch.setenv("COMPILATION_BRIDGE_DISABLE_COMPILE_CACHE", "0")
    monkeypatch.setenv("VLLM_DISABLE_COMPILE_CACHE", "0")
    assert is_compile_cache_enabled({})


def test_max_autotune_and_the_cache_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPILATION_BRIDGE_INDUCTOR_MAX_AUTOTUNE", "Yes")
    monkeypatch.delenv("COMPILATION_BRIDGE_PLATFORM", raising=False)
    assert settings.inductor_max_autotune()
    # the key hashes the values as written: `Yes` and `1` compile alike but are cached apart
    assert settings.compiled_code_env() == {
        "COMPILATION_BRIDGE_INDUCTOR_MAX_AUTOTUNE": "Yes",
        "COMPILATION_BRIDGE_PLATFORM": None,
    }
    monkeypatch.setenv("COMPILATION_BRIDGE_INDUCTOR_MAX_AUTOTUNE", "0")
    assert not settings.inductor_max_autotune()


# ------------------------------------------------------------------ logs and model roots
@pytest.mark.parametrize(
    ("text", "level", "serve_level"),
    [(None, "warning", "info"), ("", "warning", "info"), (" DEBUG ", "debug", "debug"), ("  ", "", "")],
)
def test_log_level(monkeypatch: pytest.MonkeyPatch, text: str | None, level: str, serve_level: str) -> None:
    if text is None:
        monkeypatch.delenv("SNAKEPIT_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("SNAKEPIT_LOG_LEVEL", text)
    assert settings.log_level_setting("warning") == level
    assert settings.log_level_setting("info") == serve_level


def test_log_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPILATION_BRIDGE_LOG_FORMAT", raising=False)
    assert settings.log_format_setting() == "text"
    monkeypatch.setenv("COMPILATION_BRIDGE_LOG_FORMAT", " JSON ")
    assert settings.log_format_setting() == "json"
    monkeypatch.setenv("COMPILATION_BRIDGE_LOG_FORMAT", "yaml")
    assert settings.log_format_setting() == "text"


def test_model_roots(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("COMPILATION_BRIDGE_MODEL_ROOTS", raising=False)
    assert settings.model_roots_setting() == ()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "b", target_is_directory=True)
    roots = os.pathsep.join(["", str(tmp_path / "a"), str(link)])
    monkeypatch.setenv("COMPILATION_BRIDGE_MODEL_ROOTS", roots)
    assert settings.model_roots_setting() == ((tmp_path / "a").resolve(), (tmp_path / "b").resolve())


# ------------------------------------------------------------------ documentation
def test_catalog_documents_every_variable_settings_names() -> None:
    constants = [v for k, v in vars(settings).items() if k.endswith("_ENV") and isinstance(v, str)]
    literal_parsed = [
        name
        for _, source in package_modules()
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) in {"env_flag", "env_int", "env_float"}
        and node.args
        and (name := _literal(node.args[0])) is not None
    ]
    documented = {name for variable in settings_catalog.VARIABLES for name in variable.names}
    missing = sorted(set(constants + literal_parsed) - documented)
    assert not missing, f"settings_catalog.VARIABLES does not document {missing}"


def test_catalog_names_each_variable_once() -> None:
    names = [name for variable in settings_catalog.VARIABLES for name in variable.names]
    assert len(names) == len(set(names))


def test_settings_page_holds_the_current_table() -> None:
    page = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    assert settings_catalog.updated_page(page) == page, (
        "docs/settings.md is behind settings_catalog.py: "
        "run `compilation-bridge settings --update docs/settings.md`"
    )


def test_settings_command_prints_and_updates_the_table(tmp_path: Path) -> None:
    printed = _settings_command()
    assert printed.returncode == 0 and printed.stdout.strip() == settings_catalog.markdown_table()
    page = tmp_path / "page.md"
    page.write_text(f"intro\n{settings_catalog.BEGIN}\n| stale |\n{settings_catalog.END}\noutro\n")
    updated = _settings_command("--update", str(page))
    assert updated.returncode == 0 and "updated" in updated.stdout
    assert (
        page.read_text()
        == f"intro\n{settings_catalog.BEGIN}\n{printed.stdout}{settings_catalog.END}\noutro\n"
    )
    assert "already current" in _settings_command("--update", str(page)).stdout


def test_settings_command_refuses_a_page_without_the_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("no table here\n")
    refused = _settings_command("--update", str(page))
    assert (
        refused.returncode == 2
        and "argument --update" in refused.stderr
        and "Traceback" not in refused.stderr
    )
    assert page.read_text() == "no table here\n"


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    command = [sys.executable, "-m", "compilation_bridge", "settings"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the command writes a line: its print meets a closed pipe
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 141 and stderr == ""


def _settings_command(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "compilation_bridge", "settings", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
