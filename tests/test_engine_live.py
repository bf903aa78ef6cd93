"""The live differential test: start vLLM's CPU engine and compare its KV-cache lines with kvlib's prediction.

Needs the engine venv (``./dev.sh engine`` makes ``.venv-engine/``, or ``KV_COURSE_ENGINE_PYTHON``
names its Python); skipped without it, a failure under ``REQUIRE_ENGINE=1`` (CI). Each start uses a
KV space and a max_model_len that no committed fixture has, so the prediction is made fresh, before
the engine runs; the expected figures are what the engine prints and holds.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from kvlib import load_model
from kvlib.cli import main
from kvlib.vllm.cpu import predict_cpu, predict_cpu_from_log
from kvlib.vllm.cpu_engine import engine_python, run_engine

FIXTURES = Path(__file__).parent / "fixtures" / "vllm_cpu"
START_TIMEOUT_S = 420       # one start: ~40 s on 2 idle cores, ~100 s on busy ones

pytestmark = [pytest.mark.slow, pytest.mark.engine]


@pytest.fixture(autouse=True)
def _engine_installed():
    # Checked when a test runs, not at import: under .ci/run the install ends while other tests run
    # (tests/conftest.py holds these tests until it has).
    if engine_python() is None:
        if os.environ.get("REQUIRE_ENGINE") == "1":
            pytest.fail("REQUIRE_ENGINE=1 but vLLM's CPU engine is not installed (./dev.sh engine, or "
                        "KV_COURSE_ENGINE_PYTHON)", pytrace=False)
        pytest.skip("vLLM's CPU engine is not installed (./dev.sh engine); live differential test skipped")

# (geometry, GiB, max_model_len): fixtures use 1-2 GiB at 1000 or 6000 tokens. 5000 lies past the
# Gemma-2 window's cap (255 + 4096 batched tokens), so its sliding groups need fewer blocks than full.
# One start per state kind: Gated DeltaNet (Qwen3-Next style) and Mamba2 (Nemotron-H, its published
# hybrid_override_pattern form); on a CPU with AVX-512 BF16 both grow their block to 384 tokens, without it the
# GDN one to 256 (its recurrent state in bf16) -- predicted either way, before the engine runs.
STARTS = [("llama_gqa", 3, 2500), ("gemma2_hybrid", 3, 5000), ("qwen3_next_gdn", 3, 2500),
          ("nemotron_h_pattern", 3, 5000)]
CAPACITY = re.compile(r"CPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per request: "
                      r"([\d.]+)x")
GROUPS = re.compile(r"kv cache group sizes \(([\d, ]+)\)")
GREW = re.compile(r"Setting attention block size to (\d+) tokens")
PADDING = re.compile(r"Padding mamba page size by ([\d.]+)%")


def _cpu_has_avx512_bf16() -> bool:
    # vLLM's CPU build keeps the SSM state in float32 on such a CPU (platforms/cpu.py); read the flag ourselves
    try:
        return " avx512_bf16" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("name, space_gib, max_model_len", STARTS, ids=[s[0] for s in STARTS])
def test_engine_prints_what_kvlib_predicts(name, space_gib, max_model_len, tmp_path, capsys):
    config = FIXTURES / name / "config.json"
    spec = load_model(str(config))
    forecast = predict_cpu(spec, space_gib * 2**30, max_model_len,      # before the engine runs
                           avx512_bf16=_cpu_has_avx512_bf16())

    run = run_engine(config, space_gib, max_model_len, timeout_s=START_TIMEOUT_S)
    assert run.ran and run.ok, f"{run.message}\n" + "\n".join(run.log_lines[-30:])
    (tokens, mml, concurrency), = CAPACITY.findall(run.log_text)
    groups = GROUPS.findall(run.log_text)
    assert int(mml.replace(",", "")) == max_model_len
    assert forecast.tokens == int(tokens.replace(",", "")) == run.engine_reported["kv_cache_size_tokens"]
    assert forecast.concurrency_text == concurrency
    assert forecast.num_blocks == run.engine_reported["num_gpu_blocks"]
    assert forecast.block_size == run.engine_reported["block_size"]
    assert forecast.group_block_sizes == (tuple(int(x) for x in groups[0].split(",")) if groups else None)
    # state hybrids: the block vLLM grew to and the state page's padding, as printed
    plan = forecast.plan
    assert GREW.findall(run.log_text)[:1] == ([str(plan.block_size)] if plan is not None and plan.grew else [])
    assert PADDING.findall(run.log_text)[:1] == ([plan.padding_text] if plan is not None and plan.padding_text else [])

    # The same through the log reader and kvlib vllm-log.
    assert predict_cpu_from_log(run.start, spec).agrees is True
    log = tmp_path / "engine.log"
    log.write_text(run.log_text)
    assert main(["vllm-log", str(log), "--model", str(config), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["agrees"] is True and report["predicted_path"] == "cpu"
