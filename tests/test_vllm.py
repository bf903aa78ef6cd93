"""Tests for kvlib.vllm: the log parser, the backward and forward predictions.

Expected values come from the sidecars (kvlib/data/vllm_logs/NN.json, loaded
here), from the notes (shared/notes/vllm-kv-accounting.md, quoted by section),
or from arithmetic written out in the test. Each names its source.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvlib
from kvlib import ConfigError, GiB, load_model, parse_config
from kvlib.vllm import (
    EngineStart,
    VllmLogError,
    default_utilization,
    gib_window,
    kv_cache_groups,
    layer_page_bytes,
    parse_log,
    parse_version,
    pp_layer_split,
    predict_from_log,
    predict_pool,
    report,
)

LOG_DIR = Path(kvlib.__file__).parent / "data" / "vllm_logs"
LOGS = sorted(p.stem for p in LOG_DIR.glob("*.log"))


def log_text(name: str) -> str:
    return (LOG_DIR / f"{name}.log").read_text(encoding="utf-8")


def sidecar(name: str) -> dict:
    return json.loads((LOG_DIR / f"{name}.json").read_text(encoding="utf-8"))


def window_blocks(gib_text: str, bytes_per_block: int) -> tuple[int, int]:
    """Independent arithmetic (notes, 'Working backwards from the log'):
    bytes in [(X - 0.005) * 2^30, (X + 0.005) * 2^30), N = bytes // B."""
    x = Fraction(gib_text)
    lo = math.ceil((x - Fraction(5, 1000)) * 2**30)
    hi = math.ceil((x + Fraction(5, 1000)) * 2**30) - 1
    return lo // bytes_per_block, hi // bytes_per_block


