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
    # GQA, MHA, MQA, explicit head_dim, fp8 KV, a sliding-window hybrid, MLA (both kernels); then the state
    # hybrids (Gated DeltaNet, Mamba2 in both config forms), Gemma 3 5:1, Llama 4 chunked, gpt-oss sinks and
    # Gemma 4's per-layer geometry, two starts each.
    assert {p.parent.name for p in LOGS} == {"llama_gqa", "llama_mha", "llama_mqa", "llama_head_dim",
                                             "llama_gqa_fp8", "gemma2_hybrid", "deepseek_mla", "deepseek_mla_ref",
                                             *HYBRID_GEOMETRIES}
    assert len(LOGS) == 18 + 2 * len(HYBRID_GEOMETRIES)


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


# --- Every field and text of a prediction, on real starts edited by hand ---------------------------
# The edits stand for what another start (or a wrong model) would print; each expected figure is worked
# below from the config and the log line, not taken from kvlib.
# llama_gqa/config.json: 3 layers, 2 KV heads of 32, bf16, block 128:
#   page = 128 x 2 x (32 + 32) x 2 B = 32,768 B; one group of 3 layers: 98,304 B per block;
#   1 GiB: N = 1,073,741,824 // 98,304 = 10,922; 1000-token request: ceil(1000 / 128) = 8 blocks;
#   tokens int(N / 8 x 1000) = 125 N; concurrency N / 8.
GQA = FIXTURES / "llama_gqa" / "kv1g_len1000.log"
GQA_CAPACITY = "CPU KV cache size: 1,365,250 tokens, Maximum concurrency for 1,000 tokens per request: 1365.25x"
GEMMA = FIXTURES / "gemma2_hybrid" / "kv1g_len1000.log"
CPU_VS_GPU_START = "CPU path: the KV space is VLLM_CPU_KVCACHE_SPACE whole GiB"


def edited(log: Path, *pairs, drop=()):
    """The log's one start after replacing text (each ``old`` must be there) and dropping lines."""
    text = log.read_text()
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new)
    [start] = parse_log("\n".join(line for line in text.splitlines() if not any(d in line for d in drop)))
    return start


def test_agreeing_start_every_field():
    p = predict_cpu_from_log(start_of(GQA), spec_of(GQA))
    assert (p.model, p.engine, p.block_size, p.block_size_source) == ("llama_gqa", "v1", 128, "cpu backend")
    assert (p.kv_cache_dtype, p.kv_element_bytes, p.tensor_parallel_size, p.pipeline_parallel_size) == ("auto", 2, 1, 1)
    assert (p.page_bytes, p.bytes_per_block, p.kv_cache_groups) == (32768, 98304, 1)
    assert (p.available_bytes_min, p.available_bytes_max) == (GIB, GIB)
    assert (p.blocks_min, p.blocks_max, p.tokens_min, p.tokens_max) == (10922, 10922, 1365250, 1365250)
    # the printed 1,365,250 tokens = 125 N only for N = 10,922: that block, [10,922 x 98,304, 10,923 x 98,304 - 1] B
    assert (p.derived_blocks_min, p.derived_blocks_max) == (10922, 10922)
    assert (p.implied_available_bytes_min, p.implied_available_bytes_max) == (1073676288, 1073774591)
    assert (p.compared, p.logged, p.agrees, p.error_blocks, p.error_tokens, p.cause) == (
        "gpu_kv_cache_tokens", 1365250, True, 0, 0, None)
    assert p.reason == ("agrees (CPU path): logged 1,365,250 tokens = predicted, from 1.0 GiB = 1,073,741,824 B at "
                        "98,304 B per block (1 KV-cache group(s) of 3 layer(s) x 32,768 B pages, block size 128), "
                        "10,922 blocks")
    assert len(p.notes) == 1 and p.notes[0].startswith(CPU_VS_GPU_START)
    assert p.scenarios[0].startswith("vLLM CPU backend 0.32.0: block 128, N = space // 98,304 B, "
                                     "8 blocks per 1,000-token request, ")


def test_fewer_tokens_than_predicted_every_field():
    # Printed 1,000,000 tokens and 1000.00x: 125 N = 1,000,000 only at N = 8,000 (8,000 / 8 = 1000.00x).
    start = edited(GQA, (GQA_CAPACITY, GQA_CAPACITY.replace("1,365,250", "1,000,000").replace("1365.25x", "1000.00x")))
    p = predict_cpu_from_log(start, spec_of(GQA))
    assert (p.logged, p.agrees, p.tokens_min) == (1000000, False, 1365250)
    assert (p.derived_blocks_min, p.derived_blocks_max) == (8000, 8000)
    # 8,000 x 98,304 = 786,432,000; 8,001 x 98,304 - 1 = 786,530,303
    assert (p.implied_available_bytes_min, p.implied_available_bytes_max) == (786432000, 786530303)
    assert p.error_tokens == 1000000 - 1365250 and p.error_blocks == 8000 - 10922
    assert p.cause == ("logged 1,000,000 tokens, predicted 1,365,250; printed concurrency 1000.00x, predicted "
                       "1365.25x")
    # 2^30 / 8,000 = 134,217.728 B per block, / 98,304 = 1.365x
    assert p.reason == ("does not agree (CPU path): " + p.cause + ", from 1.0 GiB = 1,073,741,824 B at 98,304 B per "
                        "block (1 KV-cache group(s) of 3 layer(s) x 32,768 B pages, block size 128), 10,922 blocks; "
                        "the logged tokens imply about 134,218 B per block, 1.37x the 98,304 B this model gives -- "
                        "wrong model or settings? (the engine config names '$MODEL')")


