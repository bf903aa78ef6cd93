"""kvdisplay.crossover: the stacked bar, the roofline plot and the explorer's view.

Expected figures by hand: Llama 3.1 8B bf16 weights 8,030,261,248 x 2 B, 131,072 B/token
(its config), H100 SXM 3.35e12 B/s (NVIDIA datasheet); [kv-math] section 7: 9.92 ms at
batch 32 x 4,096 tokens.
"""

from __future__ import annotations

import re

import pytest
from pinned import pinned

import kvdisplay as kd
import kvlib as kv

W8 = 8_030_261_248 * 2
C8 = 131_072


def read8(batch):
    """What a step of the 8B reads of its weights: all but the 128,256 - B unread rows of its 4,096-wide table."""
    return W8 - (128_256 - batch) * 4096 * 2


def test_step_bytes_figure_stacks_weights_under_cache():
    fig = kd.step_bytes_figure([("a", W8, C8 * 4096 * 32), ("b", W8, 0)])
    ax = fig.axes[0]
    bars = ax.patches
    assert len(bars) == 4                                   # two workloads x (weights, cache)
    heights = sorted(round(b.get_height(), 3) for b in bars)
    assert heights == sorted([round(W8 / 1e9, 3)] * 2 + [0.0, round(C8 * 4096 * 32 / 1e9, 3)])
    assert "GB" in ax.get_ylabel()
    with pytest.raises(ValueError):
        kd.step_bytes_figure([])


def test_roofline_plot_puts_points_at_their_intensity():
    step = kv.roofline.decode_step("llama-3.1-8b", batch=32, context=4096)
    fig = kd.roofline_plot("H100-SXM", [("B=32", step)])
    ax = fig.axes[0]
    x, y = ax.collections[0].get_offsets()[0]
    assert ax.get_legend_handles_labels()[1][-1] == "1. B=32"          # numbered, as the marker's tag is
    assert abs(x - step.arithmetic_intensity) < 1e-9
    # below the ridge the attained rate is bandwidth x intensity
    assert abs(y - 3.35e12 * step.arithmetic_intensity / 1e12) / y < 1e-6
    assert ax.get_xscale() == ax.get_yscale() == "log"


def test_view_figures_by_hand():
    view = kd.crossover_view("llama-3.1-8b", 32, 4096, efficiency=0.7)
    step_ms = (read8(32) + C8 * 4096 * 32) / 3.35e12 * 1e3     # 9.61 ms (9.92 ms, [kv-math] §7, with the whole table)
    assert f"{step_ms:,.2f}" == "9.61"
    assert f"step time at the bandwidth limit: <b>{step_ms:,.2f} ms</b>" in view
    assert f"<b>{step_ms / 0.7:,.2f} ms</b>" in view
    assert f"<b>{32 * 0.7 / (step_ms / 1e3):,.0f} tokens/s</b>" in view
    assert "cache-dominated" in view and "<svg" in view
    # rounded up: at 3,578 tokens 32 x 3,578 x 131,072 = 15,007,219,712 B is still below the 15,010,111,488 B read
    assert C8 * 32 * 3578 < read8(32) <= C8 * 32 * 3579
    assert "from context 3,579 tokens on" in view
    assert "only the batch's 32 rows" in view
    assert "fits the KV pool of 59.16 GB" in view       # ceil(0.92 x 85,018,877,624) - W8 - 3e9 = 59,156,844,919 B


def test_view_flags_a_batch_the_pool_cannot_hold():
    # 32 x 32,768 x 131,072 B = 137.44 GB of cache against a 59.16 GB pool on one H100
    view = kd.crossover_view("llama-3.1-8b", 32, 32768)
    assert "does not fit: KV for 32 sequences of 32,768 tokens is 137.44 GB" in view
    assert "fits the KV pool" not in view


def test_view_names_the_weight_dominated_regime_and_fp8_halves_the_cache():
    small = kd.crossover_view("llama-3.1-8b", 1, 2048)
    assert "weight-dominated" in small and "int4 weights take off more" in small
    bf16 = kd.crossover_view("llama-3.1-8b", 64, 8192, kv_dtype_bytes=2)
    fp8 = kd.crossover_view("llama-3.1-8b", 64, 8192, kv_dtype_bytes=1)
    ms = [float(re.search(r"bandwidth limit: <b>([\d.,]+) ms", v).group(1).replace(",", "")) for v in (bf16, fp8)]
    assert abs(ms[0] - (read8(64) + C8 * 8192 * 64) / 3.35e12 * 1e3) < 0.01
    assert abs(ms[1] - (read8(64) + C8 // 2 * 8192 * 64) / 3.35e12 * 1e3) < 0.01


def test_view_under_tensor_parallelism_is_per_gpu():
    # Llama 3.3 70B on 4 H100s: each reads a quarter of its weights (untied 128,256 x 8,192 table, 32 rows read)
    # and 2 of its 8 KV heads: 80 layers x 2 x 2 x 128 x 2 B = 81,920 B per token per GPU
    view = kd.crossover_view("llama-3.3-70b", 32, 4096, tp=4)
    weights = (70_553_706_496 * 2 - (128_256 - 32) * 8192 * 2) // 4
    kv_bytes = 81_920 * 4096 * 32
    assert f"step time at the bandwidth limit: <b>{(weights + kv_bytes) / 3.35e12 * 1e3:,.2f} ms</b>" in view
    assert "each of 4 H100-SXM (TP 4)" in view and "fits the KV pool" in view
    assert "does not fit" in kd.crossover_view("llama-3.3-70b", 32, 4096)     # its 141 GB of weights on one GPU


def test_explorer_redraws_on_a_slider():
    pinned("ipywidgets")
    box = kd.crossover_explorer(["llama-3.1-8b", "llama-3.3-70b"])
    before = box.view.value
    batch = next(w for w in box.children if getattr(w, "description", "") == "batch B (sequences)")
    batch.value = 128
    assert box.view.value != before and "128 sequences × 4,096 tokens" in box.view.value


def test_view_names_the_fix_that_removes_more_bytes_as_section_7_does():
    # ch06 §7: int4 weights remove 3/4 of W_r, an fp8 cache 1/2 of the cache read: int4 wins until the cache
    # read is 1.5 x the weights, though the step is cache-dominated from 1 x on. Llama 3.1 8B, B = 32,
    # T = 4,096: cache 131,072 x 4,096 x 32 = 17,179,869,184 B against W_r = 15,010,111,488 B (1.14 x)
    w, c = read8(32), C8 * 4096 * 32
    assert w < c < 1.5 * w
    just_past = kd.crossover_view("llama-3.1-8b", 32, 4096)
    int4, fp8 = (w + c) / (w / 4 + c), (w + c) / (w + c / 2)          # 1.538 x and 1.364 x
    assert "cache-dominated" in just_past and f"int4 weights take off more ({int4:.2f}× against an fp8 " \
        f"cache's {fp8:.2f}×)" in just_past
    # B = 64, T = 8,192: cache 68.72 GB, 4.6 x the weights: the cache fixes win
    far = kd.crossover_view("llama-3.1-8b", 64, 8192)
    w, c = read8(64), C8 * 8192 * 64
    assert f"an fp8 cache takes off more ({(w + c) / (w + c / 2):.2f}× against int4 weights' " \
        f"{(w + c) / (w / 4 + c):.2f}×)" in far
    # paging and prefix reuse do not shorten a step (§7): the explorer never offers them as its fix
    for view in (just_past, far):
        assert "paging" not in view and "prefix" not in view
