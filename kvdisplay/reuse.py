"""Views of prefix reuse: blocks shared by a common prompt, and fetching a prefix against recomputing it.

Each view is a plain function returning HTML, every figure from kvlib
(``kvlib.prefix_cache.prefix_sharing_savings``, ``kvlib.offload.fetch_or_recompute`` and
``break_even_context``); the explorers only wire ipywidgets controls to them.

Used in: ch05_prefix_reuse (section "Explore").
"""

from __future__ import annotations

import html

import kvlib as kv

from .explorer import LABEL_WIDTH, SLIDER_WIDTH, wire
from .text import model_name

BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
LINKS_GB_PER_S = (1, 2, 4, 8, 16, 25, 32, 50, 64, 100, 200, 400, 900)   # GB/s (10^9 B/s)
FETCH_CONTEXTS = (128, 512, 2048, 8192, 32768, 131072)
_STYLE = "font-family:sans-serif;font-size:13px;line-height:1.6"
_MAX_CELLS = 64


def _strip(shared_blocks: int, tail_tokens: int, block_size: int) -> str:
    """One request's prompt as a row of blocks: shared ones green, the partial last one orange."""
    cells = ["<span style='display:inline-block;width:12px;height:12px;margin:1px;background:#2e7d32'></span>"]
    cells *= min(shared_blocks, _MAX_CELLS)
    more = f" … {shared_blocks - _MAX_CELLS:,} more" if shared_blocks > _MAX_CELLS else ""
    tail = ""
    if tail_tokens:
        width = max(2, round(12 * tail_tokens / block_size))
        tail = (f"<span style='display:inline-block;width:{width}px;height:12px;margin:1px;"
                "background:#dd8452'></span>")
    return f"<div style='margin:4px 0'>{''.join(cells)}{more}{tail}</div>"


def prefix_sharing_view(prompt_tokens: int, block_size: int, num_requests: int, bytes_per_token: int,
                        model: str = "") -> str:
    """A shared prompt at block granularity, as HTML.

    shared blocks = ``floor(P / bs)``, tokens recomputed per request = ``P mod bs``; memory
    unshared ``N P b_tok`` against shared, and prefill tokens skipped, all from
    ``kv.prefix_cache.prefix_sharing_savings(P, N, b_tok, bs)``.

    >>> view = prefix_sharing_view(2007, 16, 100, 131072)
    >>> "full blocks shared: <b>125</b>" in view, "tokens recomputed per request: <b>7</b>" in view
    (True, True)

    Used in: ch05_prefix_reuse (through prefix_sharing_explorer).
    """
    s = kv.prefix_cache.prefix_sharing_savings(prompt_tokens, num_requests, bytes_per_token, block_size)
    gb = kv.format_gb_gib
    who = f"{html.escape(model)}, " if model else ""
    return (f"<div style='{_STYLE}'>"
            f"{who}{kv.format_bytes(bytes_per_token)} per token; a {prompt_tokens:,}-token prompt in "
            f"{block_size}-token blocks, sent by {num_requests:,} requests<br>"
            f"full blocks shared: <b>{s.shared_blocks:,}</b> ({s.hit_tokens_per_request:,} tokens hit per request "
            f"after the first)<br>"
            f"tokens recomputed per request: <b>{s.tail_tokens:,}</b> (the partial last block, held by each "
            f"request)<br>"
            f"memory: unshared <b>{gb(s.unshared_bytes)}</b>, shared <b>{gb(s.shared_bytes)}</b> "
            f"(saved {gb(s.saved_bytes)}; as whole blocks allocated {gb(s.shared_block_bytes)})<br>"
            f"prefill: <b>{s.prefill_tokens_shared:,}</b> tokens instead of {s.prefill_tokens_unshared:,}"
            f"{_strip(s.shared_blocks, s.tail_tokens, block_size)}"
            "<span style='color:#2e7d32'>■</span> a shared full block &nbsp;"
            "<span style='color:#dd8452'>■</span> the partial last block (recomputed)</div>")


