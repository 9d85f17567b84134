"""`compilation_bridge.compile` over the wire: compile_model returns a ref, run/report on it, and the
streaming tool delivers progress events while the compile works (torch is imported only here)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compilation_bridge.testing.session import CallError, SnakeBridgeSession, wire_ref
from compilation_bridge.testing.worker_process import WorkerProcess

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def compile_session() -> Iterator[SnakeBridgeSession]:
    worker = WorkerProcess.spawn()
    yield SnakeBridgeSession(worker.stub, worker.session_id, session_id="compile")
    worker.terminate()


def test_compile_model_run_and_report(compile_session: SnakeBridgeSession) -> None:
    session = compile_session
    cc = session.call_class("vllm.config", "CompilationConfig", [None, 3, None], backend="eager")
    model = session.call("compilation_bridge.compile", "compile_model", [wire_ref(cc)], max_num_tokens=16)
    assert model["type_name"] == "CompiledModel" and model["python_module"] == "compilation_bridge.compile"
    result = session.call_method(model, "run", [4])
    assert result["num_tokens"] == 4 and result["max_abs_diff_vs_eager"] < 1e-3
    report = session.call_method(model, "report")
    assert report["mode"] == "VLLM_COMPILE" and report["backend"] == "eager"
    with pytest.raises(CallError) as info:
        session.get_attr(model, "model")
    assert info.value.error["type"] in ("PermissionError", "AttributeError")


def test_streamed_compile_reports_progress_then_the_model(compile_session: SnakeBridgeSession) -> None:
    session = compile_session
    cc = session.call_class("vllm.config", "CompilationConfig", [None, 3, None], backend="eager")
    chunks = session.stream(
        session.base("compilation_bridge.compile", "compile_model", [wire_ref(cc)], {"max_num_tokens": 16})
    )
    events = [chunk.get("event") for chunk in chunks]
    assert events[-2:] == ["result", None] and chunks[-1] == {"is_final": True}
    assert len(events) > 2, "no progress events were streamed"
    model = chunks[-2]["result"]
    assert model["type_name"] == "CompiledModel"
    assert session.call_method(model, "run", [2])["num_tokens"] == 2