def spec_from_model_kv(model_kv: dict, name: str):
    """A ModelSpec from a sidecar's model_kv. vocab_size and intermediate_size
    only change the parameter count, never the KV cache, so they are placeholders."""
    cfg = {k: model_kv[k] for k in ("num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                    "head_dim") if k in model_kv}
    cfg["hidden_size"] = model_kv.get("hidden_size", cfg["num_attention_heads"] * cfg["head_dim"])
    cfg.update(vocab_size=1000, intermediate_size=1000)
    return parse_config(cfg, name=name)


def spec_for(name: str):
    """The model a log ran: bundled when kvlib ships its config, else built from the sidecar."""
    side = sidecar(name)
    if name == "14":
        # Sidecar 14: DeepSeek-V3-0324-AWQ; AWQ changes the weights, not the MLA geometry
        # (model_kv: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64), which DeepSeek-V3 bundles.
        return load_model("deepseek-ai/DeepSeek-V3")
    try:
        return load_model(side["model"])
    except ConfigError:
        return spec_from_model_kv(side["model_kv"], side["model"])


# --- the parser against every real log -------------------------------------------------
def test_every_log_has_a_sidecar():
    assert LOGS, "no bundled logs found"
    for name in LOGS:
        assert (LOG_DIR / f"{name}.json").is_file(), name


def expected_starts(name: str) -> list[dict]:
    """One dict per engine start: the sidecar's 'reported' block plus its additional_runs."""
    side = sidecar(name)
    first = dict(side["reported"])
    first["max_model_len"] = side["max_model_len"]
    runs = [first]
    for extra in side.get("additional_runs", []):
        runs.append({k: v for k, v in extra.items() if k not in ("model", "model_kv", "note")})
    return runs


AS_PRINTED = {  # sidecar key -> EngineStart attribute
    "available_kv_cache_gib": "available_kv_cache_gib",
    "gpu_kv_cache_tokens": "gpu_kv_cache_tokens",
    "num_gpu_blocks": "num_gpu_blocks",
    "num_cpu_blocks": "num_cpu_blocks",
    "model_weights_gib": "model_weights_gib",
    "total_gpu_memory_gib": "total_gpu_memory_gib",
    "activation_peak_gib": "activation_peak_gib",
    "non_torch_gib": "non_torch_gib",
    "peak_torch_gib": "peak_torch_gib",
    "max_model_len": "max_model_len",
}


@pytest.mark.parametrize("name", LOGS)
def test_parse_matches_sidecar(name):
    text, side = log_text(name), sidecar(name)
    starts = parse_log(text)
    expected = expected_starts(name)
    assert len(starts) == len(expected)                          # sidecar: reported + additional_runs
    for i, (start, exp) in enumerate(zip(starts, expected)):
        assert isinstance(start, EngineStart)
        assert start.index == i
        assert start.engine == side["engine"].lower()            # sidecar 'engine'
        for key, attr in AS_PRINTED.items():
            if key in exp:
                assert getattr(start, attr) == exp[key], (name, i, key)
        conc = exp.get("max_concurrency")
        if conc is not None:
            assert start.max_concurrency == conc["x"]              # sidecar max_concurrency.x
            assert start.max_model_len == conc["tokens_per_request"]
        elif "max_concurrency" in exp:
            assert start.max_concurrency is None
    # Fields a log may or may not print: the sidecar's value where the log text carries it.
    first = starts[0]
    if side["vllm_version"] and side["vllm_version"] in text:
        assert first.vllm_version == side["vllm_version"]
    else:
        assert first.vllm_version is None
    if "tensor_parallel_size=" in text:
        assert first.tensor_parallel_size == side["tensor_parallel_size"]
    else:
        assert first.tensor_parallel_size is None


@pytest.mark.parametrize("name", LOGS)
def test_derived_figures_match_sidecar(name):
    reported = sidecar(name)["reported"]
    r = report(parse_log(log_text(name))[0])
    # Sidecar 'num_gpu_blocks_derived' (tokens / 16) and 'gpu_kv_cache_tokens_derived' (blocks x 16);
    # sidecar 05 gives its derivation in the check note instead ('79392/16 = 4962 blocks').
    if "num_gpu_blocks_derived" in reported:
        assert r["derived_num_gpu_blocks"] == reported["num_gpu_blocks_derived"]
    elif r["derived_num_gpu_blocks"] is not None:
        assert f"= {r['derived_num_gpu_blocks']} blocks" in sidecar(name)["check"]["note"]
    else:
        assert reported["gpu_kv_cache_tokens"] is None
    if "gpu_kv_cache_tokens_derived" in reported:
        assert r["derived_gpu_kv_cache_tokens"] == reported["gpu_kv_cache_tokens_derived"]
    assert r["block_size"] == sidecar(name)["block_size"] == 16   # sidecar block_size; no log prints one
    assert r["block_size_source"] == "default"


def test_weights_printed_in_mb_are_kept_as_text():
    # Sidecar 02: model_weights_gib null, note "'Loading model weights took 244.61 MB'".
    start = parse_log(log_text("02"))[0]
    assert start.model_weights_gib is None
    assert start.model_weights_text == "244.61 MB"
    assert "244.61 MB" in sidecar("02")["reported"]["model_weights_note"]


def test_engine_config_fields_of_log_14():
    # 14.log's engine-config line: dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=16,
    # pipeline_parallel_size=1, kv_cache_dtype=auto, 'Initializing a V0 LLM engine (v0.8.3rc2.dev224+g49c0d11ec)'.
    start = parse_log(log_text("14"))[0]
    assert (start.dtype, start.max_model_len, start.tensor_parallel_size, start.pipeline_parallel_size,
            start.kv_cache_dtype) == ("bfloat16", 8192, 16, 1, "auto")
    assert start.engine == "v0" and "V0" in start.engine_evidence
    assert start.version_tuple == (0, 8, 3)
    assert start.gpu_memory_utilization == sidecar("14")["gpu_memory_utilization"]   # 0.99


# --- prediction backwards from the log ------------------------------------------------------
CHECKED = [("07", 0), ("07", 1), ("12", 0), ("20", 0)]  # logs with an available figure and a count


@pytest.mark.parametrize("name,run", CHECKED)
def test_logged_count_lies_in_predicted_range(name, run):
    side = sidecar(name)
    start = parse_log(log_text(name))[run]
    p = predict_from_log(start, spec_for(name))
    assert p.agrees is True, p.reason
    assert p.error_blocks == 0
    # Independent: the sidecar's bytes per 16-token block and the printed GiB figure.
    expected = window_blocks(start.available_kv_cache_text, side["model_kv"]["bytes_per_block16"])
    assert (p.blocks_min, p.blocks_max) == expected
    # The sidecar's hand-computed token range for that GiB rounding window.
    hand = side["check"] if run == 0 else side["additional_runs"][run - 1]
    assert [p.tokens_min, p.tokens_max] == hand["predicted_range_for_rounding"]


def test_log_14_prediction_equals_sidecar_hand_range():
    # Sidecar 14 check.predicted_range_for_rounding [23904, 24064] tokens; no logged count.
    side = sidecar("14")
    start = parse_log(log_text("14"))[0]
    p = predict_from_log(start, spec_for("14"))
    assert [p.tokens_min, p.tokens_max] == side["check"]["predicted_range_for_rounding"]
    # MLA: 61 layers x 16 tokens x (512 + 64) x 2 B, no factor 2, not split over the 16 TP ranks.
    assert p.bytes_per_block == 61 * 16 * 576 * 2 == side["model_kv"]["bytes_per_block16"]
    assert p.agrees is None and p.compared is None
    assert "nothing to compare" in p.reason


def test_logs_without_available_figure_imply_a_pool():
    # Sidecar 16: 'Implied pool 19.3672 GiB' = 9916 blocks (num_gpu_blocks_derived) x 2 MiB (bytes_per_block16).
    side = sidecar("16")
    p = predict_from_log(parse_log(log_text("16"))[0], spec_from_model_kv(side["model_kv"], side["model"]))
    n, b = side["reported"]["num_gpu_blocks_derived"], side["model_kv"]["bytes_per_block16"]
    assert p.agrees is None and p.blocks_min is None
    assert (p.implied_available_bytes_min, p.implied_available_bytes_max) == (n * b, (n + 1) * b - 1)
    assert round(n * b / GiB, 4) == 19.3672
    # Sidecar 17: TP 4 -> 1 KV head per rank, 393216 B per block per rank; 'Implied per-rank pool 4.5498 GiB'.
    side = sidecar("17")
    p = predict_from_log(parse_log(log_text("17"))[0], spec_from_model_kv(side["model_kv"], side["model"]), tp=4)
    assert p.bytes_per_block == side["model_kv"]["bytes_per_block16_per_rank"]
    assert round(p.implied_available_bytes_min / GiB, 4) == 4.5498


def test_hybrid_sliding_window_log_25():
    # Sidecar 25 (gpt-oss-120b): 36 layers alternating sliding/full (18 + 18), 8 KV heads x 64, window 128,
    # 32,768 B per layer per 16-token block (page_bytes_per_layer_block16). Notes section 3: equal buckets ->
    # group_size 18, two groups, B = 18 x page; before 0.20 tokens = (N // 2) x 16.
    side = sidecar("25")
    mk = side["model_kv"]
    spec = parse_config({"model_type": "gpt_oss", "num_hidden_layers": 36, "num_attention_heads": 64,
                         "num_key_value_heads": 8, "head_dim": 64, "hidden_size": 2880, "vocab_size": 1000,
                         "intermediate_size": 1000, "sliding_window": mk["sliding_window"],
                         "layer_types": ["sliding_attention", "full_attention"] * 18}, name=side["model"])
    start = parse_log(log_text("25"))[0]
    p = predict_from_log(start, spec, version="0.11.0")            # sidecar: ~v0.11.0
    b = 18 * mk["page_bytes_per_layer_block16"]
    n_min, n_max = window_blocks("1.71", b)
    assert (p.blocks_min, p.blocks_max, p.kv_cache_groups) == (n_min, n_max, 2)
    assert n_min <= 3113 <= n_max                                   # sidecar note: '~3,113 blocks'
    assert (p.tokens_min, p.tokens_max) == ((n_min // 2) * 16, (n_max // 2) * 16)
    assert p.agrees is None


def test_wrong_model_disagrees_with_a_cause():
    # 12.log ran Llama-2-7B (MHA, 32 KV heads, 8 MiB per block); Llama-3.1-8B has 8 KV heads, 2 MiB per block.
    start = parse_log(log_text("12"))[0]
    p = predict_from_log(start, load_model("meta-llama/Llama-3.1-8B"))
    assert p.agrees is False
    assert (p.blocks_min, p.blocks_max) == window_blocks("56.18", 32 * 16 * 2 * 8 * 128 * 2)
    assert p.error_blocks == 7191 - p.blocks_min                   # sidecar 12: 7191 logged blocks
    assert "wrong model" in p.cause
    assert "4.00x" in p.cause                                       # 32 KV heads / 8 KV heads
    assert "wrong model" in p.reason


def test_tp_not_accounted_is_named():
    # Llama 3.3 70B at TP 4: 80 layers x 16 x 2 (K, V) x 2 heads x 128 x 2 B = 1,310,720 B per block
    # (notes' table: 1.25 MiB). 20.00 GiB / 1.25 MiB = 16384 blocks = 262,144 tokens.
    b = 80 * 16 * 2 * 2 * 128 * 2
    assert b == 1310720
    n = 20 * 2**30 // b
    log = (f"(VllmWorker rank=0 pid=11) INFO 04-29 01:07:41 [gpu_worker.py:1] Available KV cache memory: 20.00 GiB\n"
           f"INFO 04-29 01:09:49 [kv_cache_utils.py:634] GPU KV cache size: {n * 16:,} tokens\n")
    start = parse_log(log)[0]
    spec = load_model("llama-3.3-70b")
    wrong = predict_from_log(start, spec)
    assert wrong.agrees is False
    assert "TP not accounted" in wrong.cause and "tensor_parallel_size=4" in wrong.cause
    right = predict_from_log(start, spec, tp=4)
    assert right.agrees is True and right.bytes_per_block == b


def test_block_size_printed_wins_and_override_wins_over_it():
    log = ("Initializing an LLM engine (v0.6.4) with config: model='x', dtype=torch.float16, max_seq_len=4096, "
           "block_size=32, tensor_parallel_size=1, kv_cache_dtype=auto\n"
           "Memory profiling results: total_gpu_memory=79.19GiB kv_cache_size=56.18GiB gpu_memory_utilization=0.90\n"
           "# GPU blocks: 3595, # CPU blocks: 256\n")
    start = parse_log(log)[0]
    assert start.block_size == 32
    spec = load_model("llama-2-7b")
    p = predict_from_log(start, spec)
    # Llama 2 7B, bs 32: 32 layers x 32 x 2 x 32 heads x 128 x 2 B = 16 MiB per block.
    assert (p.block_size, p.block_size_source, p.bytes_per_block) == (32, "log", 16 * 2**20)
    assert (p.blocks_min, p.blocks_max) == window_blocks("56.18", 16 * 2**20)
    assert p.agrees is True                                         # 3595 = 56.18 x 64, rounded down
    q = predict_from_log(start, spec, block_size=16)
    assert (q.block_size, q.block_size_source) == (16, "cli") and q.agrees is False


def test_fp8_kv_cache_halves_the_block():
    log = ("Initializing a V1 LLM engine (v0.10.1) with config: model='meta-llama/Llama-3.1-8B', "
           "dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=1, pipeline_parallel_size=1, "
           "kv_cache_dtype=fp8, device_config=cuda\n"
           "Available KV cache memory: 10.00 GiB\n")
    start = parse_log(log)[0]
    p = predict_from_log(start, load_model("llama-3.1-8b"))
    # 32 layers x 16 x 2 x 8 heads x 128 x 1 B = 1 MiB per block.
    assert (p.kv_element_bytes, p.bytes_per_block) == (1, 2**20)
    assert (p.blocks_min, p.blocks_max) == window_blocks("10.00", 2**20)


def test_pipeline_parallel_uses_the_busiest_stage():
    # notes section 3: only the rank's own PP-stage layers count; vLLM gives the remainder to stages
    # before the last: 61 layers over 2 stages -> 31 + 30.
    assert pp_layer_split(61, 2) == [31, 30]
    log = "Available KV cache memory: 1.57 GiB\n"
    start = parse_log(log)[0]
    p = predict_from_log(start, load_model("deepseek-v3"), pp=2)
    b_big, b_small = 31 * 16 * 576 * 2, 30 * 16 * 576 * 2
    lo, hi = gib_window("1.57")
    assert (p.blocks_min, p.blocks_max) == (lo // b_big, hi // b_small)


def test_page_sizes_from_the_notes():
    # notes section 3: full attention 2 x bs x kv_heads_rank x head_dim x bytes; MLA one 576-wide latent;
    # heads per rank = max(1, K // tp), replicated past K.
    llama = load_model("llama-3.1-8b")
    assert layer_page_bytes(llama, 16) == 2 * 16 * 8 * 128 * 2
    assert layer_page_bytes(llama, 16, tp=16) == 2 * 16 * 1 * 128 * 2
    assert layer_page_bytes(load_model("deepseek-v3"), 16, tp=8) == 16 * 576 * 2
    assert layer_page_bytes(load_model("deepseek-v3"), 16, "fp8_ds_mla") == 16 * 656   # notes: 656 B per token
    assert layer_page_bytes(load_model("deepseek-v3"), 16, mla_pad_256=True) == 16 * 1280  # notes: V0 640 elements
    with pytest.raises(VllmLogError):
        layer_page_bytes(llama, 16, tp=3)


def test_group_size_rules():
    # notes section 3: smallest bucket, or the largest if largest < 1.5 x smallest (1.25 in 0.14, smallest in 0.10).
    kinds = ["full"] * 8 + ["sliding"] * 11         # 11 < 1.5 x 8 = 12 -> 11; 11 >= 1.25 x 8 = 10 -> 8
    assert kv_cache_groups(kinds, "1.5") == (11, ("full", "sliding"))
    assert kv_cache_groups(kinds, "1.25") == (8, ("full", "sliding", "sliding"))
    assert kv_cache_groups(kinds, "smallest") == (8, ("full", "sliding", "sliding"))


def test_v020_token_formula_truncates():
    # notes section 4: from 0.20 tokens = int(concurrency x max_model_len) with concurrency = N / bpr;
    # max_model_len 1000 is not a multiple of 16, so bpr = ceil(1000 / 16) = 63 and tokens < N x 16.
    log = ("Initializing a V1 LLM engine (v0.20.2) with config: model='m', dtype=torch.bfloat16, max_seq_len=1000, "
           "tensor_parallel_size=1, pipeline_parallel_size=1, kv_cache_dtype=auto\n"
           "Available KV cache memory: 10.0 GiB\n")
    start = parse_log(log)[0]
    p = predict_from_log(start, load_model("llama-3.1-8b"))
    lo, hi = gib_window("10.0")
    n_min, n_max = lo // 2**21, hi // 2**21
    assert (p.tokens_min, p.tokens_max) == (int(n_min / 63 * 1000), int(n_max / 63 * 1000))
    assert p.tokens_max < n_max * 16


# --- the parser on synthetic logs built from real line formats ----------------------------------
def test_prefixes_and_ansi_are_stripped():
    plain = parse_log(log_text("20"))[0]
    noisy = "\n".join(
        f"vllm-server-1  | \x1b[1;36m{line}\x1b[0m" if i % 2 else f">> \x1b[32m{line}"
        for i, line in enumerate(log_text("20").splitlines()))
    start = parse_log(noisy)[0]
    for attr in ("engine", "available_kv_cache_text", "gpu_kv_cache_tokens", "max_model_len", "max_concurrency"):
        assert getattr(start, attr) == getattr(plain, attr)
    assert start.gpu_kv_cache_tokens == sidecar("20")["reported"]["gpu_kv_cache_tokens"]


def test_gib_window_is_exactly_the_rounding_window():
    # notes: X printed means bytes in [(X - 0.005) 2^30, (X + 0.005) 2^30)
    lo, hi = gib_window("3.81")
    assert lo == math.ceil(Fraction("3.805") * 2**30)
    assert hi == math.ceil(Fraction("3.815") * 2**30) - 1
    assert gib_window("15.0") == gib_window("15.00")                # format_gib drops trailing zeros


def test_several_starts_are_reported_each():
    # 07.log holds two runs (sidecar 07 'additional_runs'); one of its block lines lost its '# '.
    first, second = parse_log(log_text("07"))
    assert (first.num_gpu_blocks, second.num_gpu_blocks) == (1952, 1478)
    assert first.last_line < second.first_line
    # Two V1 starts back to back: the second engine-config line begins a new start.
    config = ("INFO 09-10 13:29:00 [core.py:70] Initializing a V1 LLM engine (v0.10.1) with config: "
              "model='Qwen/Qwen3-0.6B', dtype=torch.bfloat16, max_seq_len=4096, tensor_parallel_size=1, "
              "pipeline_parallel_size=1, kv_cache_dtype=auto")
    starts = parse_log(config + "\n" + log_text("20") + config + "\n" + log_text("20"))
    assert len(starts) == 2
    assert all(s.gpu_kv_cache_tokens == 652144 and s.vllm_version == "0.10.1" for s in starts)


def test_tp_ranks_take_the_smallest_figure():
    # Real 0.10 formats: per-worker 'Available KV cache memory', then EngineCore's capacity lines, one per
    # rank in 0.10 (notes section 4). The pool is sized by the smallest rank.
    log = "\n".join([
        "(EngineCore_0 pid=100) INFO 08-01 10:00:00 [core.py:74] Initializing a V1 LLM engine (v0.10.1) with "
        "config: model='meta-llama/Llama-3.3-70B-Instruct', dtype=torch.bfloat16, max_seq_len=8192, "
        "tensor_parallel_size=2, pipeline_parallel_size=1, kv_cache_dtype=auto, device_config=cuda",
        "(VllmWorker TP0 pid=101) INFO 08-01 10:01:00 [gpu_worker.py:276] Available KV cache memory: 30.12 GiB",
        "(VllmWorker TP1 pid=102) INFO 08-01 10:01:00 [gpu_worker.py:276] Available KV cache memory: 29.98 GiB",
        "(EngineCore_0 pid=100) INFO 08-01 10:01:01 [kv_cache_utils.py:849] GPU KV cache size: 197,376 tokens",
        "(EngineCore_0 pid=100) INFO 08-01 10:01:01 [kv_cache_utils.py:853] Maximum concurrency for 8,192 "
        "tokens per request: 24.09x",
        "(EngineCore_0 pid=100) INFO 08-01 10:01:01 [kv_cache_utils.py:849] GPU KV cache size: 196,448 tokens",
        "(EngineCore_0 pid=100) INFO 08-01 10:01:01 [kv_cache_utils.py:853] Maximum concurrency for 8,192 "
        "tokens per request: 23.98x",
    ])
    [start] = parse_log(log)
    assert start.available_kv_cache_text == "29.98"
    assert start.available_kv_cache_bytes == round(Fraction("29.98") * 2**30)
    assert len(start.available_kv_cache_by_rank) == 2
    assert (start.gpu_kv_cache_tokens, start.max_concurrency) == (196448, 23.98)
    # V0 summaries from several workers (14.log's format): again the smallest.
    v0 = "\n".join(
        f"(VllmWorkerProcess pid={pid}) INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; "
        f"non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the "
        f"memory reserved for KV Cache is {gib}GiB." for pid, gib in ((1, "1.57"), (2, "1.49"), (3, "1.61")))
    [start] = parse_log(v0)
    assert start.available_kv_cache_text == "1.49" and start.engine == "v0"


def test_033_combined_capacity_line():
    # notes section 4: 0.33 prints 'GPU KV cache size: %s tokens, Maximum concurrency for %s tokens per
    # request: %.2fx' as one line; tokens = int(concurrency x max_model_len).
    log = ("(EngineCore pid=9) INFO 03-02 10:00:00 [kv_cache_utils.py:1288] GPU KV cache size: 652,144 tokens, "
           "Maximum concurrency for 4,096 tokens per request: 159.21x\n")
    [start] = parse_log(log)
    assert (start.gpu_kv_cache_tokens, start.max_model_len, start.max_concurrency) == (652144, 4096, 159.21)
    assert start.combined_capacity_line and start.engine == "v1"
    start = parse_log("Available KV cache memory: 69.66 GiB\n" + log)[0]
    p = predict_from_log(start, load_model("qwen3-0.6b"))
    assert p.agrees is True
    assert p.scenarios == ("V1, tokens = int(N / blocks_per_request x max_model_len)",)


def test_v0_profiling_summary():
    # 12.log's summary (sidecar 12 reported: total 79.19, weights 12.55, non-torch 0.16, activation 2.38,
    # available 56.18; sidecar gpu_memory_utilization 0.9).
    start = parse_log(log_text("12"))[0]
    reported = sidecar("12")["reported"]
    assert (start.total_gpu_memory_gib, start.gpu_memory_utilization) == (
        reported["total_gpu_memory_gib"], sidecar("12")["gpu_memory_utilization"])
    assert (start.model_weights_gib, start.non_torch_gib, start.activation_peak_gib, start.available_kv_cache_gib) == (
        reported["model_weights_gib"], reported["non_torch_gib"], reported["activation_peak_gib"],
        reported["available_kv_cache_gib"])
    assert start.available_kv_cache_source == "V0 memory profiling summary"


def test_v0_block_line_variants():
    # Formats from the notes (section 4) and logs 02, 07, 12: '# GPU blocks', '# cuda blocks', '# CUDA blocks',
    # a line that lost '# ', and 0.7.3 V1's '# GPU blocks: %d' without CPU blocks.
    for line, engine in (("# GPU blocks: 76240, # CPU blocks: 7281", "v0"),
                         ("# cuda blocks: 7191, # CPU blocks: 512", "v0"),
                         ("# CUDA blocks: 10, # CPU blocks: 2", "v0"),
                         ("GPU blocks: 1952, # CPU blocks: 2048", "v0"),
                         ("INFO 03-14 18:57:59 [kv_cache_utils.py:1] # GPU blocks: 4739", "v1")):
        [start] = parse_log(line)
        assert start.engine == engine, line
        assert start.num_gpu_blocks == int(line.split("blocks: ")[1].split(",")[0])


def test_version_strings():
    assert parse_log("INFO 04-29 00:57:50 [api_server.py:1043] vLLM API server version 0.8.5\n"
                     "GPU KV cache size: 16 tokens")[0].vllm_version == "0.8.5"
    assert parse_version("0.8.3rc2.dev224+g49c0d11ec") == (0, 8, 3)
    assert parse_version("nonsense") is None


def test_parse_rejects_non_text():
    with pytest.raises(VllmLogError):
        parse_log(b"# GPU blocks: 1, # CPU blocks: 1")
    assert parse_log("") == [] and parse_log("hello\nworld") == []


# --- forward ----------------------------------------------------------------------------------
def test_default_utilization_by_version():
    # notes section 1: 0.90 through 0.19.1 (V0 included), 0.92 from 0.20.x.
    assert [default_utilization(v) for v in ("0.5.2", "0.19.1", "0.20.0", "0.33.0")] == [0.90, 0.90, 0.92, 0.92]


def test_forward_reproduces_log_12():
    # Sidecar 12 check note: '71.27-12.55-0.16-2.38 = 56.18', '56.18 GiB / 8 MiB = 7191.0'.
    f = predict_pool(load_model("llama-2-7b"), round(79.19 * GiB), version="0.8.1", engine="v0",
                     weights_bytes=round(12.55 * GiB), non_torch_bytes=round(0.16 * GiB),
                     activation_bytes=round(2.38 * GiB))
    assert f.utilization == 0.90
    assert (f.available_gib_printed, f.num_gpu_blocks, f.bytes_per_block) == ("56.18", 7191, 8 * 2**20)


def test_forward_reproduces_log_07_within_the_window():
    # 07.log (0.6.4): available = 23.58 GiB x 0.90 - peak torch 17.06 GiB - non-torch 0.35 GiB = 3.812 GiB.
    f = predict_pool(load_model("llama-3.1-8b"), round(23.58 * GiB), version="0.6.4", engine="v0",
                     weights_bytes=round(17.06 * GiB), non_torch_bytes=round(0.35 * GiB), activation_bytes=0)
    assert f.available_gib_printed == "3.81"                         # sidecar 07 available_kv_cache_gib
    lo, hi = window_blocks("3.81", 2**21)
    assert lo <= f.num_gpu_blocks <= hi
    assert f.gpu_kv_cache_tokens == f.num_gpu_blocks * 16


def test_forward_v020_recipe():
    # notes, prediction recipe: R = ceil(T x 0.92); A = floor(R - W - P - O - G); N = A // B;
    # tokens = int(N / bpr x max_model_len) with bpr = 8192 / 16 = 512. T x 0.92 is not whole here,
    # so the ceiling matters (R = 78,200,000,001, not the float 78,200,000,000.92).
    total, w, p_act, o, g = 85_000_000_001, 16_060_000_000, 3_000_000_000, 500_000_000, 1_200_000_000
    r = math.ceil(total * 0.92)
    a = r - w - p_act - o - g
    n = a // 2097152
    f = predict_pool(load_model("llama-3.1-8b"), total, version="0.20.2", weights_bytes=w, activation_bytes=p_act,
                     non_torch_bytes=o, cudagraph_bytes=g, max_model_len=8192)
    assert (f.utilization, f.requested_bytes, f.available_bytes, f.num_gpu_blocks) == (0.92, r, a, n)
    assert f.gpu_kv_cache_tokens == int(n / 512 * 8192)
    assert f.max_concurrency == round(n / 512, 2)
    eager = predict_pool(load_model("llama-3.1-8b"), total, version="0.20.2", weights_bytes=w,
                         activation_bytes=p_act, non_torch_bytes=o, cudagraph_bytes=g, enforce_eager=True)
    assert eager.available_bytes == a + g                            # notes: the estimate is 0 when eager


# --- robustness -----------------------------------------------------------------------------
REAL_LINES = [line for name in LOGS for line in log_text(name).splitlines()] + [
    "GPU KV cache size: 652,144 tokens, Maximum concurrency for 4,096 tokens per request: 159.21x",
    "Initializing a V1 LLM engine (v0.10.1) with config: model='m', max_seq_len=0, tensor_parallel_size=0, "
    "block_size=0, kv_cache_dtype=fp8",
    "Overriding num_gpu_blocks=100 with num_gpu_blocks_override=50",
    "Setting attention block size to 0 tokens to ensure that attention page size is >= mamba page size.",
    "Maximum concurrency for 0 tokens per request: 0.00x",
    "Available KV cache memory: 0.00 GiB",
]


def _mutate(line: str, cut: int, junk: str) -> str:
    cut = cut % (len(line) + 1)
    return line[:cut] + junk + line[cut:]


lines_strategy = st.lists(
    st.one_of(
        st.sampled_from(REAL_LINES),
        st.builds(_mutate, st.sampled_from(REAL_LINES), st.integers(0, 400),
                  st.text(alphabet="0123456789,. #()x=GiB\x1b[m|>", max_size=12)),
        st.text(max_size=80),
    ),
    max_size=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=400), lines_strategy.map("\n".join)))
def test_parser_never_raises_anything_but_vllm_log_error(text):
    try:
        starts = parse_log(text)
    except VllmLogError:
        return
    spec = load_model("llama-3.1-8b")
    for start in starts:
        assert isinstance(start, EngineStart)
        json.dumps(report(start), allow_nan=False)
        for attr in ("num_gpu_blocks", "gpu_kv_cache_tokens", "max_model_len", "available_kv_cache_bytes"):
            value = getattr(start, attr)
            assert value is None or (type(value) is int and value >= 0)
        try:
            prediction = predict_from_log(start, spec)
        except VllmLogError:
            continue
        json.dumps(report(start, prediction), allow_nan=False)
