"""kvlib.vllm.admission: what vLLM plans for one request, worked by hand and checked against the CPU engine.

planned = blocks per request x bytes per block (v1/core/kv_cache_utils.py get_max_concurrency_for_kv_cache_config:
the divisor of "Maximum concurrency"). Every CPU-engine start in tests/fixtures/vllm_cpu printed its
concurrency, (space // bytes per block) / blocks per request: the planned figure must give it back.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvlib import load_model
from kvlib.vllm import VllmLogError
from kvlib.vllm.admission import planned_bytes_per_sequence

FIXTURES = Path(__file__).parent / "fixtures" / "vllm_cpu"
LOGS = sorted(FIXTURES.glob("*/*.log"))
CAPACITY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")


def test_llama_3_1_8b_block_rounding():
    # 32 layers x 16 x 8 x (128 + 128) x 2 B = 2,097,152 B a block; 1,000 tokens take ceil(1000 / 16) = 63
    # blocks: 132,120,576 B, against 1,000 x 131,072 = 131,072,000 B of tokens (the last block 8 tokens short)
    a = planned_bytes_per_sequence(load_model("llama-3.1-8b"), 1000, version="0.32.0")
    assert (a.block_size, a.bytes_per_block, a.blocks_per_request, a.bytes) == (16, 2097152, 63, 132120576)
    assert a.max_in_flight_tokens is None and a.plan is None and a.notes == ()


def test_gemma_2_window_worst_case_0_34():
    # Gemma 2 9B: 21 sliding (4,096) + 21 full, 8 KV heads of 256. 0.34: 64-token blocks, page 64 x 8 x 512 x 2
    # = 524,288 B, groups of 21: 11,010,048 B a block. F = 2 x 8,192 (Model Runner V2, async: PP + 1 batches):
    # sliding ceil(min(4,095 + 16,384, 8,192) / 64) + 1 = 129, full 8,192 / 64 = 128: 257 blocks.
    a = planned_bytes_per_sequence(load_model("gemma-2-9b"), 8192, version="0.34.0", max_num_batched_tokens=8192)
    assert (a.block_size, a.bytes_per_block, a.max_in_flight_tokens, a.blocks_per_request) == (64, 11010048, 16384, 257)
    assert a.bytes == 257 * 11010048
    # 0.32.0 (16-token blocks, page 131,072, block 2,752,512 B; F = 2 x 8,192 on the V1 runner):
    # sliding ceil(8,192 / 16) + 1 = 513, full 512: 1,025 blocks
    a = planned_bytes_per_sequence(load_model("gemma-2-9b"), 8192, version="0.32.0", max_num_batched_tokens=8192)
    assert (a.bytes_per_block, a.blocks_per_request) == (2752512, 1025)
    # without max_num_batched_tokens: vllm serve's 8,192 on a large GPU, and a note says so
    a = planned_bytes_per_sequence(load_model("gemma-2-9b"), 8192, version="0.32.0")
    assert a.blocks_per_request == 1025 and a.notes == (
        "max_num_batched_tokens 8,192 assumed (vllm serve on a GPU of 70 GiB or more)",)


def test_qwen3_next_tp4_hybrid():
    # TP 4, 0.34: the block grows to 64 x ceil(274,432 / 65,536) = 320 tokens (page 320 x 1,024 = 327,680 B),
    # groups of 12 layers: 3,932,160 B a block. 32,768 tokens: ceil(32,768 / 320) = 103 full blocks + 3 GDN
    # groups x 3 pages (2 + FlashInfer's checkpoint) = 112 blocks: 440,401,920 B.
    a = planned_bytes_per_sequence(load_model("qwen3-next-80b-a3b"), 32768, tp=4, version="0.34.0")
    assert (a.block_size, a.bytes_per_block, a.blocks_per_request, a.bytes) == (320, 3932160, 112, 440401920)
    # 0.32.0: block 272, page 278,528 B, 3,342,336 B a block; ceil(32,768 / 272) = 121 + 3 x 2 = 127 blocks
    a = planned_bytes_per_sequence(load_model("qwen3-next-80b-a3b"), 32768, tp=4, version="0.32.0")
    assert (a.block_size, a.bytes_per_block, a.blocks_per_request) == (272, 3342336, 127)


def _settings(log: Path):
    side = json.loads(log.with_suffix(".json").read_text())
    return side["settings"], side["engine_reported"]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_planned_bytes_give_the_engines_concurrency(log):
    # On the CPU build: block 128 (16 on the reference MLA kernel), F = 4,096 (async scheduling off), the
    # state in float32 (the capture CPU has AVX-512 BF16). The engine printed (space // B) / bpr.
    settings, engine = _settings(log)
    (mml, printed), = CAPACITY.findall(log.read_text())
    ref_mla = settings.get("attention_config", {}).get("backend") == "CPU_MLA"
    a = planned_bytes_per_sequence(load_model(str(log.parent / "config.json")), int(mml.replace(",", "")),
                                   platform="cpu", block_size=16 if ref_mla else 128, max_num_batched_tokens=4096,
                                   kv_cache_dtype=settings.get("kv_cache_dtype"), ssm_dtype_bytes=4,
                                   version="0.32.0")
    space = settings["VLLM_CPU_KVCACHE_SPACE"] * 2**30
    blocks = space // a.bytes_per_block
    assert blocks == engine["num_gpu_blocks"] and a.block_size == engine["block_size"]
    assert a.bytes == a.blocks_per_request * a.bytes_per_block
    assert f"{blocks / a.blocks_per_request:.2f}" == printed


def test_bad_arguments_are_one_line():
    with pytest.raises(VllmLogError, match=r"^context must be a positive integer, got 0$"):
        planned_bytes_per_sequence(load_model("llama-3.1-8b"), 0)
    with pytest.raises(VllmLogError, match=r"^planned_bytes_per_sequence takes a ModelSpec, not str$"):
        planned_bytes_per_sequence("llama-3.1-8b", 1000)
