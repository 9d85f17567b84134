"""Plumbing of the differential tests: the line-JSON server client, request builders, the strict
comparison and the counts shown in the session summary."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TINY_LLAMA = REPO / "tests" / "oracle" / "tiny-llama"
# A tiny mixture-of-experts model (4 experts), for the MoE-only paths of VllmConfig.
TINY_MIXTRAL = Path(__file__).resolve().parent / "models" / "tiny-mixtral"
PLATFORMS = ("cpu", "cuda")

# The twelve attention ops of CompilationConfig._attention_ops, resolved by each side from its own class.
ATTENTION_OPS: dict[str, Any] = {"__attention_ops__": True}

# (platform, category) -> number of requests compared, and of those whose object the oracle built without
# an error; printed in the session summary.
COUNTS: Counter[tuple[str, str]] = Counter()
BUILT: Counter[tuple[str, str]] = Counter()


def oracle_venv() -> Path:
    """The vLLM 0.14.0 environment (`scripts/setup_oracle.sh`), or $ORACLE_VENV."""
    return Path(os.environ.get("ORACLE_VENV") or REPO / ".oracle-venv")


def oracle_python() -> Path:
    return oracle_venv() / "bin" / "python"


class ServerDied(RuntimeError):
    pass


class JsonLineServer:
    """A child process answering one JSON line per JSON request line (the oracle server, or the product
    runner as a script). Started lazily on the first request."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str], log: Path, cwd: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.log = log
        self.cwd = cwd
        self.proc: subprocess.Popen[str] | None = None
        self._log_file: Any = None

    def _start(self) -> subprocess.Popen[str]:
        self._log_file = open(self.log, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            env=self.env,
            cwd=self.cwd,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        self._roundtrip({"ping": True}, timeout=600.0)
        return self.proc

    def _log_tail(self) -> str:
        try:
            return "".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines(True)[-40:])
        except OSError:
            return ""

    def _roundtrip(self, req: Any, timeout: float) -> Any:
        self._send(req)
        return self._receive(req, timeout)

    def _send(self, req: Any) -> None:
        proc = self.proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(req) + "\n")
            proc.stdin.flush()
        except BrokenPipeError as e:
            raise ServerDied(f"{self.name} exited (rc={proc.poll()}); log tail:\n{self._log_tail()}") from e

    def _receive(self, req: Any, timeout: float) -> Any:
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        try:
            if not sel.select(timeout):
                self.close()
                raise ServerDied(
                    f"{self.name} gave no answer in {timeout:.0f} s; log tail:\n{self._log_tail()}"
                )
        finally:
            sel.close()
        line = proc.stdout.readline()
        if not line:
            rc = proc.wait(timeout=10)
            raise ServerDied(f"{self.name} exited (rc={rc}); log tail:\n{self._log_tail()}")
        answer = json.loads(line)
        if isinstance(answer, dict) and "harness_error" in answer:
            raise RuntimeError(f"{self.name}: malformed request {req!r}: {answer}")
        return answer

    def ask(self, req: Any, timeout: float = 120.0) -> Any:
        self.send(req)
        return self.receive(req, timeout)

    def send(self, req: Any) -> None:
        """Sends a request without waiting: the caller works meanwhile, then calls ``receive``."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self._send(req)

    def receive(self, req: Any, timeout: float = 120.0) -> Any:
        return self._receive(req, timeout)

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


def server_env(base: Mapping[str, str]) -> dict[str, str]:
    """The environment of a server: the test process's own (so ``VLLM_*`` settings reach both sides
    alike), plus a fixed string hash seed, offline Hugging Face, and logs on stderr."""
    env = dict(base)
    env.update(
        PYTHONHASHSEED="0",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_LOGGING_STREAM="ext://sys.stderr",
        PYTHONUNBUFFERED="1",
    )
    return env


# --- request builders ------------------------------------------------------------------------------


def tup(*items: Any) -> dict[str, Any]:
    """A tuple in a request (JSON has only lists; ``(2, 0)`` and ``[2, 0]`` validate differently)."""
    return {"__tuple__": list(items)}


def enum(cls: str, name: str) -> dict[str, Any]:
    return {"__enum__": cls, "name": name}


def new(cls: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"__new__": cls, "args": list(args), "kwargs": kwargs}


def build_new(cls: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"kind": "new", "cls": cls, "args": list(args), "kwargs": kwargs}


def call(name: str, *args: Any, on: str | None = None, **kwargs: Any) -> dict[str, Any]:
    op: dict[str, Any] = {"op": "call", "name": name, "args": list(args), "kwargs": kwargs}
    if on is not None:
        op["on"] = on
    return op


def op(kind: str, on: str | None = None, **params: Any) -> dict[str, Any]:
    o: dict[str, Any] = {"op": kind, **params}
    if on is not None:
        o["on"] = on
    return o


def get(name: str, on: str | None = None) -> dict[str, Any]:
    return op("get", on=on, name=name)


FIELDS = op("fields")
HASH = op("hash")
REPR = op("repr")
STR = op("str")
RANGES = call("get_compile_ranges")
POST_INIT = call("post_init_cudagraph_sizes")


def cc_request(kwargs: Mapping[str, Any], ops: Sequence[Mapping[str, Any]] = (HASH, REPR)) -> dict[str, Any]:
    """``CompilationConfig(**kwargs)`` then `ops`; the final field snapshot is always compared."""
    return {"build": build_new("CompilationConfig", **kwargs), "ops": list(ops)}


def scheduler(max_num_batched_tokens: int = 2048, max_num_seqs: int = 128, **kw: Any) -> dict[str, Any]:
    """SchedulerConfig keywords; ``max_model_len`` and ``is_encoder_decoder`` are its required InitVars."""
    return {
        "max_num_batched_tokens": max_num_batched_tokens,
        "max_num_seqs": max_num_seqs,
        "max_model_len": kw.pop("max_model_len", min(max_num_batched_tokens, 512)),
        "is_encoder_decoder": kw.pop("is_encoder_decoder", False),
        **kw,
    }


def tiny_model(**kw: Any) -> dict[str, Any]:
    """ModelConfig keywords for the tiny Llama folder (only a config.json; no tokenizer, no weights)."""
    return {"model": str(TINY_LLAMA), "skip_tokenizer_init": True, **kw}


def tiny_moe_model(**kw: Any) -> dict[str, Any]:
    return {"model": str(TINY_MIXTRAL), "skip_tokenizer_init": True, **kw}


def vllm_request(
    cc: Mapping[str, Any] | None = None,
    *,
    model: Mapping[str, Any] | None = None,
    scheduler_config: Mapping[str, Any] | None = None,
    parallel_config: Mapping[str, Any] | None = None,
    optimization_level: Any = None,
    ops: Sequence[Mapping[str, Any]] = (HASH, RANGES),
) -> dict[str, Any]:
    """``VllmConfig(compilation_config=CompilationConfig(**cc), ...)`` then `ops` on its compilation
    config; the final snapshot of that config is always compared."""
    b: dict[str, Any] = {"kind": "vllm"}
    if cc is not None:
        b["compilation_config"] = new("CompilationConfig", **cc)
    if model is not None:
        b["model"] = dict(model)
    if scheduler_config is not None:
        b["scheduler_config"] = dict(scheduler_config)
    if parallel_config is not None:
        b["parallel_config"] = dict(parallel_config)
    if optimization_level is not None:
        b["optimization_level"] = optimization_level
    return {"build": b, "ops": list(ops)}


# --- comparison ------------------------------------------------------------------------------------


def typed(x: Any) -> Any:
    """Makes ``==`` strict about JSON types: ``True`` differs from ``1`` and ``1.0`` from ``1``."""
    if isinstance(x, bool):
        return ("bool", x)
    if isinstance(x, float):
        return ("float", repr(x))
    if isinstance(x, dict):
        return {k: typed(v) for k, v in x.items()}
    if isinstance(x, list):
        return [typed(v) for v in x]
    return x


def differences(product: Any, oracle: Any, path: str = "") -> list[str]:
    """Human-readable leaf differences (type-strict), at most a few per call site."""
    if isinstance(product, dict) and isinstance(oracle, dict):
        out: list[str] = []
        for k in list(oracle) + [k for k in product if k not in oracle]:
            if k not in product:
                out.append(f"{path}.{k}: product lacks it, oracle={_short(oracle[k])}")
            elif k not in oracle:
                out.append(f"{path}.{k}: product={_short(product[k])}, oracle lacks it")
            else:
                out.extend(differences(product[k], oracle[k], f"{path}.{k}"))
        return out
    if isinstance(product, list) and isinstance(oracle, list) and len(product) == len(oracle):
        out = []
        for i, (p, o) in enumerate(zip(product, oracle, strict=True)):
            out.extend(differences(p, o, f"{path}[{i}]"))
        return out
    if typed(product) != typed(oracle):
        return [f"{path or '<answer>'}: product={_short(product)}, oracle={_short(oracle)}"]
    return []


def _short(v: Any, limit: int = 600) -> str:
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= limit else s[:limit] + "..."


CONFIG_CATEGORIES = (
    "CompilationConfig",
    "PassConfig",
    "DynamicShapesConfig",
    "ModelConfig",
    "VllmConfig",
    "CacheConfig",
    "LoadConfig",
    "ObservabilityConfig",
    "AttentionConfig",
    "SpeechToTextConfig",
    "StructuredOutputsConfig",
    "ProfilerConfig",
    "PoolerConfig",
    "EPLBConfig",
    "KVEventsConfig",
    "KVTransferConfig",
    "ECTransferConfig",
    "MultiModalConfig",
    "LoRAConfig",
    "SpeculativeConfig",
    "ParallelConfig",
    "SchedulerConfig",
    "EngineArgs",
)


def category(req: Mapping[str, Any]) -> str:
    b = req.get("build", {})
    if b.get("kind") == "vllm":
        return "VllmConfig"
    if b.get("kind") == "new" and str(b.get("cls")) in CONFIG_CATEGORIES:
        return str(b["cls"])
    return "other"


def describe(req: Any) -> str:
    return json.dumps(req, sort_keys=True)


def summary_lines() -> list[str]:
    lines = []
    for platform in PLATFORMS:
        per = {c: n for (p, c), n in sorted(COUNTS.items()) if p == platform}
        if not per:
            continue
        configs = sum(n for c, n in per.items() if c in CONFIG_CATEGORIES)
        detail = ", ".join(f"{c} {n} ({BUILT[(platform, c)]} built)" for c, n in per.items())
        lines.append(f"{platform}: {configs} configs compared with vLLM 0.14.0 ({detail})")
    return lines
