"""kvdisplay.tp: each GPU's slice of a cache, and the TP explorer's view.

Expected values by hand: a [2, 2, 4, 3, 8] float16 cache is 2*2*4*3*8*2 = 768 B; split over 2 GPUs
each holds 2 heads (384 B); over 8 GPUs each holds 1 of the 4 heads, every head twice (192 B each).
Llama 3.3 70B at TP 8: 2 x 80 x 1 x 128 x 2 = 40,960 B per GPU ([kv-math], worked example 2).
"""

from __future__ import annotations

import numpy as np
import pytest

import kvdisplay as kd


def test_heads_held_splits_then_replicates():
    assert kd.heads_held(8, 4) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert kd.heads_held(4, 8) == [(0,), (0,), (1,), (1,), (2,), (2,), (3,), (3,)]
    assert kd.heads_held(1, 4) == [(0,)] * 4
    with pytest.raises(ValueError, match="tp=3 must divide kv_heads=8"):
        kd.heads_held(8, 3)
    with pytest.raises(ValueError, match="tp must be a positive int"):
        kd.heads_held(8, 0)


def test_slices_hold_the_right_heads_and_bytes():
    cache = np.arange(2 * 2 * 4 * 3 * 8, dtype=np.float16).reshape(2, 2, 4, 3, 8)
    two = kd.tp_kv_slices(cache, 2)
    assert [s.shape for s in two] == [(2, 2, 2, 3, 8)] * 2 and [s.nbytes for s in two] == [384, 384]
    assert np.array_equal(np.concatenate(two, axis=2), cache)            # split: nothing lost, nothing doubled
    eight = kd.tp_kv_slices(cache, 8)
    assert [s.nbytes for s in eight] == [192] * 8 and sum(s.nbytes for s in eight) == 2 * cache.nbytes
    assert np.array_equal(eight[6], cache[:, :, 3:4])                   # GPU 6 holds head 3 (6 // 2)


def test_slices_on_another_head_axis():
    cache = kd.kv_cache_array(layers=2, kv_heads=4, head_dim=8, seq_len=3, batch_size=2)  # [L, 2, B, K, T, D]
    slices = kd.tp_kv_slices(cache, 4)
    assert [s.shape for s in slices] == [(2, 2, 2, 1, 3, 8)] * 4


def test_view_shows_per_gpu_figures_and_replication():
    view = kd.tp_explorer_view(80, 64, 8, 128, 2, tp=8, seq_len=8192, weight_bytes=141_107_412_992)
    assert "per-GPU bytes per token: <b>40,960 B (40 KiB)</b>" in view
    assert "no copies" in view and "replicated" not in view
    replicated = kd.tp_explorer_view(80, 64, 8, 128, 2, tp=32, seq_len=8192, weight_bytes=141_107_412_992)
    assert "4 copies of each KV head" in replicated and "40,960 B" in replicated
    refused = kd.tp_explorer_view(36, 20, 20, 64, 2, tp=8, seq_len=1024)
    assert "no engine runs this split" in refused and "per-GPU bytes" not in refused


def test_view_sequences_per_gpu_by_hand():
    memory = round(79.18 * 2**30)                                        # H100 as CUDA reports it
    by_hand = (memory - -(-141_107_412_992 // 8) - 5 * 10**9) // (40_960 * 8192)
    view = kd.tp_explorer_view(80, 64, 8, 128, 2, tp=8, seq_len=8192, weight_bytes=141_107_412_992)
    assert f"sequences of 8,192 tokens per GPU (and so for the whole TP group): <b>{by_hand}</b>" in view


def test_explorer_widget_follows_the_model_and_sliders():
    box = kd.tp_explorer(["llama-3.3-70b", "gpt2-large"])
    model, kv_heads, tp = box.children[:3]
    assert kv_heads.value == 8 and tp.value == 8                        # opens on one 8-GPU node, not TP 1
    assert "40,960 B" in box.view.value and "<b>0</b>" not in box.view.value
    tp.value = 2
    assert "163,840 B" in box.view.value
    model.value = "gpt2-large"
    assert kv_heads.value == 20 and kv_heads.options == (1, 2, 4, 5, 10, 20)



def test_view_names_the_nodes_a_tp_group_spans():
    # 8 GPUs to a server (HGX/DGX H100): TP 16 is two servers, TP 64 eight; 8 GPUs is one.
    one = kd.tp_explorer_view(32, 32, 8, 128, 2, tp=8, seq_len=8192)
    assert "fits in one 8-GPU node" in one and "spans" not in one
    two = kd.tp_explorer_view(32, 32, 8, 128, 2, tp=16, seq_len=8192)
    assert "spans 2 nodes of 8 GPUs" in two and "pipeline or data parallelism" in two
    assert "spans 8 nodes of 8 GPUs" in kd.tp_explorer_view(80, 64, 8, 128, 2, tp=64, seq_len=8192)
    # 2 x 32 x 1 x 128 x 2 = 16,384 B on each of 16 GPUs: 262,144 B between them
    assert "the 16 GPUs store 262,144 B (256 KiB) per token between them" in two