def test_more_tokens_than_predicted_errors_are_positive():
    # 2,000,000 tokens = 125 x 16,000: 16,000 - 10,922 = 5,078 blocks and 634,750 tokens too many;
    # the concurrency left as printed (1365.25x) agrees, so only the tokens are a miss.
    start = edited(GQA, ("1,365,250 tokens", "2,000,000 tokens"))
    p = predict_cpu_from_log(start, spec_of(GQA))
    assert (p.error_blocks, p.error_tokens) == (5078, 634750)
    assert p.cause == "logged 2,000,000 tokens, predicted 1,365,250"


def test_tokens_no_block_count_gives():
    # 125 N is never 1,000,001: no block count, so no implied bytes, no block error and no ratio.
    start = edited(GQA, ("1,365,250 tokens", "1,000,001 tokens"))
    p = predict_cpu_from_log(start, spec_of(GQA))
    assert p.derived_blocks_min is None and p.implied_available_bytes_min is None
    assert p.implied_available_bytes_max is None and p.error_blocks is None
    assert p.error_tokens == 1000001 - 1365250
    assert p.reason.endswith("block size 128), 10,922 blocks -- wrong model or settings? (the engine config names "
                             "'$MODEL')")


def test_fractional_space_is_a_range():
    # 'Explicitly set (1.25/...)': %.2f covers [1.245, 1.255) GiB = [ceil(1.245 x 2^30), ceil(1.255 x 2^30) - 1]
    # = [1,336,808,571, 1,347,545,989] B; // 98,304 = 13,598 to 13,707 blocks; 125 N = 1,699,750 to 1,713,375
    # tokens; N / 8 = 1699.75x to 1713.375x, printed 1713.38x.
    start = edited(GQA, ("(1.0/20.21)", "(1.25/20.21)"))
    p = predict_cpu_from_log(start, spec_of(GQA))
    assert (p.available_bytes_min, p.available_bytes_max) == (1336808571, 1347545989)
    assert (p.blocks_min, p.blocks_max, p.tokens_min, p.tokens_max) == (13598, 13707, 1699750, 1713375)
    assert (p.concurrency_min, p.concurrency_max) == (1699.75, 1713.38)
    assert p.notes[-1] == ("KV space 1.25 GiB is not a whole number of GiB (kv_cache_memory_bytes?): its rounding "
                           "makes the prediction a range")
    # The printed 1,365,250 tokens (N = 10,922) lie below: 10,922 - 13,598 = -2,676 blocks, -334,500 tokens;
    # the midpoint (1,336,808,571 + 1,347,545,989) / 2 / 10,922 = 122,887.5 B per block, 1.25x 98,304.
    assert (p.error_blocks, p.error_tokens) == (-2676, 1365250 - 1699750)
    assert p.cause == ("logged 1,365,250 tokens, predicted 1,699,750 to 1,713,375; printed concurrency 1365.25x, "
                       "predicted 1699.75x to 1713.38x")
    assert ("from 1.25 GiB printed = 1,336,808,571 to 1,347,545,989 B at 98,304 B per block" in p.reason
            and "13,598 blocks; the logged tokens imply about 122,888 B per block, 1.25x the 98,304 B" in p.reason)


@pytest.mark.parametrize("tokens, blocks, concurrency", [("1,699,750", 13598, "1699.75"),
                                                         ("1,713,375", 13707, "1713.38")])
def test_fractional_space_both_ends_agree(tokens, blocks, concurrency):
    # The two ends of the 1.25 GiB range worked above: each one's printed figures agree.
    start = edited(GQA, ("(1.0/20.21)", "(1.25/20.21)"),
                   (GQA_CAPACITY, GQA_CAPACITY.replace("1,365,250", tokens).replace("1365.25", concurrency)))
    p = predict_cpu_from_log(start, spec_of(GQA))
    assert (p.agrees, p.error_tokens, p.error_blocks, p.derived_blocks_min) == (True, 0, 0, blocks)


