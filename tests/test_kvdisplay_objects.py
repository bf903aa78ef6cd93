"""kvdisplay's objects: the numpy KV cache, the sympy build-up, the plot, the explorer.

Expected byte counts are hand arithmetic: Llama 3.1 8B, 2 x 32 x 8 x 128 x 2 = 131,072 B per
token (its config.json; [build-up] and [kv-math] section 3 give the same)."""

from __future__ import annotations

import re

import pytest
from pinned import pinned

import kvdisplay as kd


def test_cache_array_shape_and_bytes_follow_the_formula():
    cache = kd.kv_cache_array(layers=3, kv_heads=2, head_dim=4, seq_len=5, batch_size=6, dtype_bytes=4)
    assert cache.shape == (3, 2, 6, 2, 5, 4)
    assert cache.nbytes == 2 * 3 * 2 * 4 * 4 * 5 * 6 == 5760
    assert kd.KV_CACHE_AXES[1] == "K and V"


def test_one_token_of_llama_8b_is_128_kib():
    token = kd.kv_cache_array(32, 8, 128, seq_len=1, batch_size=1, dtype_bytes=2)
    assert token.nbytes == 131_072


@pytest.mark.parametrize("bad", [{"layers": 0}, {"seq_len": 2.5}, {"dtype_bytes": 3}])
def test_cache_array_names_a_bad_dimension(bad):
    args = dict(layers=1, kv_heads=1, head_dim=1, seq_len=1, batch_size=1, dtype_bytes=2) | bad
    with pytest.raises(ValueError, match=next(iter(bad))):
        kd.kv_cache_array(**args)


def test_build_up_keeps_the_formula_order_and_marks_each_new_factor():
    sp = pinned("sympy")
    L, K, D, b = sp.symbols("L K D b")
    view, products = kd.build_up([(2, "K and V", "v"), (L, "layers", "v"), (K, "heads", "v"), (D, "dim", "n"),
                                  (b, "bytes", "B")])
    rows = [r for r in view.data.splitlines()[2:]]
    assert len(rows) == 5
    assert r"2 \cdot L \cdot K \cdot D \cdot \color{#c0392b}{\mathbf{b}}" in rows[-1]   # not sympy's 2DKLb
    assert r"\color{#c0392b}{\mathbf{L}}" in rows[1] and "K" not in rows[1].split("|")[1]
    assert products[-1] == 2 * L * K * D * b


def test_line_plot_labels_axes_with_units():
    pinned("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    fig = kd.line_plot([1, 10], {"cache": [1, 2]}, hlines={"weights": 3}, xlabel="tokens (count)",
                       ylabel="memory (GB)", xlog=True)
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_xscale()) == ("tokens (count)", "memory (GB)", "log")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["cache", "weights"]


def test_line_plot_refuses_an_axis_without_unit():
    with pytest.raises(ValueError, match="ylabel 'memory' names no unit"):
        kd.line_plot([1], {"a": [1]}, xlabel="tokens (count)", ylabel="memory")


def _number(view):
    return re.search(r"bytes per token: <b>([\d,]+) B", view).group(1)


def test_explorer_view_figures():
    # Llama 3.1 8B at 8,192 tokens: 1 GiB per sequence, 16 of them 16 GiB; H100 79.18 GiB as CUDA reports it.
    view = kd.kv_explorer_view(32, 8, 128, 2, 8192, 16, weight_bytes=16_060_522_496)
    assert _number(view) == "131,072"
    assert "per batch of 16: <b>17.18 GB (16.00 GiB)</b>" in view and "fits" in view
    # (79.18 GiB - 16,060,522,496 B - 4 GB) // 1 GiB = 60 sequences
    assert "sequences of this length that fit: <b>60</b>" in view
    assert "does not fit" in kd.kv_explorer_view(80, 8, 128, 2, 8192, 32)          # 80 GiB > 79.18 GiB
    assert "the weights alone do not fit" in kd.kv_explorer_view(32, 8, 128, 2, 8192, 1, weight_bytes=10**12)


def test_explorer_view_spreads_over_several_gpus():
    # Llama-3.3-70B's shape (80 layers, 8 KV heads of 128) with 141 GB of weights: not on one H100, on four
    # (by hand: 4 x 85,018,877,624 B reported - 141e9 - 4 x 4e9 reserve = 183,075,510,496 B;
    #  / (327,680 B x 8,192) = 68.2, so 68 sequences)
    assert "the weights alone do not fit</b> on H100-SXM" in kd.kv_explorer_view(80, 8, 128, 2, 8192, 16,
                                                                                 weight_bytes=141 * 10**9)
    four = kd.kv_explorer_view(80, 8, 128, 2, 8192, 16, weight_bytes=141 * 10**9, num_gpus=4)
    assert "sequences of this length that fit: <b>68</b>" in four and "4 × H100-SXM, as CUDA reports it" in four
    with pytest.raises(ValueError, match="num_gpus"):
        kd.kv_explorer_view(80, 8, 128, 2, 8192, 16, num_gpus=0)


def test_explorer_view_fp8_halves_the_cache_not_the_weights():
    bf16 = kd.kv_explorer_view(32, 8, 128, 2, 8192, 16, weight_bytes=16 * 10**9)
    fp8 = kd.kv_explorer_view(32, 8, 128, 1, 8192, 16, weight_bytes=16 * 10**9)
    assert _number(bf16) == "131,072" and _number(fp8) == "65,536"
    assert "weights 16.00 GB" in bf16 and "weights 16.00 GB" in fp8


def test_presets_flag_sliding_window_models():
    presets = kd.presets_from_models(["llama-3.1-8b", "gemma-2-9b"])
    llama, gemma = presets.values()
    assert llama.label == "Llama-3.1-8B" and not llama.sliding_layers
    # gemma-2-9b's config alternates sliding and full layers: 21 of 42 (its config.json)
    assert (gemma.sliding_layers, gemma.layers, gemma.sliding_window) == (21, 42, 4096)
    assert "⚠ sliding window on 21 of 42 layers" in gemma.label


def test_explorer_widgets_redraw_from_the_view_function():
    pinned("ipywidgets")
    box = kd.kv_explorer(kd.presets_from_models(["llama-3.1-8b", "gemma-2-9b"]))
    sliders = {c.description: c for c in box.children if hasattr(c, "description")}
    assert _number(box.view.value) == "131,072"
    sliders["layers L"].value = 64
    assert _number(box.view.value) == "262,144"
    sliders["preset model"].value = next(k for k in sliders["preset model"].options if k.startswith("gemma"))
    assert sliders["layers L"].value == 42 and sliders["head dim D"].value == 256
    assert "⚠" in box.view.value                              # the sliding-window note under the view
    for control in box.children:
        if control.description and "slider" in type(control).__name__.lower():
            assert control.layout.width == kd.explorer.SLIDER_WIDTH   # wide enough for 1..512
