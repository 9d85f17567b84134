"""Every function the `vllm` hex package 0.3.0 generates for the configuration family is served, or named
in `NOT_SERVED` with its reason (issue "The whole vLLM config family").

The generated Elixir modules are read from the package's sources: a built client (`.realclient/deps/vllm`,
or `integration/snakepit/deps/vllm` after `mix deps.get`), else the offline client kit (`$REALCLIENT_KIT`,
else `shared/realclient` beside the checkout), as scripts/realclient_test.sh finds it. Each generated
function is one SnakeBridge call: a construction, a method, an attribute, or a module function. It is
served when the worker's allowlist lets that call through; whether the answer equals vLLM's is what the
differential tests prove. The check runs both ways: a served class must serve every function of its
module, and `NOT_SERVED` may not name a class that is served (the list only shrinks).
"""

from __future__ import annotations

import io
import os
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from compilation_bridge.surface.catalog import default_surface
from compilation_bridge.surface.registry import PROTOCOL_DUNDERS, Surface

REPO = Path(__file__).resolve().parents[2]
GENERATED = "lib/snakebridge_generated/"
KIT_ARCHIVE = "realclient-sources.tar.gz"

# The configuration family (vllm.config, the params classes) that this worker is to serve in full.
FAMILY_MODULES = ("vllm.config", "vllm.sampling_params", "vllm.pooling_params")
FAMILY_CLASSES = (("vllm", "SamplingParams"), ("vllm", "PoolingParams"))  # also generated under `Vllm.`

# Classes of the family that are not served, and why; the test fails if an entry names a class that is.
NOT_SERVED: dict[tuple[str, str], str] = {
    ("vllm.sampling_params", "TokenizerLike"): (
        "vLLM's tokenizer protocol: a tokenizer is built from a model's tokenizer files by the tokenizers "
        "package and lives with vLLM's engine (a second pool, docs/worker.md); this worker holds none"
    ),
    ("vllm.sampling_params", "PydanticMsgspecMixin"): (
        "the mixin of vLLM's serialisation layer (vllm.v1.serial_utils) that makes SamplingParams a "
        "pydantic type: its one method, `_validate_msgspec`, is served on SamplingParams; the mixin alone "
        "holds no parameters"
    ),
}
# int's own methods on an IntEnum member (CompilationMode, SamplingType).
INT_OWN: tuple[tuple[str, ...], str] = (
    (
        "as_integer_ratio",
        "bit_count",
        "bit_length",
        "conjugate",
        "denominator",
        "from_bytes",
        "imag",
        "is_integer",
        "numerator",
        "real",
        "to_bytes",
    ),
    "int's own methods on an IntEnum member: `to_bytes` allocates what a caller asks for, and the "
    "member's integer is what reading the member already answers (`mode/1`, `sampling_type/1`)",
)
NEEDS_A_TOKENIZER: tuple[tuple[str, ...], str] = (
    ("update_from_tokenizer",),
    "needs a tokenizer, which lives with vLLM's engine (a second pool, docs/worker.md): this worker holds "
    "none; the bad words' token ids it computes are served once set",
)
# Functions of served classes and modules that are not served, by owner: the names, and why.
NOT_SERVED_FUNCTIONS_BY_OWNER: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("vllm.config", ""): (
        (
            "__all__",
            "ConfigType",
            "config",
            "get_attr_docs",
            "get_cached_compilation_config",
            "get_current_vllm_config",
            "get_current_vllm_config_or_none",
            "get_layers_from_vllm_config",
            "is_init_field",
            "iter_architecture_defaults",
            "set_current_vllm_config",
            "str_dtype_to_torch_dtype",
            "try_match_architecture_defaults",
            "update_config",
        ),
        "vLLM's process-wide current config, helpers that walk arbitrary classes or load torch, and the "
        "module's list of names (which names what is not served): refused by name (docs/configuration.md)",
    ),
    ("vllm.config", "SupportsMetricsInfo"): (
        ("_abc_impl", "_is_protocol", "_is_runtime_protocol", "metrics_info"),
        "SupportsMetricsInfo is a typing.Protocol: constructing it fails with vLLM's TypeError "
        '("Protocols cannot be instantiated"), so no instance, hence no ref, exists to call these on',
    ),
    ("vllm.config", "CompilationMode"): INT_OWN,
    ("vllm.sampling_params", "SamplingType"): INT_OWN,
    ("vllm.sampling_params", "SamplingParams"): NEEDS_A_TOKENIZER,
    ("vllm", "SamplingParams"): NEEDS_A_TOKENIZER,
    ("vllm.pooling_params", ""): (
        ("PoolingTask",),
        "a typing.Literal of the pooling tasks, not a value: `verify` takes the task names it lists",
    ),
    ("vllm.sampling_params", ""): (
        ("_MAX_TEMP", "_SAMPLING_EPS", "logger"),
        "vLLM's module-private constants and its logger object: not the parameters' behaviour, which "
        "uses them and is served",
    ),
    ("vllm.config", "ModelConfig"): (
        ("maybe_pull_model_tokenizer_for_runai", "registry"),
        "`registry` is vLLM's ModelRegistry object (its model classes, which this worker never imports: "
        "what ModelConfig answers from it comes from a declared table, vllm_config/model_registry.json); "
        "`maybe_pull_model_tokenizer_for_runai` downloads a model from object storage, and this worker "
        "reads local folders under its roots only",
    ),
    ("vllm.config", "ParallelConfig"): (
        ("has_unfinished_dp", "stateless_init_dp_group", "sync_kv_cache_memory_size"),
        "need a live torch.distributed process group of the data-parallel ranks (peer processes on the "
        "master's address and port), which belongs to vLLM's engine: the worker refuses them by name, "
        "saying so (surface/catalog.py, CONFIG_REFUSED)",
    ),
}
NOT_SERVED_FUNCTIONS = {
    (module, cls, name): reason
    for (module, cls), (names, reason) in NOT_SERVED_FUNCTIONS_BY_OWNER.items()
    for name in names
}