@pytest.mark.parametrize("printed, exact", [("1", True), ("2.0", True), ("1.00", False), ("0.5", False)])
def test_which_space_figures_are_exact(printed, exact):
    # VLLM_CPU_KVCACHE_SPACE (whole GiB) prints as given ('1', '2.0'); anything else ('1.00', '0.5') is
    # kv_cache_memory_bytes rounded to two decimals: [X - 0.005, X + 0.005) GiB, a range around X.
    p = predict_cpu_from_log(edited(GQA, ("(1.0/20.21)", f"({printed}/20.21)")), spec_of(GQA))
    value = float(printed) * GIB
    assert (p.available_bytes_min == p.available_bytes_max == value) is exact
    assert p.available_bytes_min <= value <= p.available_bytes_max
    assert any(n.startswith(f"KV space {printed} GiB is not a whole number") for n in p.notes) is not exact


def test_no_capacity_line_predicts_what_vllm_would_print():
    # Without the 'CPU KV cache size' line max_model_len comes from the engine config's max_seq_len=1000.
    p = predict_cpu_from_log(edited(GQA, drop=("CPU KV cache size",)), spec_of(GQA))
    assert (p.compared, p.logged, p.agrees, p.error_blocks, p.error_tokens, p.cause) == (None,) * 6
    assert p.tokens_min == 1365250
    assert p.reason == ("nothing to compare: the log prints no 'CPU KV cache size' line; from 1.0 GiB = "
                        "1,073,741,824 B vLLM would print 1,365,250 tokens")
    assert len(p.notes) == 1 and p.notes[0].startswith(CPU_VS_GPU_START)


def test_version_not_printed_and_version_given():
    start = edited(GQA, ("(v0.32.0) ", ""))
    p = predict_cpu_from_log(start, spec_of(GQA))
    assert p.notes[0] == "version not printed: vLLM 0.32.0's CPU rules assumed"
    assert p.notes[1].startswith(CPU_VS_GPU_START) and len(p.notes) == 2
    assert p.reason.endswith(" [version not printed: vLLM 0.32.0's CPU rules assumed]")
    assert p.reason.startswith("agrees (CPU path): logged 1,365,250 tokens")
    # A version passed in overrides the log's (printed or not).
    p = predict_cpu_from_log(start_of(GQA), spec_of(GQA), version="0.31.1")
    assert p.notes[0] == ("only vLLM 0.32.0's CPU path is modelled; this log is from 0.31.1, so the prediction "
                          "assumes its rules are unchanged")
    p = predict_cpu_from_log(start, spec_of(GQA), version="0.32.0")
    assert len(p.notes) == 1 and "[" not in p.reason


def test_tp_and_pp_from_the_log_or_the_arguments():
    note = "TP/PP on the CPU backend is not checked against the engine here; the GPU layout rules are used"
    # TP 2: one KV head per rank, page 128 x 1 x 64 x 2 = 16,384 B, block 49,152 B; 2^30 // 49,152 = 21,845
    # blocks; 125 x 21,845 = 2,730,625 tokens.
    for start, kw in [(start_of(GQA), {"tp": 2}), (edited(GQA, ("tensor_parallel_size=1,", "tensor_parallel_size=2,")), {})]:
        p = predict_cpu_from_log(start, spec_of(GQA), **kw)
        assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.page_bytes) == (2, 1, 16384)
        assert (p.blocks_min, p.tokens_min) == (21845, 2730625) and p.notes[-1] == note
    # PP 2: vLLM's get_pp_indices splits 3 layers 2 + 1; the larger stage sets the block: 2 x 32,768 = 65,536 B;
    # 2^30 // 65,536 = 16,384 blocks; 125 x 16,384 = 2,048,000 tokens.
    for start, kw in [(start_of(GQA), {"pp": 2}),
                      (edited(GQA, ("pipeline_parallel_size=1,", "pipeline_parallel_size=2,")), {})]:
        p = predict_cpu_from_log(start, spec_of(GQA), **kw)
        assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.bytes_per_block) == (1, 2, 65536)
        assert (p.blocks_min, p.tokens_min) == (16384, 2048000) and p.notes[-1] == note
    # Arguments override the log: tp=1 on a log that says 2 is the unsharded figure again.
    p = predict_cpu_from_log(edited(GQA, ("tensor_parallel_size=1,", "tensor_parallel_size=2,")), spec_of(GQA), tp=1)
    assert (p.tensor_parallel_size, p.tokens_min, len(p.notes)) == (1, 1365250, 1)


