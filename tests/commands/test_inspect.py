"""`compilation-bridge inspect` builds configs as vLLM would and reports errors as vLLM raised them."""

import json
import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "compilation_bridge", "inspect", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_inspect_vllm_config_on_cuda() -> None:
    done = run_cli("--config", '{"mode": 3}', "--platform", "cuda", "--model", "tiny-llama")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["platform"] == "cuda"
    assert report["fields"]["cudagraph_mode"] == "FULL_AND_PIECEWISE"
    assert report["fields"]["max_cudagraph_capture_size"] == 256
    assert report["compile_ranges"] == [[1, 2048]]
    assert len(report["hash"]) == 64 and len(report["vllm_config_hash"]) == 10


def test_inspect_reports_validation_errors() -> None:
    done = run_cli("--config", '{"mode": "bogus"}', "--platform", "cpu")
    assert done.returncode == 1
    assert "ValidationError" in done.stderr and "Invalid compilation mode: bogus" in done.stderr
    assert done.stdout == ""
