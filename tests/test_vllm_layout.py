"""kvlib.vllm.layout: bytes per block on one rank, worked by hand (notes/vllm-kv-accounting.md, "Block count")."""

from kvlib import load_model
from kvlib.spec import ModelSpec
from kvlib.vllm.layout import bytes_per_block

LLAMA_8B = load_model("llama-3.1-8b")       # 32 layers, 8 KV heads of 128
GPT_OSS = load_model("gpt-oss-20b")         # 24 layers, 8 KV heads of 64, sliding and full alternating
# 7 layers, 4 sliding + 3 full: largest / smallest bucket = 4 / 3 = 1.33, between the two thresholds
HYBRID_4_3 = ModelSpec(name="hybrid", model_type="test", num_layers=7, num_heads=8, num_kv_heads=8, head_dim=64,
                       hidden_size=None, vocab_size=None, intermediate_size=None,
                       layer_kinds=("sliding",) * 4 + ("full",) * 3, sliding_window=128)


def test_uniform_model_kv_dtype_and_tp():
    # 32 layers x 16 x 8 x (128 + 128) x 2 B = 2 MiB; fp8 halves it; tp = 4 keeps 2 KV heads per rank
    assert bytes_per_block(LLAMA_8B) == 2 * 2**20
    assert bytes_per_block(LLAMA_8B, kv_cache_dtype="fp8") == 2**20
    assert bytes_per_block(LLAMA_8B, tp=4) == 2**19
    assert bytes_per_block(LLAMA_8B, block_size=32) == 4 * 2**20
    # pp = 2: 16 layers per stage
    assert bytes_per_block(LLAMA_8B, pp=2) == 2**20


def test_hybrid_v1_groups_against_v0_full_attention():
    # page 16 x 8 x (64 + 64) x 2 B = 32,768 B. V1: 12 sliding + 12 full -> groups of 12 layers;
    # V0 sizes all 24 layers as full attention
    assert bytes_per_block(GPT_OSS) == 12 * 32768
    assert bytes_per_block(GPT_OSS, engine="v0") == 24 * 32768


def test_group_size_follows_the_release():
    # 4 and 3 layers: from 0.15 (threshold 1.5) 4 < 4.5 -> the largest, 4 layers; in 0.14 (1.25) 4 >= 3.75 ->
    # the smallest, 3; through 0.10 always the smallest. Page 32,768 B as above.
    assert bytes_per_block(HYBRID_4_3, version="0.15.0") == 4 * 32768
    assert bytes_per_block(HYBRID_4_3) == 4 * 32768
    assert bytes_per_block(HYBRID_4_3, version="0.14.0") == 3 * 32768
    assert bytes_per_block(HYBRID_4_3, version="0.10.1") == 3 * 32768