def test_settings_from_the_arguments():
    # block_size=16 given: page 16 x 2 x 64 x 2 = 4,096 B, block 12,288 B; 2^30 // 12,288 = 87,381 blocks;
    # ceil(1000 / 16) = 63 per request; int(87,381 / 63 x 1000) = 1,387,000 tokens.
    p = predict_cpu_from_log(start_of(GQA), spec_of(GQA), block_size=16)
    assert (p.block_size, p.block_size_source, p.page_bytes, p.blocks_min, p.tokens_min) == (16, "cli", 4096, 87381,
                                                                                              1387000)
    with pytest.raises(VllmLogError, match=r"^block_size must be a positive integer, got 0$"):
        predict_cpu_from_log(start_of(GQA), spec_of(GQA), block_size=0)
    # kv_cache_dtype='fp8' given: 1 B elements, page 16,384 B, 2^30 // 49,152 = 21,845 blocks.
    p = predict_cpu_from_log(start_of(GQA), spec_of(GQA), kv_cache_dtype="fp8")
    assert (p.kv_cache_dtype, p.kv_element_bytes, p.page_bytes, p.blocks_min) == ("fp8", 1, 16384, 21845)
    # The fp8 start's own log says kv_cache_dtype=fp8 (and its capacity line agrees).
    fp8 = FIXTURES / "llama_gqa_fp8" / "kv1g_len1000.log"
    p = predict_cpu_from_log(start_of(fp8), spec_of(fp8))
    assert (p.kv_cache_dtype, p.kv_element_bytes, p.agrees) == ("fp8", 1, True)
    # A log without kv_cache_dtype: 'auto', the model's bf16 (2 B).
    p = predict_cpu_from_log(edited(GQA, ("kv_cache_dtype=auto, ", "")), spec_of(GQA))
    assert (p.kv_cache_dtype, p.kv_element_bytes, p.agrees) == ("auto", 2, True)
    # The model dtype the engine printed sets 'auto': float32 is 4 B, page 65,536 B, block 196,608 B;
    # 2^30 // 196,608 = 5,461 blocks; 125 x 5,461 = 682,625 tokens.
    p = predict_cpu_from_log(edited(GQA, ("dtype=torch.bfloat16", "dtype=torch.float32")), spec_of(GQA))
    assert (p.kv_element_bytes, p.page_bytes, p.blocks_min, p.tokens_min) == (4, 65536, 5461, 682625)


def test_batched_tokens_set_the_sliding_window_blocks():
    # gemma2_hybrid (window 256, 4,096 blocks at 1 GiB, see above) with max_num_batched_tokens 100:
    # sliding ceil(min(255 + 100, 1000) / 128) + 1 = 3 + 1 = 4, full 8: 12 per request;
    # int(4,096 / 12 x 1000) = 341,333 tokens. The log's own 4096 gives the printed 240,941.
    p = predict_cpu_from_log(start_of(GEMMA), spec_of(GEMMA), max_num_batched_tokens=100)
    assert p.tokens_min == 341333
    p = predict_cpu_from_log(edited(GEMMA, ("max_num_batched_tokens=4096", "max_num_batched_tokens=100")),
                             spec_of(GEMMA))
    assert p.tokens_min == 341333
    p = predict_cpu_from_log(edited(GEMMA, drop=("max_num_batched_tokens=4096",)), spec_of(GEMMA))
    assert p.tokens_min == 240941 and p.agrees is True


def test_group_sizes_line_missing_is_named():
    p = predict_cpu_from_log(edited(GEMMA, drop=("kv cache group sizes",)), spec_of(GEMMA))
    assert p.agrees is False and p.error_tokens == 0
    assert p.cause == "printed group block sizes none (one group), predicted (128, 128)"