@dataclass(frozen=True)
class Generated:
    """One generated function: the SnakeBridge call it makes."""

    module: str  # the Python module it names
    cls: str  # the Python class, "" for a module function
    kind: str  # call_class, call_method, get_attr, call, get_module_attr, call_helper
    name: str

    def __str__(self) -> str:
        owner = f"{self.module}.{self.cls}" if self.cls else self.module
        return f"{owner} {self.kind} {self.name}"


CALL = re.compile(
    r"SnakeBridge\.Runtime\.(call_class|call_method|get_attr|call|get_module_attr|call_helper)\(\s*"
    r"[\w.]+\s*,\s*(?::\"?([\w?!]+)\"?|\"([^\"]+)\")"
)
PYTHON_NAME = re.compile(r'__snakebridge_python_name__, do: "([^"]+)"')
PYTHON_CLASS = re.compile(r'__snakebridge_python_class__, do: "([^"]+)"')


def generated_of(source: str) -> list[Generated]:
    module = PYTHON_NAME.search(source)
    if module is None:
        return []
    cls = PYTHON_CLASS.search(source)
    return [
        Generated(module.group(1), cls.group(1) if cls else "", kind, atom or text)
        for kind, atom, text in CALL.findall(source)
    ]


def _package_sources() -> Iterator[str] | None:
    """The generated modules' texts, from the first place that has them; None when none does."""
    for deps in (REPO / ".realclient/deps/vllm", REPO / "integration/snakepit/deps/vllm"):
        if (deps / GENERATED).is_dir():
            return (path.read_text() for path in sorted((deps / GENERATED).rglob("*.ex")))
    kit = Path(os.environ.get("REALCLIENT_KIT") or REPO.parent / "shared/realclient") / KIT_ARCHIVE
    if kit.is_file():
        return _archive_sources(kit)
    return None


