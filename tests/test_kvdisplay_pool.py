"""kvdisplay.pool: the chapter-04 explorer's view, against hand arithmetic.

Llama 3.1 8B on an H100 (79.18 GiB = 85,018,877,624 B as CUDA reports it, seed 000), u 0.92,
bf16 weights 16,060,522,496 B (8,030,261,248 parameters, the published count), 3 GB other:
ceil(85,018,877,624 x 0.92) = 78,217,367,415; minus weights and 3e9 = 59,156,844,919 B;
blocks of 16 tokens x 32 layers x 4,096 B = 2,097,152 B -> 28,208 blocks; fp8 halves the block:
56,416 blocks = 902,656 token slots.
"""

from __future__ import annotations

import timeit

import kvdisplay as kd


def test_llama_pool_blocks_by_hand():
    view = kd.pool_explorer_view("llama-3.1-8b")
    assert "blocks of 16 tokens: <b>28,208</b>" in view
    assert "<b>451,328</b> token slots" in view


def test_fp8_doubles_the_blocks():
    view = kd.pool_explorer_view("llama-3.1-8b", kv_cache_dtype="fp8")
    assert "blocks of 16 tokens: <b>56,416</b>" in view and "902,656" in view


def test_hybrid_shows_two_numbers():
    view = kd.pool_explorer_view("gpt-oss-20b", context=131072)
    assert "KV-cache groups" in view and "layers' bytes alone" in view


def test_no_room_is_said():
    view = kd.pool_explorer_view("llama-3.3-70b", gpu="L4")
    assert "no room for a KV pool" in view


def test_widget_builds_and_redraws():
    box = kd.pool_explorer(["llama-3.1-8b", "gpt-oss-20b"])
    before = box.view.value
    box.children[4].value = 256          # block size
    assert box.view.value != before and "blocks of 256 tokens" in box.view.value


def test_view_is_fast_enough_to_print():
    # a figure for the report, not an assertion on speed (benchmarks time it)
    seconds = min(timeit.repeat(lambda: kd.pool_explorer_view("gpt-oss-20b", context=131072), number=5, repeat=3)) / 5
    print(f"pool_explorer_view: {seconds * 1e3:.1f} ms")