def test_hybrid_as_full_attention_cause_text(tmp_path):
    config = json.loads((FIXTURES / "gemma2_hybrid" / "config.json").read_text())
    del config["layer_types"], config["sliding_window"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    p = predict_cpu_from_log(start_of(GEMMA), load_model(str(path)))
    assert p.cause.endswith("; printed group block sizes (128, 128), predicted none (one group)")


# gemma2_hybrid at max_model_len 1: full ceil(1 / 128) = 1, sliding ceil(min(255 + 4096, 1) / 128) + 1 = 2:
# 3 blocks per request, tokens int(N / 3): several block counts print the same tokens.
GEMMA_CAPACITY = "CPU KV cache size: 240,941 tokens, Maximum concurrency for 1,000 tokens per request: 240.94x"


def gemma_len1(tokens: str, concurrency: str):
    return edited(GEMMA, ("max_seq_len=1000,", "max_seq_len=1,"),
                  (GEMMA_CAPACITY, f"CPU KV cache size: {tokens} tokens, Maximum concurrency for 1 tokens per "
                                   f"request: {concurrency}x"))


def test_tokens_that_several_block_counts_print():
    # 4,096 blocks: int(4,096 / 3) = 1,365 tokens, 1365.33x. int(N / 3) = 1,365 for N = 4,095, 4,096, 4,097;
    # implied bytes [4,095 x 262,144, 4,098 x 262,144 - 1].
    p = predict_cpu_from_log(gemma_len1("1,365", "1365.33"), spec_of(GEMMA))
    assert (p.tokens_min, p.agrees, p.error_blocks, p.error_tokens) == (1365, True, 0, 0)
    assert (p.derived_blocks_min, p.derived_blocks_max) == (4095, 4097)
    assert (p.implied_available_bytes_min, p.implied_available_bytes_max) == (4095 * 262144, 4098 * 262144 - 1)
    # 2,000 tokens: N = 6,000 to 6,002; 6,000 - 4,096 = 1,904 blocks over; 2^30 / 6,000 = 178,956.97 B per
    # block, / 262,144 = 0.68x.
    p = predict_cpu_from_log(gemma_len1("2,000", "2000.00"), spec_of(GEMMA))
    assert (p.error_blocks, p.error_tokens) == (1904, 2000 - 1365)
    assert "imply about 178,957 B per block, 0.68x the 262,144 B" in p.reason
    # 0 tokens: N = 0 to 2; no ratio from zero blocks (and no division by it).
    p = predict_cpu_from_log(gemma_len1("0", "0.00"), spec_of(GEMMA))
    assert (p.derived_blocks_min, p.derived_blocks_max, p.error_blocks) == (0, 2, 2 - 4096)
    assert "imply about" not in p.reason and "10,922" not in p.reason and "4,096 blocks -- wrong model" in p.reason


def test_mla_notes_and_element_bytes():
    mla = FIXTURES / "deepseek_mla" / "kv1g_len1000.log"
    p = predict_cpu_from_log(start_of(mla), spec_of(mla))
    assert p.notes[-1] == "MLA on the AMX_MLA kernel: block size 128" and p.kv_element_bytes == 2
    p = predict_cpu_from_log(edited(mla, drop=("Using AMX_MLA backend.",)), spec_of(mla))
    assert p.notes[-1] == "MLA on the AMX_MLA (assumed) kernel: block size 128" and p.block_size == 128
    ref = FIXTURES / "deepseek_mla_ref" / "kv1g_len1000.log"
    assert predict_cpu_from_log(start_of(ref), spec_of(ref)).notes[-1] == "MLA on the CPU_MLA kernel: block size 16"
    # A block size given: no kernel note. fp8_ds_mla is a packed layout (656 B a token), so no element size.
    p = predict_cpu_from_log(start_of(mla), spec_of(mla), block_size=64, kv_cache_dtype="fp8_ds_mla")
    assert (p.block_size_source, len(p.notes), p.kv_element_bytes) == ("cli", 1, 0)


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(VllmLogError, match=r"^predict_cpu_from_log takes an EngineStart, not str$"):
        predict_cpu_from_log("log text", spec_of(GQA))
    with pytest.raises(VllmLogError, match=r"^predict_cpu_from_log takes a ModelSpec, not str$"):
        predict_cpu_from_log(start_of(GQA), "llama")
    with pytest.raises(VllmLogError, match=r"^log: no 'Explicitly set \(\.\.\.\) GiB for KV cache' line, so no KV "
                                           r"space to predict from$"):
        predict_cpu_from_log(edited(GQA, drop=("Explicitly set",)), spec_of(GQA))
    with pytest.raises(VllmLogError, match=r"^log: no 'Maximum concurrency for N tokens per request' line, so no "
                                           r"max_model_len$"):
        predict_cpu_from_log(edited(GQA, ("max_seq_len=1000,", ""), drop=("CPU KV cache size",)), spec_of(GQA))


# --- predict_cpu -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name, value", [("kv_space_bytes", 0), ("max_model_len", 0), ("max_num_batched_tokens", 0),
                                         ("block_size", 0), ("kv_space_bytes", 2.0), ("max_model_len", True),
                                         ("block_size", -16)])
def test_predict_cpu_bad_numbers(name, value):
    args = {"kv_space_bytes": GIB, "max_model_len": 1000}
    args[name] = value
    with pytest.raises(VllmLogError, match=rf"^{name} must be a positive integer, got {value!r}$"):
        predict_cpu(spec_of(GQA), **args)


def test_predict_cpu_smallest_numbers_are_allowed():
    # 1 B of space holds no 98,304 B block; 1 batched token; a 1-token block: 1 x 2 x 64 x 2 = 256 B pages.
    f = predict_cpu(spec_of(GQA), 1, 1, max_num_batched_tokens=1, block_size=1)
    assert (f.num_blocks, f.tokens, f.page_bytes, f.block_size, f.max_model_len) == (0, 0, 256, 1, 1)


def test_predict_cpu_every_field_and_settings():
    f = predict_cpu(spec_of(GQA), GIB, 1000)
    assert (f.block_size, f.page_bytes, f.group_size, f.groups, f.bytes_per_block) == (128, 32768, 3, ("full",), 98304)
    assert (f.num_blocks, f.blocks_per_request, f.tokens, f.concurrency, f.max_model_len) == (10922, 8, 1365250,
                                                                                               1365.25, 1000)
    assert f.group_block_sizes is None
    # block 16 (worked above): 87,381 blocks, 63 per request, 1,387,000 tokens
    f = predict_cpu(spec_of(GQA), GIB, 1000, block_size=16)
    assert (f.block_size, f.num_blocks, f.blocks_per_request, f.tokens) == (16, 87381, 63, 1387000)
    # model_dtype float32 with kv 'auto': 4 B elements, 5,461 blocks, 682,625 tokens (worked above)
    f = predict_cpu(spec_of(GQA), GIB, 1000, model_dtype="float32")
    assert (f.page_bytes, f.num_blocks, f.tokens) == (65536, 5461, 682625)
    # gemma2_hybrid, batched 100: 12 blocks per request, 341,333 tokens (worked above); two groups of 128
    f = predict_cpu(spec_of(GEMMA), GIB, 1000, max_num_batched_tokens=100)
    assert (f.blocks_per_request, f.tokens, f.group_block_sizes) == (12, 341333, (128, 128))