def fetch_recompute_view(model: str, link_bytes_per_s, mfu: float, *, gpu: str = "H100-SXM",
                         fetch_overhead_s: float = 0.0, contexts=FETCH_CONTEXTS) -> str:
    """Fetch a cached prefix over a link or recompute it, across context lengths, as HTML.

    Each row is ``kv.offload.fetch_or_recompute(..., roofline=True)`` (fetch = overhead +
    T b_tok / link; recompute = the larger of prefill FLOPs / (mfu x peak) and the weights'
    read over the HBM bandwidth, the roofline of ch06); the break-even is
    ``kv.offload.break_even_context(..., roofline=True)``.

    >>> view = fetch_recompute_view("llama-3.1-8b", 50e9, 0.6)
    >>> "fetch wins from <b>1</b> token" in view, "no prefill of an idle engine is shorter than <b>4.48 ms</b>" in view
    (True, True)

    Used in: ch05_prefix_reuse (through fetch_recompute_explorer).
    """
    spec = kv.load_model(model)
    device = kv.get_gpu(gpu)
    even = kv.offload.break_even_context(spec, link_bytes_per_s=link_bytes_per_s, gpu=gpu, mfu=mfu,
                                         fetch_overhead_s=fetch_overhead_s, roofline=True)
    rows = []
    for t in contexts:
        r = kv.offload.fetch_or_recompute(spec, t, link_bytes_per_s=link_bytes_per_s, gpu=gpu, mfu=mfu,
                                          fetch_overhead_s=fetch_overhead_s, roofline=True)
        color = "#2e7d32" if r.winner == "fetch" else "#c0392b"
        floor = " (weights' read)" if r.weight_read_s > r.compute_s else ""
        rows.append(f"<tr><td>{t:,}</td><td>{kv.format_gb_gib(r.kv_bytes)}</td><td>{r.fetch_s * 1e3:,.2f}</td>"
                    f"<td>{r.recompute_s * 1e3:,.2f}{floor}</td><td style='color:{color}'><b>{r.winner}</b> "
                    f"({r.speedup:.1f}×)</td></tr>")
    first = kv.offload.fetch_or_recompute(spec, contexts[0], gpu=gpu)
    if even is None:
        verdict = "recompute wins at every length up to 10 million tokens"
    else:
        verdict = f"fetch wins from <b>{even:,}</b> token{'s' if even > 1 else ''} on"
    cell = "style='padding:2px 10px;text-align:right'"
    head = "".join(f"<th {cell}>{h}</th>" for h in ("prefix (tokens)", "KV bytes", "fetch (ms)", "recompute (ms)",
                                                     "faster"))
    body = "".join(rows).replace("<td>", f"<td {cell}>")
    return (f"<div style='{_STYLE}'>{model_name(spec)} on one {device.name} "
            f"({device.bf16_flop_per_s / 1e12:,.0f} TFLOP/s dense bf16) at {mfu:.0%} MFU; link "
            f"{link_bytes_per_s / kv.GB:,.0f} GB/s; fixed cost per fetch {fetch_overhead_s * 1e3:g} ms<br>"
            f"no prefill of an idle engine is shorter than <b>{first.weight_read_s * 1e3:,.2f} ms</b>, the time to "
            f"read its {kv.format_gb_gib(first.weight_bytes)} of weights once at "
            f"{device.bandwidth_bytes_per_s / 1e12:g} TB/s (the roofline of chapter 06); in a busy engine's step, "
            f"whose weights are read for the other requests anyway, a recompute costs its FLOPs alone<br>"
            f"break-even: {verdict}"
            f"<table style='border-collapse:collapse;margin-top:4px'><tr>{head}</tr>{body}</table></div>")


def _controls():
    import ipywidgets as widgets
    return widgets, {"description_width": LABEL_WIDTH}, widgets.Layout(width=SLIDER_WIDTH)


def prefix_sharing_explorer(models, *, prompt_tokens: int = 2007, block_size: int = 16, num_requests: int = 100):
    """Sliders for prompt length, block size and requests over ``prefix_sharing_view``.

    ``models``: bundled model names for the menu (their bytes per token at bf16).
    Returns the ``VBox``; its ``.view`` is the HTML widget the controls redraw.

    Used in: ch05_prefix_reuse.
    """
    widgets, style, layout = _controls()
    specs = {model_name(kv.load_model(m)): kv.load_model(m) for m in models}
    model_w = widgets.Dropdown(options=list(specs), description="model", style=style)
    prompt_w = widgets.IntSlider(prompt_tokens, min=1, max=8192, description="prompt T_p (tokens)",
                                 style=style, layout=layout)
    block_w = widgets.SelectionSlider(options=BLOCK_SIZES, value=block_size, description="block size (tokens)",
                                      style=style, layout=layout)
    requests_w = widgets.IntSlider(num_requests, min=1, max=1000, description="sequences B (requests)", style=style,
                                   layout=layout)
    return wire((model_w, prompt_w, block_w, requests_w),
                lambda: prefix_sharing_view(prompt_w.value, block_w.value, requests_w.value,
                                            specs[model_w.value].kv_bytes_per_token(), model_w.value))


def fetch_recompute_explorer(models, *, link_gb_per_s: int = 50, mfu: float = 0.6, gpu: str = "H100-SXM"):
    """Sliders for link bandwidth, MFU and a fixed fetch cost over ``fetch_recompute_view``.

    Used in: ch05_prefix_reuse.
    """
    widgets, style, layout = _controls()
    model_w = widgets.Dropdown(options=[(model_name(kv.load_model(m)), m) for m in models], description="model",
                               style=style)
    gpu_w = widgets.Dropdown(options=list(kv.gpus.single_gpus()), value=kv.get_gpu(gpu).name, description="GPU", style=style)
    link_w = widgets.SelectionSlider(options=LINKS_GB_PER_S, value=link_gb_per_s, description="link (GB/s)",
                                     style=style, layout=layout)
    mfu_w = widgets.SelectionSlider(options=[(f"{m}%", m / 100) for m in range(10, 101, 5)], value=mfu,
                                    description="MFU (% of peak)", style=style, layout=layout)
    overhead_w = widgets.SelectionSlider(options=(0, 0.5, 1, 2, 5, 10, 20, 50), value=0,
                                         description="fetch cost (ms)", style=style, layout=layout)
    return wire((model_w, gpu_w, link_w, mfu_w, overhead_w),
                lambda: fetch_recompute_view(model_w.value, link_w.value * kv.GB, mfu_w.value, gpu=gpu_w.value,
                                             fetch_overhead_s=overhead_w.value / 1e3))
