"""The weight/KV crossover as pictures: bytes read per decode step, the roofline, the explorer.

A decode step reads every weight once and every running sequence's whole KV cache once.
``step_bytes_figure`` draws that read as a stacked bar per workload (weights under cache),
``roofline_plot`` puts decode steps on a GPU's roofline, ``step_bytes_svg`` draws one step's
bar fast enough for a slider, and ``crossover_view`` is the plain
function behind the explorer (``crossover_explorer`` only wires ipywidgets controls to it):
every figure in them comes from ``kvlib`` (``kv.roofline.decode_step``).

Used in: ch06_crossover.
"""

from __future__ import annotations

import html

import kvlib as kv

from .explorer import wire
from .text import model_name

WEIGHT_COLOR = "#4c72b0"
CACHE_COLOR = "#dd8452"
CACHE_TEXT_COLOR = "#b35806"   # the cache's orange, dark enough for text on white (4.9:1; WCAG AA asks 4.5:1)
SLIDER_WIDTH = "640px"
LABEL_WIDTH = "170px"
BATCHES = tuple(2**i for i in range(0, 10))      # 1 .. 512 sequences
CONTEXTS = tuple(2**i for i in range(9, 18))     # 512 .. 131,072 tokens
KV_DTYPES = (("bf16", 2), ("fp8", 1))
DEFAULT_EFFICIENCY = 0.7
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
TPS = (1, 2, 4, 8)