def test_log_block_size_from_the_backend_line():
    # deepseek_mla_ref prints block_size=16 in its config; without it the 'Using CPU_MLA backend.' line says 16,
    # and without that too the CPU default 128.
    from kvlib.vllm.cpu import log_block_size
    ref = FIXTURES / "deepseek_mla_ref" / "kv1g_len1000.log"
    assert log_block_size(start_of(ref)) == 16
    assert log_block_size(edited(ref, drop=("block_size=",))) == 16
    assert log_block_size(edited(ref, drop=("block_size=", "Using CPU_MLA backend."))) == 128
    assert log_block_size(start_of(GEMMA)) == 128


def test_predict_cpu_mla_default_is_the_amx_kernel():
    # deepseek_mla ran on a CPU with AMX tiles (AMX_MLA): the engine reported block 128; amx=False is the
    # reference kernel's 16 (deepseek_mla_ref's engine_reported block_size).
    mla = FIXTURES / "deepseek_mla" / "kv1g_len1000.log"
    assert predict_cpu(spec_of(mla), GIB, 1000).block_size == sidecar(mla)["engine_reported"]["block_size"] == 128
    ref = FIXTURES / "deepseek_mla_ref" / "kv1g_len1000.log"
    assert predict_cpu(spec_of(mla), GIB, 1000, amx=False).block_size == sidecar(ref)["engine_reported"]["block_size"]


def test_unmodelled_state_layer_is_refused(tmp_path):
    # A linear-attention layer in a model whose linear attention kvlib cannot size (no Gated DeltaNet fields,
    # as a Gemma 2 config edited by hand): its state page is unknown, so the pool is refused in one line
    # naming the field, never counted as a layer without a cache.
    config = json.loads((FIXTURES / "gemma2_hybrid" / "config.json").read_text())
    config["layer_types"][0] = "linear_attention"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(VllmLogError, match=r"^\w+: field layer_types\[0\] is "
                                           r"'linear_attention': kvlib does not model that layer's state"):
        predict_cpu(load_model(str(path)), GIB, 1000)


def test_log_without_parallel_sizes_means_one_rank():
    # No tensor_parallel_size / pipeline_parallel_size in the engine config line: one rank, one stage.
    start = edited(GQA, ("tensor_parallel_size=1, ", ""), ("pipeline_parallel_size=1, ", ""))
    p = predict_cpu_from_log(start, spec_of(GQA))
    assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.tokens_min, len(p.notes)) == (1, 1, 1365250, 1)


def test_more_tokens_than_a_range_allows():
    # 1.25 GiB (range 1,699,750 to 1,713,375 tokens, worked above); 2,000,000 printed (N = 16,000):
    # 2,000,000 - 1,713,375 = 286,625 tokens and 16,000 - 13,707 = 2,293 blocks over the top of the range.
    start = edited(GQA, ("(1.0/20.21)", "(1.25/20.21)"), ("1,365,250 tokens", "2,000,000 tokens"))
    p = predict_cpu_from_log(start, spec_of(GQA))
    assert (p.error_tokens, p.error_blocks) == (286625, 2293)


def test_ratio_uses_the_smallest_block_count():
    # gemma2_hybrid at max_model_len 1: 10 tokens = int(N / 3) for N = 30 to 32; 2^30 / 30 = 35,791,394.1 B
    # per block, / 262,144 = 136.53x (N = 32 would give 128.00x).
    p = predict_cpu_from_log(gemma_len1("10", "10.00"), spec_of(GEMMA))
    assert "imply about 35,791,394 B per block, 136.53x the 262,144 B" in p.reason


