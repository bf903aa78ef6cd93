"""kvdisplay.pool: the chapter-04 explorer's view, against hand arithmetic.

Llama 3.1 8B on an H100 (79.18 GiB = 85,018,877,624 B as CUDA reports it, [chains]), u 0.92,
weights as stored 16,094,076,928 B (8,030,261,248 bf16 parameters, the published count, plus the
131,072 x 128 x 2 B rotary cache); other = vLLM 0.32's torch peak, the forward over 8,192 tokens
int(8,192 x 2 x (3 x 14,336 + 2 x 4,096) x 1.408) = 1,181,116,006 B, plus non-torch round(0.07 GiB)
= 75,161,928 B, plus Model Runner V2's sampler state 1,024 x (128,256 + 4,008) x 4 = 541,745,152 B and the
CUDA-graph estimate it subtracts from 0.29, 32 layers x round(0.025 GiB) = 858,993,472 B:
ceil(85,018,877,624 x 0.92) = 78,217,367,415; minus all that = 59,466,273,929 B; blocks of 16 tokens x 32
layers x 4,096 B = 2,097,152 B -> 28,355 blocks = 453,680 token slots; fp8 halves the block: 56,711 blocks
= 907,376 token slots.
"""

from __future__ import annotations

import re

import kvdisplay as kd


def test_llama_pool_blocks_by_hand():
    view = kd.pool_explorer_view("llama-3.1-8b")
    assert "blocks of 16 tokens: <b>28,355</b>" in view
    assert "<b>453,680</b> token slots" in view


def test_fp8_doubles_the_blocks():
    view = kd.pool_explorer_view("llama-3.1-8b", kv_cache_dtype="fp8")
    assert "blocks of 16 tokens: <b>56,711</b>" in view and "907,376" in view


def test_hybrid_shows_two_numbers():
    view = kd.pool_explorer_view("gpt-oss-20b", context=131072)
    assert "KV-cache groups" in view and "layers' bytes alone" in view


def test_no_room_is_said():
    view = kd.pool_explorer_view("llama-3.3-70b", gpu="L4")
    assert "no room for a KV pool" in view


def test_widget_builds_and_redraws():
    box = kd.pool_explorer(["llama-3.1-8b", "gpt-oss-20b"])
    before = box.view.value
    box.children[5].value = 256          # block size
    assert box.view.value != before and "blocks of 256 tokens" in box.view.value


def test_the_release_sets_its_defaults_and_the_slider_reaches_1():
    # vLLM 0.34's defaults (config/cache.py): utilization 1.0 with the extensible KV cache, 64-token blocks
    box = kd.pool_explorer(["llama-3.1-8b"])
    release, util, block = box.children[2], box.children[3], box.children[5]
    assert (util.max, util.value, block.value) == (1.0, 0.92, 16)
    release.value = "0.34.0"
    assert (util.value, block.value) == (1.0, 64)
    assert "vLLM 0.34, pool measured after warmup" in box.view.value and "blocks of 64 tokens" in box.view.value
    release.value = "0.32.0"
    assert (util.value, block.value) == (0.92, 16) and "vLLM 0.32, pool estimated" in box.view.value


def test_the_measured_pool_in_64_token_blocks():
    # a 64-token block of Llama 3.1 8B: 64 x 32 layers x 4,096 B = 8,388,608 B; the pool is what
    # kv.vllm.forecast_pool measures for 0.34 (its margin kept free), cut into whole blocks
    import kvlib as kv
    f = kv.vllm.forecast_pool("llama-3.1-8b", kv.get_gpu("H100-SXM").cuda_memory_bytes, version="0.34.0",
                              gpu_name="H100-SXM", max_model_len=8192)
    blocks = f.available_bytes // 8_388_608
    view = kd.pool_explorer_view("llama-3.1-8b", utilization=1.0, block_size=64, version="0.34.0")
    assert f"blocks of 64 tokens: <b>{blocks:,}</b> of 8,388,608 B" in view
    assert f"<b>{64 * blocks:,}</b> token slots" in view and "safety margin" in view and "× 1.00" in view


def test_gpt_oss_long_context_block_and_waste_by_hand():
    # gpt-oss-20b (its config.json): 24 layers, K = 8, head_dim 64, bf16: 2 x 8 x 64 x 2 = 2,048 B a token a layer,
    # 49,152 B a token over all 24. Every other layer slides (window 128): two KV-cache groups of 12 layers, one
    # block = 16 tokens x 12 layers x 2,048 B = 393,216 B. A sequence's layers hold 12 x 131,072 x 2,048 (full)
    # + 12 x 128 x 2,048 (windowed) = 3,224,371,200 B = 3.22 GB. Each sequence wastes (16 - 1) / 2 = 7.5 slots of
    # its last block on average, so the waste is 7.5 x the sequences the view counts.
    view = kd.pool_explorer_view("gpt-oss-20b", context=131072)
    assert "49,152 B (48 KiB)" in view and "of 393,216 B (384 KiB)" in view
    assert "2 KV-cache groups of 12 layers (1 full, 1 windowed)" in view and "3.22 GB (3.00 GiB) a sequence" in view
    sequences = int(re.search(r"at 131,072 tokens: <b>(\d+)</b> sequences", view).group(1))
    assert f"expected waste in their last blocks: <b>{sequences * 7.5:g} token slots</b>" in view, view


def test_gpt_oss_weights_as_shipped_not_a_bf16_count():
    # gpt-oss-20b ships MXFP4 experts: about 13.8 GB on the GPU, not the 41.8 GB a bf16 count of 20.9 B gives
    view = kd.pool_explorer_view("gpt-oss-20b")
    assert "weights as stored 13.78 GB" in view and "41.8" not in view