def step_bytes_figure(rows, *, title: str = "", figsize=(8, 3.2), dpi: int = 100):
    """A stacked bar per workload: weight bytes (bottom) and KV bytes (top) one decode step reads.

    ``rows`` is a list of ``(label, weight_bytes, kv_bytes)`` [B]; the bars are drawn in
    GB (10^9 bytes) and the dashed line marks the weights, so a cache segment that
    pokes above twice the line's height is a cache-dominated step. Returns the
    matplotlib Figure.

    >>> fig = step_bytes_figure([("B=1", 16_060_522_496, 536_870_912)])
    >>> fig.axes[0].get_ylabel()
    'bytes read per step (GB, 10⁹ B)'

    Used in: ch06_crossover.
    """
    import matplotlib.pyplot as plt

    if not rows:
        raise ValueError("step_bytes_figure: no rows")
    fig, ax = plt.subplots(figsize=figsize, dpi=dpi)
    labels = [r[0] for r in rows]
    weights = [r[1] / kv.GB for r in rows]
    caches = [r[2] / kv.GB for r in rows]
    ax.bar(labels, weights, color=WEIGHT_COLOR, label="weights (read once per step)")
    ax.bar(labels, caches, bottom=weights, color=CACHE_COLOR, label="KV cache of every sequence")
    for x, (w, c) in enumerate(zip(weights, caches)):
        share = c / (w + c) if w + c else 0
        ax.text(x, w + c, f"{w + c:,.1f} GB\n{share:.0%} cache", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("bytes read per step (GB, 10⁹ B)")
    ax.set_ylim(0, max(w + c for w, c in zip(weights, caches)) * 1.3)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    plt.close(fig)   # shown once, as the cell's value
    return fig


def step_ops_figure(ops, *, bandwidth_bytes_per_s, peak_flop_per_s, title: str = "", figsize=(8, 3.4),
                    dpi: int = 100):
    """One decode step as the sum of its operations: a pair of bars per ``kv.roofline.StepOp``.

    For each operation the lighter bar is its read time ``bytes / BW`` and the darker its math time
    ``FLOPs / F`` [ms]; the operation costs the longer of the two (labelled), and the step is the sum of
    those. The last pair is the whole step taken as one kernel (``kv.roofline.one_intensity_seconds``):
    all its bytes against all its FLOPs, the figure one intensity gives. Returns the matplotlib Figure.

    >>> op = kv.roofline.StepOp("matmuls", 4 * 10**9, 2e12, "compute", 2e12 / 1e15)
    >>> fig = step_ops_figure([op], bandwidth_bytes_per_s=4e12, peak_flop_per_s=1e15)
    >>> fig.axes[0].get_xlabel()
    'time (ms)'

    Used in: ch06_crossover.
    """
    import matplotlib.pyplot as plt

    ops = list(ops)
    if not ops:
        raise ValueError("step_ops_figure: no operations")
    whole = kv.roofline.StepOp("whole step as one kernel", sum(op.bytes for op in ops),
                               sum(op.flops for op in ops), "", 0.0)
    rows = ops + [whole]
    fig, ax = plt.subplots(figsize=figsize, dpi=dpi)
    ys = list(range(len(rows)))[::-1]
    read = [op.bytes / bandwidth_bytes_per_s * 1e3 for op in rows]
    math = [op.flops / peak_flop_per_s * 1e3 for op in rows]
    ax.barh([y + 0.2 for y in ys], read, height=0.38, color=CACHE_COLOR, label="read: bytes ÷ bandwidth")
    ax.barh([y - 0.2 for y in ys], math, height=0.38, color=WEIGHT_COLOR, label="math: FLOPs ÷ peak")
    for y, r, m, op in zip(ys, read, math, rows):
        bound = "compute" if m > r else "bandwidth"
        ax.text(max(r, m) * 1.02, y, f"{max(r, m):.2f} ms ({bound}-bound)", va="center", fontsize=8)
    total = sum(op.seconds for op in ops) * 1e3
    ax.set_yticks(ys, [op.name for op in rows], fontsize=8)
    ax.set_xlabel("time (ms)")
    ax.set_xlim(0, max(read + math) * 1.45)
    ax.set_title(title or f"step = sum of the operations' times = {total:.2f} ms", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    plt.close(fig)   # shown once, as the cell's value
    return fig


def figure_img(fig, *, dpi: int = 90) -> str:
    """A matplotlib figure as an ``<img>`` tag (PNG inline), to fold a plot inside a worked answer; its alt
    text is the figure described (``kvdisplay.alt_text.figure_alt``), as for a figure a cell displays.

    >>> figure_img(step_bytes_figure([("B=1", 2, 1)])).startswith("<img alt='Bar chart of bytes read per step")
    True

    Used in: ch06_crossover.
    """
    import base64
    import io

    from .alt_text import figure_alt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    alt = html.escape(figure_alt(fig) or "a figure", quote=True)
    return f"<img alt='{alt}' src='data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}'>"


def roofline_plot(gpu: str, points, *, figsize=(11, 4.6)):
    """A GPU's roofline (bf16, dense) with decode steps on it, log-log.

    ``points`` is a list of ``(label, step)`` with ``step`` a ``kv.roofline.DecodeStep``:
    each is drawn at its arithmetic intensity [FLOP/B] and the FLOP/s it attains at the
    roofline bound (``flops / step_s_bound``), as a hollow marker of its own shape with its
    number beside it (the legend numbers them too), so that neighbours do not hide each
    other. The roof is ``min(peak, BW x intensity)``; the ridge point, ``peak / BW``, is marked.

    >>> step = kv.roofline.decode_step("llama-3.1-8b", batch=32, context=4096)
    >>> fig = roofline_plot("H100-SXM", [("B=32", step)])
    >>> fig.axes[0].get_xlabel()
    'arithmetic intensity (FLOP/B)'

    Used in: ch06_crossover.
    """
    import matplotlib.pyplot as plt

    card = kv.get_gpu(gpu)
    bw, peak = card.bandwidth_bytes_per_s, card.bf16_flop_per_s
    ridge = card.ridge_flop_per_byte
    xs = [10 ** (-0.5 + 4.5 * i / 199) for i in range(200)]
    fig, ax = plt.subplots(figsize=figsize)
    ax.plot(xs, [min(peak, bw * x) / 1e12 for x in xs], color="black",
            label=f"{card.name} roof: min(peak, BW × intensity)")
    ax.axvline(ridge, color="gray", linestyle=":", label=f"ridge point {ridge:.0f} FLOP/B")
    for i, (label, step) in enumerate(points):
        attained = step.flops / step.step_s_bound / 1e12
        # a shape and a number per point, hollow and drawn larger first, so that close points stay visible
        marker = MARKERS[i % len(MARKERS)]
        ax.scatter([step.arithmetic_intensity], [attained], zorder=3 + i, marker=marker, s=110 - 8 * i,
                   facecolors="none", edgecolors=f"C{i}", linewidths=1.6, label=f"{i + 1}. {label}")
        ax.annotate(str(i + 1), (step.arithmetic_intensity, attained), textcoords="offset points",
                    xytext=(6, 6 if i % 2 == 0 else -12), fontsize=8, color=f"C{i}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/B)")
    ax.set_ylabel("attainable compute (TFLOP/s, 10¹² FLOP/s)")
    ax.set_title(f"Decode steps on the {card.name} roofline (bf16 dense)", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    plt.close(fig)
    return fig


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 5 x 10^k at or above ``value`` (an axis top)."""
    import math

    power = 10 ** math.floor(math.log10(value)) if value > 0 else 1
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def step_bytes_svg(weight_bytes: int, kv_bytes: int, *, width: int = 400, height: int = 240) -> str:
    """One decode step's read as an inline SVG stacked bar: weights (bottom), cache (top), in GB.

    Drawn by hand rather than by matplotlib so that the explorer redraws in a few
    milliseconds. The axis top is the next 1-2-5 step above the read; a dashed line marks
    twice the weights, the height at which the cache equals the weights (the crossover).

    >>> svg = step_bytes_svg(16_060_522_496, 17_179_869_184)
    >>> svg.startswith("<svg") and "16.06 GB weights" in svg and "17.18 GB cache" in svg
    True

    Used in: ch06_crossover (through crossover_explorer).
    """
    total = weight_bytes + kv_bytes
    top = _nice_ceiling(max(total, 2 * weight_bytes) / kv.GB * 1.05)
    plot_h, x0, bar_w = height - 40, 58, 70

    def y(gb: float) -> float:
        return 10 + plot_h * (1 - gb / top)

    w_gb, k_gb = weight_bytes / kv.GB, kv_bytes / kv.GB
    ticks = "".join(f"<line x1='{x0 - 4}' x2='{x0}' y1='{y(t):.1f}' y2='{y(t):.1f}' stroke='#555'/>"
                    f"<text x='{x0 - 7}' y='{y(t) + 4:.1f}' text-anchor='end'>{t:g}</text>"
                    for t in (top * i / 4 for i in range(5)))
    cross = y(2 * w_gb)
    described = (f"Stacked bar of the bytes one decode step reads: {w_gb:,.2f} GB of weights under {k_gb:,.2f} GB of "
                 f"cache; the dashed line, at twice the weights, is where the cache equals them"
                 f"{' (the cache is above it)' if kv_bytes > weight_bytes else ''}.")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
            f"aria-label='{html.escape(described, quote=True)}' style='font-family:sans-serif;font-size:11px'>"
            f"<line x1='{x0}' x2='{x0}' y1='10' y2='{y(0):.1f}' stroke='#555'/>{ticks}"
            f"<text x='12' y='{10 + plot_h / 2:.0f}' transform='rotate(-90 12 {10 + plot_h / 2:.0f})' "
            f"text-anchor='middle'>bytes read per step (GB, 10⁹ B)</text>"
            f"<rect x='{x0 + 20}' y='{y(w_gb):.1f}' width='{bar_w}' height='{y(0) - y(w_gb):.1f}' "
            f"fill='{WEIGHT_COLOR}'><title>weights {w_gb:,.2f} GB</title></rect>"
            f"<rect x='{x0 + 20}' y='{y(w_gb + k_gb):.1f}' width='{bar_w}' height='{y(w_gb) - y(w_gb + k_gb):.1f}' "
            f"fill='{CACHE_COLOR}'><title>cache {k_gb:,.2f} GB</title></rect>"
            f"<line x1='{x0}' x2='{x0 + bar_w + 40}' y1='{cross:.1f}' y2='{cross:.1f}' stroke='#333' "
            f"stroke-dasharray='4 3'/><text x='{x0 + bar_w + 42}' y='{cross - 3:.1f}'>cache = weights</text>"
            f"<text x='{x0 + bar_w + 26}' y='{(y(0) + y(w_gb)) / 2 + 4:.1f}' fill='{WEIGHT_COLOR}'>"
            f"{w_gb:,.2f} GB weights</text>"
            f"<text x='{x0 + bar_w + 26}' y='{min(y(w_gb) - 4, (y(w_gb) + y(w_gb + k_gb)) / 2 + 4):.1f}' "
            f"fill='{CACHE_TEXT_COLOR}'>{k_gb:,.2f} GB cache</text>"
            f"<text x='{x0 + 20 + bar_w / 2}' y='{height - 12}' text-anchor='middle'>one step</text></svg>")


def deployment_note(check) -> str:
    """One line of HTML for a ``kv.check_deployment`` record: the pool it fits, or in red why it cannot run.

    Explorers show it under their figures, so a setting no engine would start is flagged, not computed
    silently. Used in: ch06_crossover, ch09_interview_drills (through the explorers).
    """
    if check.fits:
        return (f"memory: the batch's cache ({kv.format_gb_gib(check.kv_bytes_per_gpu)}) fits the KV pool of "
                f"{kv.format_gb_gib(check.pool_bytes)} left on one {check.gpu}")
    return (f"<b style='color:#c0392b'>{html.escape(check.summary())}</b>: an engine would not run this; "
            f"the figures above describe a deployment that cannot exist")


def fix_speedups(step, per_token: int, batch: int, context: int) -> tuple:
    """(int4 weights' speedup, an fp8 cache's speedup) of a bandwidth-bound ``step``, each at the bandwidth
    limit: int4 reads a quarter of the weights, fp8 half the cache (``kv.decode_step_seconds``). The two tie
    where the cache read is 1.5 times the weights (¾ W = ½ cache), as ch06 §7 derives.

    >>> s = kv.roofline.decode_step("llama-3.1-8b", batch=32, context=4096, embedding_rows=True)
    >>> [round(x, 2) for x in fix_speedups(s, 131_072, 32, 4096)]
    [1.54, 1.36]

    Used in: ch06_crossover (the explorer).
    """
    bw = step.bandwidth_bytes_per_s
    now = kv.decode_step_seconds(step.weight_bytes, per_token, context, batch, bw)
    int4 = kv.decode_step_seconds(step.weight_bytes / 4, per_token, context, batch, bw)
    fp8 = kv.decode_step_seconds(step.weight_bytes, per_token / 2, context, batch, bw)
    return now / int4, now / fp8


def crossover_view(model: str, batch: int, context: int, *, gpu: str = "H100-SXM", kv_dtype_bytes: int = 2,
                   efficiency: float = DEFAULT_EFFICIENCY, tp: int = 1) -> str:
    """The explorer's view as HTML: step time, tokens/s, ITL, the regime and the stacked bar.

    Every figure is ``kv.roofline.decode_step(model, batch=, context=, gpu=, kv_dtype_bytes=,
    efficiency=)``: bytes per step ``W + B x T x bytes per token`` [B], the step time at the
    bandwidth limit ``bytes / BW`` [s] and at ``efficiency`` (the share of peak bandwidth
    reached), tokens/s ``B / step``, and the crossover context ``W / (bytes per token x B)``.
    The weights are what a step reads (``embedding_rows=True``: of the input embedding, the
    batch's B rows), per GPU under tensor parallelism ``tp``, as is the cache.

    >>> view = crossover_view("llama-3.1-8b", 32, 4096)
    >>> "step time at the bandwidth limit: <b>9.61 ms</b>" in view, "cache-dominated" in view
    (True, True)

    Used in: ch06_crossover (through crossover_explorer); benchmarks/run.py may time it.
    """
    step = kv.roofline.decode_step(model, batch=batch, context=context, gpu=gpu, kv_dtype_bytes=kv_dtype_bytes,
                                   efficiency=efficiency, tp=tp, embedding_rows=True)
    spec = kv.load_model(model)
    per_token = spec.kv_bytes_per_token(kv_dtype_bytes, tp=tp)
    cross = kv.roofline.first_cache_context(step.weight_bytes, per_token, batch)
    gb = kv.format_gb_gib
    dtype = dict((b, n) for n, b in KV_DTYPES).get(kv_dtype_bytes, f"{kv_dtype_bytes}-byte")
    color = CACHE_TEXT_COLOR if step.regime == kv.roofline.CACHE_DOMINATED else WEIGHT_COLOR
    int4_gain, fp8_gain = fix_speedups(step, per_token, batch, context)
    wants = (f"an fp8 cache takes off more ({fp8_gain:.2f}× against int4 weights' {int4_gain:.2f}×); so do fewer "
             "KV heads or a latent (the model's design)" if fp8_gain > int4_gain else
             f"int4 weights take off more ({int4_gain:.2f}× against an fp8 cache's {fp8_gain:.2f}×)")
    fits = deployment_note(kv.check_deployment(spec, gpu, tp=tp, batch_size=batch, seq_len=context,
                                               kv_dtype_bytes=kv_dtype_bytes))
    limit = "" if step.limit == "bandwidth" else " <b style='color:#c0392b'>(compute-bound here)</b>"
    return (f"<div style='font-family:sans-serif;font-size:13px;line-height:1.6;display:flex;gap:18px;"
            f"align-items:flex-start'><div style='flex:1;min-width:0'>"
            f"{html.escape(model_name(spec))} on {'one' if tp == 1 else f'each of {tp}'} {step.gpu}"
            f"{'' if tp == 1 else f' (TP {tp})'}, bf16 weights, {dtype} cache, "
            f"{batch} sequence{'s' if batch > 1 else ''} × {context:,} tokens<br>"
            f"bytes read per step{'' if tp == 1 else ' per GPU'}: weights {gb(step.weight_bytes)} (of the input "
            f"embedding, only the batch's {batch:,} row{'s' if batch > 1 else ''}) + cache {gb(step.kv_bytes)} = "
            f"<b>{gb(step.bytes_per_step)}</b><br>"
            f"step time at the bandwidth limit: <b>{step.bandwidth_s * 1e3:,.2f} ms</b> "
            f"({step.bandwidth_bytes_per_s / 1e12:g} TB/s){limit}<br>"
            f"at {efficiency:.0%} of peak bandwidth: step (ITL) <b>{step.step_s * 1e3:,.2f} ms</b>, "
            f"<b>{step.tokens_per_s:,.0f} tokens/s</b> for the batch<br>"
            f"regime: <b style='color:{color}'>{step.regime}</b>: {wants}<br>"
            f"crossover at this batch: from context {cross:,} tokens on (rounded up: the first whole context "
            f"whose cache read reaches the weights)<br>"
            f"arithmetic intensity {step.arithmetic_intensity:,.1f} FLOP/B against a ridge of "
            f"{step.ridge_flop_per_byte:,.0f} FLOP/B<br>{fits}</div>"
            f"{step_bytes_svg(step.weight_bytes, step.kv_bytes)}"
            "</div>")


def crossover_explorer(models, *, gpu: str = "H100-SXM"):
    """The explorer as ipywidgets: model, GPU, batch, context, KV dtype, efficiency, TP.

    ``models`` are names ``kv.load_model`` knows. Returns the ``VBox``; its ``.view`` is
    the HTML widget the controls redraw with ``crossover_view``.

    Used in: ch06_crossover.
    """
    import ipywidgets as widgets

    style = {"description_width": LABEL_WIDTH}
    layout = widgets.Layout(width=SLIDER_WIDTH)
    names = {model_name(kv.load_model(m)): m for m in models}
    model_w = widgets.Dropdown(options=list(names), description="model", style=style)
    gpu_w = widgets.Dropdown(options=list(kv.gpus.single_gpus()), value=kv.get_gpu(gpu).name, description="GPU",
                             style=style)
    batch_w = widgets.SelectionSlider(options=[(f"{b}", b) for b in BATCHES], value=32,
                                      description="batch B (sequences)", style=style, layout=layout)
    context_w = widgets.SelectionSlider(options=[(f"{t:,}", t) for t in CONTEXTS], value=4096,
                                        description="context T (tokens)", style=style, layout=layout)
    dtype_w = widgets.ToggleButtons(options=list(KV_DTYPES), value=2, description="KV cache dtype",
                                    style={**style, "button_width": "90px"})
    eff_w = widgets.FloatSlider(DEFAULT_EFFICIENCY, min=0.3, max=1.0, step=0.05, readout_format=".0%",
                                description="bandwidth reached", style=style, layout=layout)
    tp_w = widgets.ToggleButtons(options=[(f"TP {t}", t) for t in TPS], value=1, description="GPUs (TP)",
                                 style={**style, "button_width": "60px"})
    return wire((model_w, gpu_w, batch_w, context_w, dtype_w, eff_w, tp_w),
                lambda: crossover_view(names[model_w.value], batch_w.value, context_w.value, gpu=gpu_w.value,
                                       kv_dtype_bytes=dtype_w.value, efficiency=eff_w.value, tp=tp_w.value))