def _archive_sources(archive: Path) -> Iterator[str]:
    prefix = f"deps/vllm/{GENERATED}"
    with tarfile.open(archive) as tar:
        for member in tar:
            if (
                member.isfile()
                and member.name.lstrip("./").startswith(prefix)
                and member.name.endswith(".ex")
            ):
                handle = tar.extractfile(member)
                assert handle is not None
                yield io.TextIOWrapper(handle, encoding="utf-8").read()


@pytest.fixture(scope="module")
def generated() -> list[Generated]:
    sources = _package_sources()
    if sources is None:
        pytest.skip("no sources of the vllm hex package: no built client and no offline kit")
    return [function for source in sources for function in generated_of(source)]


def served(surface: Surface, function: Generated) -> bool:
    """Whether the worker's allowlist lets this generated call through."""
    try:
        owner = surface.module_attr(function.module, function.cls) if function.cls else None
        if function.kind in ("call", "get_module_attr"):
            surface.module_attr(function.module, function.name)
            return True
        if function.kind == "call_helper":
            return False  # SnakeBridge's helper packs are not served (docs/wire.md, Tools)
        exposed = surface.exposure(owner)
        if exposed is None:
            return False
        if function.kind == "call_class":
            return True
        return function.name in exposed.exposed_names() or function.name in PROTOCOL_DUNDERS
    except (AttributeError, ImportError, PermissionError):
        return False


def family(functions: list[Generated]) -> list[Generated]:
    return [f for f in functions if f.module in FAMILY_MODULES or (f.module, f.cls) in FAMILY_CLASSES]


def test_the_package_sources_are_read_whole(generated: list[Generated]) -> None:
    classes = {(f.module, f.cls) for f in generated}
    assert len(classes) > 140  # the package's 169 modules: some generate no call, some share a class
    assert Generated("vllm.config", "CompilationConfig", "call_method", "compute_hash") in generated
    assert Generated("vllm.config", "CacheConfig", "get_attr", "block_size") in generated


def test_every_generated_function_of_the_family_is_served_or_explained(generated: list[Generated]) -> None:
    surface = default_surface()
    unexplained = [
        str(f)
        for f in family(generated)
        if not served(surface, f)
        and (f.module, f.cls) not in NOT_SERVED
        and (f.module, f.cls, f.name) not in NOT_SERVED_FUNCTIONS
    ]
    assert not unexplained, "neither served nor in NOT_SERVED:\n" + "\n".join(unexplained)


def test_the_list_of_what_is_not_served_names_nothing_served(generated: list[Generated]) -> None:
    surface = default_surface()
    stale = sorted(
        {
            f"{f.module}.{f.cls}"
            for f in family(generated)
            if (f.module, f.cls) in NOT_SERVED and served(surface, f)
        }
        | {
            str(f)
            for f in family(generated)
            if (f.module, f.cls, f.name) in NOT_SERVED_FUNCTIONS and served(surface, f)
        }
    )
    assert not stale, "served, so no longer to be listed as not served:\n" + "\n".join(stale)
    named = {(f.module, f.cls) for f in generated} | {(f.module, "") for f in generated}
    assert not set(NOT_SERVED) - named, "NOT_SERVED names what the package does not generate"


def test_how_much_of_the_family_is_served(
    generated: list[Generated], capsys: pytest.CaptureFixture[str]
) -> None:
    """Prints what is served, owner by owner (the issue's progress); at least every served class."""
    surface = default_surface()
    counts: dict[str, list[int]] = {}
    for function in family(generated):
        owner = counts.setdefault(f"{function.module}.{function.cls}".rstrip("."), [0, 0])
        owner[0] += served(surface, function)
        owner[1] += 1
    lines = [f"  {owner}: {done} of {total}" for owner, (done, total) in sorted(counts.items())]
    done, total = (sum(column) for column in zip(*counts.values(), strict=True))
    with capsys.disabled():
        print(f"\ngenerated surface: {done} of {total} functions of the configuration family served")
        print("\n".join(lines))
    assert done >= 250  # CompilationConfig, the classes around it and four more configs, in full
