"""Tests for ``kvlib.vllm.cpu_engine`` without vLLM: the no-engine branch, and the timeout and failure
paths driven by stand-in "engine Pythons" (shell scripts). The real engine is started in
tests/test_engine_live.py.

Expected figures come from the committed logs (vLLM 0.32.0's CPU build): the bundled starts are
copies of tests/fixtures/vllm_cpu/<name>/kv1g_len1000.log, whose sidecars say what the engine held.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from kvlib.vllm import VllmLogError
from kvlib.vllm.cpu_engine import ENGINE_PYTHON_ENV, engine_python, run_engine

FIXTURES = Path(__file__).parent / "fixtures" / "vllm_cpu"
NO_ENGINE = "/nonexistent/kv-course/engine/python"


def config_of(name: str) -> dict:
    return json.loads((FIXTURES / name / "config.json").read_text())


def engine_figures(name: str) -> dict:
    return json.loads((FIXTURES / name / "kv1g_len1000.json").read_text())["engine_reported"]


CLOSEST = {"llama_mqa": "llama_gqa", "gemma2_hybrid": "gemma2_hybrid", "deepseek_mla_ref": "deepseek_mla",
           "gemma3_local": "gemma2_hybrid", "qwen3_next_gdn": "qwen3_next_gdn", "nemotron_h_layers": "nemotron_h_pattern",
           "nemotron_h_pattern": "nemotron_h_pattern"}


@pytest.mark.parametrize("name", list(CLOSEST))
def test_no_engine_shows_the_closest_committed_log(name):
    shown = CLOSEST[name]
    run = run_engine(config_of(name), 2, 3000, python=NO_ENGINE)
    assert run.ran is False and run.source == f"bundled:{shown}"
    assert "\n" not in run.message and "not installed" in run.message and shown in run.message
    assert run.config == config_of(shown)           # the log's own model, so a prediction can be checked
    assert (run.kv_space_gib, run.max_model_len) == (1, 1000)
    assert run.ok and run.start.gpu_kv_cache_tokens == engine_figures(shown)["kv_cache_size_tokens"]
    assert any("CPU KV cache size" in line for line in run.log_lines)


def test_engine_python_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(ENGINE_PYTHON_ENV, NO_ENGINE)
    assert engine_python() is None
    run = run_engine(FIXTURES / "llama_gqa", 1, 1000)            # a folder holding config.json
    assert run.ran is False and NO_ENGINE in run.message
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv(ENGINE_PYTHON_ENV, str(fake))
    assert engine_python() == fake


def test_timeout_kills_the_whole_process_group(tmp_path):
    # A stand-in engine that never finishes and leaves a grandchild behind (as vLLM's engine core would).
    pidfile = tmp_path / "grandchild.pid"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nsleep 600 &\necho $! > {pidfile}\necho started\nsleep 600\n")
    fake.chmod(0o755)
    run = run_engine(config_of("llama_gqa"), 1, 1000, timeout_s=2, python=fake)
    assert run.ran is True and run.timed_out is True and run.ok is False
    assert "did not finish within 2 s" in run.message and run.log_lines == ("started",)
    grandchild = int(pidfile.read_text())
    for _ in range(50):                      # reaped by init; gone once it is
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the engine's grandchild {grandchild} outlived the timeout")


def test_failed_start_returns_its_log(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named vllm' >&2\nexit 3\n")
    fake.chmod(0o755)
    run = run_engine(config_of("llama_gqa"), 1, 1000, python=fake)
    assert run.ran is True and run.returncode == 3 and run.ok is False and run.start is None
    assert run.message == "the engine failed (exit 3): ModuleNotFoundError: No module named vllm"


@pytest.mark.parametrize("args, field", [
    (({"model_type": "llama"}, 1.5, 1000), "kv_space_gib"),        # VLLM_CPU_KVCACHE_SPACE takes whole GiB
    (({"model_type": "llama"}, 1, 0), "max_model_len"),
    (({"num_hidden_layers": 2}, 1, 1000), "model_type"),
    (("/nonexistent/config.json", 1, 1000), "cannot read"),
])
def test_bad_arguments_are_one_line_errors(args, field):
    with pytest.raises(VllmLogError, match=field):
        run_engine(*args, python=NO_ENGINE)