# --- hybrids: state layers, local attention, per-layer geometry ------------------------------------
# Each start worked by hand from its config.json (the comments in tools/engine_fixtures.py), vLLM 0.32.0's CPU
# rules: block 128; the state's SSM / recurrent part in float32 (the capture CPU has AVX-512 BF16, sidecar
# cpu_flags), the conv part in bf16; the attention block grows to 128 x ceil(S / (128 x P_token)) and the state
# page is padded up (platforms/interface.py _align_hybrid_block_size); 'align' mode (prefix caching on): 2 pages
# a request per state group, 3 for Mamba2 (MambaMixer2's prefill checkpoint); F = 4,096 batched tokens.
#   qwen3_next_gdn: S = conv 3 x 768 x 2 + recurrent 8 x 64 x 64 x 4 = 4,608 + 131,072 = 135,680; P = 512:
#     block 128 x ceil(135,680 / 65,536) = 384, page 196,608, padding 60,928 / 135,680 = 44.91%; 6 GDN + 2 full:
#     groups of 2 (1 full + 3 GDN), block 393,216 B. 1 GiB: 2,730 blocks; 1000 tokens: ceil(1000 / 384) = 3
#     + 3 x 2 = 9 per request. 2 GiB: 5,461; 6000 tokens: 16 + 6 = 22.
#   nemotron_h_pattern: S = conv 3 x 512 x 2 + ssm 8 x 32 x 64 x 4 = 3,072 + 65,536 = 68,608; P = 256 (1 KV
#     head): block 128 x ceil(68,608 / 32,768) = 384, page 98,304, padding 29,696 / 68,608 = 43.28%; 6 Mamba2 +
#     2 attention: groups of 2, block 196,608 B. 1 GiB: 5,461; 1000: 3 + 3 x 3 = 12. 2 GiB: 10,922; 6000: 16 + 9.
#   nemotron_h_layers: S = conv 3 x 192 x 2 + ssm 4 x 32 x 32 x 4 = 1,152 + 16,384 = 17,536 < 128 x 512:
#     block 128, page 65,536, padding 48,000 / 17,536 = 273.72%; 5 Mamba2 + 2 attention: groups of 2, 1 + 3
#     (a padding layer), block 131,072 B. 1 GiB: 8,192; 1000: 8 + 9 = 17. 2 GiB: 16,384; 6000: 47 + 9 = 56.
#   gemma3_local: 15 sliding (512) + 2 full, page 65,536: groups of 2, 8 sliding + 1 full, block 131,072 B.
#     1000: 8 + 8 x (ceil(min(511 + 4,096, 1000) / 128) + 1 = 9) = 80; 6000: 47 + 8 x (36 + 1) = 343.
#   llama4_chunked: 6 chunked (512) + 2 full: groups of 2, 3 chunked + 1 full, block 131,072 B.
#     1000: 8 + 3 x ceil(min(512 + 4,096, 1000) / 128) = 8 + 24 = 32; 6000: 47 + 3 x 36 = 155.
#   gpt_oss_sinks: 3 sliding (128) + 3 full: groups of 3, block 196,608 B. 1 GiB: 5,461; 1000: 8 + 9 = 17;
#     2 GiB: 10,922; 6000: 47 + ceil(4,223 / 128) + 1 = 47 + 34 = 81.
#   gemma4_per_layer: sliding 2 x 2 x 64 x 2 = 512 B a token, full 2 x 1 x 512 x 2 = 2,048: pages 65,536 and
#     262,144 at 128 tokens; the sliding layers' block becomes 4 x 128 = 512. Groups of 1: 5 sliding + 1 full,
#     block 262,144 B. 1 GiB: 4,096; 1000: 8 + 5 x (ceil(1000 / 512) + 1 = 3) = 23; 2 GiB: 8,192; 6000: 47 + 5 x
#     (ceil(4,607 / 512) + 1 = 10) = 97.
# (geometry, block, page, group size, groups, blocks at 1 GiB, bpr at 1000, blocks at 2 GiB, bpr at 6000,
#  printed group block sizes, printed padding, whether 'Setting attention block size' was printed)
HYBRIDS = [
    ("qwen3_next_gdn", 384, 196608, 2, 4, 2730, 9, 5461, 22, (384,) * 4, "44.91", True),
    ("nemotron_h_pattern", 384, 98304, 2, 4, 5461, 12, 10922, 25, (384,) * 4, "43.28", True),
    ("nemotron_h_layers", 128, 65536, 2, 4, 8192, 17, 16384, 56, (128,) * 4, "273.72", False),
    ("gemma3_local", 128, 65536, 2, 9, 8192, 80, 16384, 343, (128,) * 9, None, False),
    ("llama4_chunked", 128, 65536, 2, 4, 8192, 32, 16384, 155, (128,) * 4, None, False),
    ("gpt_oss_sinks", 128, 65536, 3, 2, 5461, 17, 10922, 81, (128, 128), None, False),
    ("gemma4_per_layer", 128, 262144, 1, 6, 4096, 23, 8192, 97, (512,) * 5 + (128,), None, False),
]
HYBRID_GEOMETRIES = [h[0] for h in HYBRIDS]


@pytest.mark.parametrize("name, block, page, group_size, n_groups, n1, bpr1, n2, bpr2, groups, padding, grew",
                         HYBRIDS, ids=HYBRID_GEOMETRIES)
