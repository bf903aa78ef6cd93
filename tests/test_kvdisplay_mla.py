"""kvdisplay's MLA helpers and bar plot: the arrays measure what the formula says, the view shows kvlib's figures.

Expected values by hand: DeepSeek-V3 61 x (512 + 64) x 2 B = 70,272 B per token (its config.json);
Llama 3.3 70B 2 x 80 x 8 x 128 x 2 = 327,680 B, 40,960 B per GPU at TP 8 (one KV head each);
Llama 3.1 8B at TP 16: 8 KV heads, so one whole head per GPU, 2 x 32 x 1 x 128 x 2 = 16,384 B.
"""

from __future__ import annotations

import pytest
from pinned import pinned

import kvdisplay as kd


def test_mla_arrays_measure_the_formula():
    latent, rope = kd.mla_cache_arrays(layers=3, latent_dim=16, rope_dim=4, seq_len=5, batch_size=2, dtype_bytes=1)
    assert latent.shape == (3, 2, 5, 16) and rope.shape == (3, 2, 5, 4)
    assert latent.nbytes + rope.nbytes == 3 * (16 + 4) * 1 * 5 * 2 == 600
    assert len(kd.MLA_LATENT_AXES) == latent.ndim and len(kd.MLA_ROPE_AXES) == rope.ndim


def test_mla_arrays_allow_no_rope_key_and_refuse_bad_sizes():
    latent, rope = kd.mla_cache_arrays(2, 8, 0, 3, 1)
    assert rope.nbytes == 0 and latent.nbytes == 2 * 8 * 2 * 3
    with pytest.raises(ValueError, match="latent_dim"):
        kd.mla_cache_arrays(2, 0, 4, 3, 1)
    with pytest.raises(ValueError, match="rope_dim"):
        kd.mla_cache_arrays(2, 8, -1, 3, 1)


def test_view_shows_mla_whole_and_gqa_split():
    view = kd.mla_explorer_view(512, 64, 61, 8, 2, "llama-3.3-70b")
    assert "MLA per GPU: <b>70,272 B" in view
    assert "Llama-3.3-70B-Instruct per GPU: <b>40,960 B" in view
    assert "1 of 8 KV heads" in view
    # TP 16 past 8 KV heads: replicated, still one whole head per GPU
    view = kd.mla_explorer_view(512, 64, 61, 16, 2, "llama-3.1-8b")
    assert "Llama-3.1-8B per GPU: <b>16,384 B" in view and "MLA per GPU: <b>70,272 B" in view


def test_view_follows_each_control():
    base = kd.mla_explorer_view(512, 64, 61, 8)
    for changed in (kd.mla_explorer_view(256, 64, 61, 8), kd.mla_explorer_view(512, 32, 61, 8),
                    kd.mla_explorer_view(512, 64, 30, 8), kd.mla_explorer_view(512, 64, 61, 8, 1)):
        assert changed != base


def test_explorer_widget_redraws():
    pinned("ipywidgets")
    box = kd.mla_explorer()
    before = box.view.value
    layers = next(c for c in box.children if getattr(c, "description", "") == "layers L")
    layers.value = 10
    assert box.view.value != before and "MLA per GPU: <b>11,520 B" in box.view.value   # 10 x 576 x 2


def test_bar_plot_labels_and_refusals():
    fig = kd.bar_plot(["a", "b", "c"], [3, 1, 2], ["MLA", "GQA", "GQA"], xlabel="bytes per token (KiB)",
                      colors={"MLA": "tab:green"}, value_text=lambda v: f"{v} KiB")
    ax = fig.axes[0]
    at = {tick: label.get_text() for tick, label in zip(ax.get_yticks(), ax.get_yticklabels())}
    assert at[max(at)] == "a" and at[min(at)] == "c"                        # first label on top
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["MLA", "GQA"]
    with pytest.raises(ValueError, match="unit"):
        kd.bar_plot(["a"], [1], ["x"], xlabel="bytes")
    with pytest.raises(ValueError, match="labels"):
        kd.bar_plot(["a", "b"], [1], ["x"], xlabel="bytes (B)")


def test_bars_keep_one_scale_as_tp_moves():
    """The MLA bar's width does not change with TP (the scale is fixed); the GQA bar shrinks."""
    import re
    widths = {tp: [float(w) for w in re.findall(r"width:([\d.]+)%;height", kd.mla_explorer_view(512, 64, 61, tp))]
              for tp in (1, 8, 16)}
    assert widths[1][0] == widths[8][0] == widths[16][0]
    assert widths[1][1] == 100.0 and widths[8][1] == 100.0 / 8
