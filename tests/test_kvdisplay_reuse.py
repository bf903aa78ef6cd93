"""kvdisplay.reuse: the prefix-sharing and fetch-or-recompute views show kvlib's figures.

Expected figures by hand: [chains] "A shared system prompt" (2,007 tokens in 16-token blocks: 125
shared, 7 recomputed; 100 x 2,000 x 131,072 B = 26.2 GB unshared, 262 MB shared) and "Fetch from
host memory or recompute" (131,072 B / 50 GB/s = 2.6 us per token against 2 x 7,504,924,672 / (0.6 x
989e12) = 25.3 us, the 8.03e9 parameters less the 128,256 x 4,096 embedding lookup: fetch wins at every
length; with 5 ms per fetch, from 0.005 / 22.67 us = ~220 tokens).
"""

from __future__ import annotations

import re

from pinned import pinned

import kvdisplay as kd


def test_prefix_view_counts_whole_blocks():
    view = kd.prefix_sharing_view(2007, 16, 100, 131_072, "Llama-3.1-8B")
    assert "full blocks shared: <b>125</b>" in view and "tokens recomputed per request: <b>7</b>" in view
    assert view.count("background:#2e7d32") == 64 and "61 more" in view     # 125 blocks, 64 drawn
    view = kd.prefix_sharing_view(2000, 16, 100, 131_072)
    assert "unshared <b>26.21 GB" in view and "shared <b>0.26 GB" in view
    assert "tokens recomputed per request: <b>0</b>" in view and "#dd8452'></span></div>" not in view


def test_prefix_view_escapes_the_model_name():
    assert "&lt;b&gt;" in kd.prefix_sharing_view(16, 16, 2, 8, "<b>")


def test_fetch_view_break_even():
    assert "fetch wins from <b>1</b> token on" in kd.fetch_recompute_view("llama-3.1-8b", 50e9, 0.6)
    view = kd.fetch_recompute_view("llama-3.1-8b", 50e9, 0.6, fetch_overhead_s=0.005)
    even = int(re.search(r"fetch wins from <b>([\d,]+)</b>", view).group(1).replace(",", ""))
    assert even == 220     # 220.5 from the linear term; the attention FLOPs pull it below 220.5
    assert re.search(r"<td[^>]*>128</td>.*?<b>recompute</b>", view)          # 128 tokens: under the break-even
    assert re.search(r"<td[^>]*>8,192</td>.*?<b>fetch</b>", view)


def test_fetch_view_names_the_assumptions():
    view = kd.fetch_recompute_view("llama-3.1-8b", 2e9, 0.5, gpu="H100-SXM")
    assert "989 TFLOP/s" in view and "50% MFU" in view and "link 2 GB/s" in view


def test_explorers_redraw():
    pinned("ipywidgets")
    box = kd.prefix_sharing_explorer(["llama-3.1-8b", "qwen2.5-7b"])
    before = box.view.value
    box.children[1].value = 2008                                              # prompt length
    assert box.view.value != before and "tokens recomputed per request: <b>8</b>" in box.view.value
    box = kd.fetch_recompute_explorer(["llama-3.1-8b"])
    before = box.view.value
    box.children[4].value = 5                                                 # 5 ms per fetch
    assert box.view.value != before and "fixed cost per fetch 5 ms" in box.view.value


def test_fetch_view_floors_a_short_recompute_at_the_weights_read():
    # 128 tokens of Llama 3.1 8B: 3.47 ms of compute at 60% of 989 TFLOP/s, but the prefill reads
    # 16,060,522,496 - (128,256 - 128) x 4,096 x 2 = 15,009,857,536 B of weights: 4.48 ms at 3.35 TB/s
    weights_ms = (8_030_261_248 * 2 - (128_256 - 128) * 4096 * 2) / 3.35e12 * 1e3
    view = kd.fetch_recompute_view("llama-3.1-8b", 50e9, 0.6, contexts=(128,))
    assert f"{weights_ms:,.2f} (weights' read)" in view and "4.48" in f"{weights_ms:.2f}"


def test_gpu_dropdowns_offer_single_gpus_not_the_nvl72_domain():
    pinned("ipywidgets")
    from ipywidgets import Dropdown

    def gpu_options(box):
        found = [w for w in box.children if isinstance(w, Dropdown) and w.description == "GPU"]
        assert len(found) == 1
        return found[0].options

    for box in (kd.fetch_recompute_explorer(["llama-3.1-8b"]), kd.crossover_explorer(["llama-3.1-8b"])):
        options = gpu_options(box)
        assert "GB200-NVL72" not in options and {"H100-SXM", "B300", "GB200"} <= set(options)