def test_hybrid_starts_worked_by_hand(name, block, page, group_size, n_groups, n1, bpr1, n2, bpr2, groups, padding,
                                      grew):
    for run, blocks, bpr, mml in (("kv1g_len1000", n1, bpr1, 1000), ("kv2g_len6000", n2, bpr2, 6000)):
        log = FIXTURES / name / f"{run}.log"
        want, engine = printed(log), sidecar(log)["engine_reported"]
        # the engine's own figures against the hand arithmetic (int(N / bpr x mml) tokens, N / bpr printed)
        assert (engine["block_size"], engine["num_gpu_blocks"]) == (block, blocks)
        assert engine["kv_cache_size_tokens"] == want["tokens"] == int(blocks / bpr * mml)
        assert want["concurrency"] == f"{blocks / bpr:.2f}" and want["groups"] == groups
        text = log.read_text()
        assert (f"Padding mamba page size by {padding}%" in text) is (padding is not None)
        assert (f"Setting attention block size to {block} tokens" in text) is grew
        # kvlib, from the log
        p = predict_cpu_from_log(start_of(log), spec_of(log))
        assert (p.block_size, p.page_bytes, p.bytes_per_block, p.kv_cache_groups) == (
            block, page, group_size * page, n_groups)
        assert (p.blocks_min, p.tokens_min, p.kv_cache_group_block_sizes, p.agrees) == (
            blocks, want["tokens"], groups, True)


def test_hybrid_reader_takes_the_state_lines():
    start = start_of(FIXTURES / "qwen3_next_gdn" / "kv1g_len1000.log")
    assert (start.block_size, start.mamba_padding_text, start.mamba_cache_mode) == (384, "44.91", "align")
    assert (start.mamba_ssm_cache_dtype, start.enable_prefix_caching) == ("float32", True)
    assert "attention block size" in start.block_size_line
    start = start_of(FIXTURES / "nemotron_h_pattern" / "kv1g_len1000.log")
    assert start.mamba_ssm_cache_dtype == "float32"     # 'Updating mamba_ssm_cache_dtype to 'float32' for NemotronH'


def test_state_page_dtype_decides_the_block():
    # The same GDN start on a CPU without AVX-512 BF16 (no 'Reset SSM cache type' line): the recurrent state
    # stays bf16, S = 4,608 + 8 x 64 x 64 x 2 = 70,144, so the block is 128 x ceil(70,144 / 65,536) = 256 and
    # the page 131,072 (padding 60,928 / 70,144 = 86.86%): the log's 384 no longer agrees, and the cause says so.
    log = FIXTURES / "qwen3_next_gdn" / "kv1g_len1000.log"
    start = edited(log, drop=("Reset SSM cache type",))
    p = predict_cpu_from_log(start, spec_of(log))
    assert p.block_size == 256 and p.agrees is False
    assert "printed attention block size 384, predicted 256" in p.cause
    assert "printed state-page padding 44.91%, predicted 86.86%" in p.cause
    f = predict_cpu(spec_of(log), GIB, 1000, avx512_bf16=False)
    assert (f.block_size, f.plan.state_page_bytes, f.plan.padding_text) == (256, 70144, "86.86")


def test_mamba_cache_mode_none_from_the_log():
    # prefix caching off: 'none' mode, one state page a request per state group. qwen3_next_gdn at 1 GiB:
    # 2,730 blocks, 3 + 3 x 1 = 6 a request: 455.00x, 455,000 tokens.
    log = FIXTURES / "qwen3_next_gdn" / "kv1g_len1000.log"
    start = edited(log, ("enable_prefix_caching=True", "enable_prefix_caching=False"), drop=("Mamba cache mode",))
    p = predict_cpu_from_log(start, spec_of(log))
    assert (p.tokens_min, p.concurrency_min) == (455000, 455.0)
    assert predict_cpu(spec_of(log), GIB, 1000, mamba_cache_mode="none").tokens == 455000


def test_hybrid_note_says_what_the_state_does():
    log = FIXTURES / "qwen3_next_gdn" / "kv1g_len1000.log"
    p = predict_cpu_from_log(start_of(log), spec_of(log))
    assert p.block_size_source == "hybrid alignment"
    assert ("state layers: a 135,680 B state page; the attention block grows from 128 to 384 tokens to cover it, "
            "the state padded by 44.91%; 2 state page(s) per request per state group (mamba_cache_mode 'align')"
            in p.notes)


@pytest.mark.parametrize("name", ["qwen3_next_gdn", "nemotron_h_layers", "gemma4_per_layer"])
def test_cli_json_agrees_on_hybrid_starts(capsys, name):
    log = FIXTURES / name / "kv2g_len6000.log"
    code, out, err = cli(capsys, "vllm-log", str(log), "--model", str(log.parent / "config.json"), "--json")
    r = json.loads(out)
    assert code == 0 and err == "" and r["agrees"] is True
    assert r["predicted_tokens_min"] == r["gpu_kv_cache_tokens"] == printed(log)["tokens"]
    assert r["predicted_kv_cache_group_block_sizes"] == list(printed(log)["groups"])
    # what the start printed about its state page, against kvlib's plan (None where the model has no state)
    hybrid = r["predicted_hybrid"]
    assert hybrid["attention_block_size_printed"] == r["attention_block_size_printed"]
    assert hybrid["mamba_padding_percent"] == r["mamba_padding_percent_printed"]
