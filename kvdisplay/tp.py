"""Tensor parallelism made visible: each GPU's slice of a KV cache, and the TP explorer.

Under tensor parallelism (TP) the KV heads of every layer are dealt out to the GPUs:
with ``tp`` GPUs and K KV heads, GPU r holds heads ``r * K/tp .. (r+1) * K/tp - 1`` while
``tp <= K``; past that, ``tp / K`` GPUs share each head and each keeps its own copy
(GPU r holds head ``r // (tp / K)``), the rule of vLLM's ``get_num_kv_heads`` that kvlib
states as ``kv.kv_heads_per_gpu``. ``tp_kv_slices`` cuts a numpy cache that way, so the
``.nbytes`` of one GPU's slice can be set beside ``spec.kv_bytes_per_token(tp=...)``.
``tp_explorer_view`` is a plain function returning the explorer's HTML (tests and
benchmarks call it); ``tp_explorer`` wires ipywidgets controls to it.

Used in: ch02_gqa_tp.
"""

from __future__ import annotations

import html

import kvlib as kv

from .text import model_name

DEFAULT_RESERVE_BYTES = 5 * kv.GB   # activations and workspace per GPU under TP (chapter 02's Question 2)
TP_SIZES = tuple(2**i for i in range(7))         # 1 .. 64 GPUs
GPUS_PER_NODE = 8                                # an HGX/DGX server: TP past 8 spans nodes
CONTEXTS = tuple(2**i for i in range(10, 21))    # 1,024 .. 1,048,576 tokens
SLIDER_WIDTH = "640px"
LABEL_WIDTH = "170px"


def _check_split(kv_heads: int, tp: int) -> None:
    for name, value in (("kv_heads", kv_heads), ("tp", tp)):
        if type(value) is not int or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if kv_heads % tp and tp % kv_heads:
        raise ValueError(f"tp={tp} must divide kv_heads={kv_heads} or be a multiple of it")


def heads_held(kv_heads: int, tp: int) -> list:
    """The KV-head indices each of ``tp`` GPUs holds: a list of ``tp`` tuples.

    Split while ``tp <= kv_heads`` (each GPU ``kv_heads // tp`` consecutive heads);
    replicated past it (GPU r holds head ``r // (tp // kv_heads)``). A ValueError names
    a ``tp`` that neither divides ``kv_heads`` nor is a multiple of it.

    >>> heads_held(kv_heads=4, tp=2), heads_held(kv_heads=2, tp=4)
    ([(0, 1), (2, 3)], [(0,), (0,), (1,), (1,)])

    Used in: ch02_gqa_tp.
    """
    _check_split(kv_heads, tp)
    per_gpu = kv.kv_heads_per_gpu(kv_heads, tp)
    if tp <= kv_heads:
        return [tuple(range(r * per_gpu, (r + 1) * per_gpu)) for r in range(tp)]
    return [(r // (tp // kv_heads),) for r in range(tp)]


def tp_kv_slices(cache, tp: int, head_axis: int = -3) -> list:
    """Each GPU's part of ``cache`` under tensor parallelism ``tp``: a list of ``tp`` numpy arrays.

    ``cache`` is any array whose ``head_axis`` counts KV heads (default -3, as in
    ``[layers, 2, kv_heads, seq_len, head_dim]`` and ``kd.kv_cache_array``'s layout).
    GPU r's array holds the heads ``heads_held(K, tp)[r]``; its ``.nbytes`` is that GPU's
    cache, ``kv_heads_per_gpu(K, tp) / K`` of the whole [B]. Replicated heads are copies,
    as on real GPUs, so the slices' bytes add up to more than the cache past ``tp = K``.

    >>> import numpy as np
    >>> cache = np.zeros((2, 2, 4, 3, 8), dtype=np.float16)     # L=2, K=4, T=3, D=8, 2 B
    >>> [s.nbytes for s in tp_kv_slices(cache, 2)], [s.nbytes for s in tp_kv_slices(cache, 8)]
    ([384, 384], [192, 192, 192, 192, 192, 192, 192, 192])

    Used in: ch02_gqa_tp.
    """
    import numpy as np

    kv_heads = cache.shape[head_axis]
    return [np.take(cache, list(held), axis=head_axis) for held in heads_held(kv_heads, tp)]


def _valid(num_heads: int, kv_heads: int, tp: int) -> str:
    """Why an engine would refuse this split ('' when it runs): query and KV heads must both divide."""
    if num_heads % tp:
        return f"{num_heads} query heads do not split over {tp} GPUs"
    if kv_heads % tp and tp % kv_heads:
        return f"{kv_heads} KV heads neither split evenly over {tp} GPUs nor divide {tp}"
    return ""


def _gpu_strip(kv_heads: int, tp: int) -> str:
    """One box per GPU naming the KV heads it holds; a replicated head shaded."""
    boxes = []
    for r, held in enumerate(heads_held(kv_heads, tp)):
        copy = tp > kv_heads
        text = f"{held[0]}" if len(held) == 1 else f"{held[0]}–{held[-1]}"
        boxes.append(f"<div title='GPU {r}: KV head(s) {text}' style='flex:1;min-width:0;border:1px solid #555;"
                     f"background:{'#f4c7a1' if copy else '#cfe0f3'};text-align:center;font-size:11px;"
                     f"overflow:hidden;white-space:nowrap'>{text if tp <= 16 else ''}</div>")
    return ("<div style='display:flex;gap:2px;width:100%;max-width:900px;height:20px;margin-top:4px'>"
            + "".join(boxes) + "</div>")


def tp_explorer_view(layers: int, num_heads: int, kv_heads: int, head_dim: int, dtype_bytes: int, tp: int,
                     seq_len: int, gpu: str = "H100-SXM", weight_bytes: int = 0,
                     reserve_bytes: int = DEFAULT_RESERVE_BYTES) -> str:
    """The TP explorer's view as HTML, every figure from kvlib.

    KV heads per GPU = ``kv.kv_heads_per_gpu(K, tp)``; per-GPU bytes per token =
    ``kv.kv_bytes_per_token(L, heads per GPU, D, b)`` [B]; weights per GPU =
    ``kv.weight_bytes_per_gpu(W, tp)`` [B]; sequences per GPU =
    ``kv.max_concurrency(M - W/tp - R, per-GPU bytes per token * T)`` with M the GPU's memory
    as CUDA reports it. Past ``tp = K`` the view says how many copies of each head the
    GPUs keep; past ``GPUS_PER_NODE`` it says how many 8-GPU nodes the TP group spans (TP
    across nodes is unusual: engines use pipeline or data parallelism between nodes). A
    split no engine runs (query or KV heads not dividing) is named instead.

    >>> view = tp_explorer_view(80, 64, 8, 128, 2, tp=8, seq_len=8192, weight_bytes=141_107_412_992)
    >>> "per-GPU bytes per token: <b>40,960 B (40 KiB)</b>" in view
    True
    >>> "2 copies of each KV head" in tp_explorer_view(32, 32, 8, 128, 2, tp=16, seq_len=8192)
    True
    >>> "spans 2 nodes of 8 GPUs" in tp_explorer_view(32, 32, 8, 128, 2, tp=16, seq_len=8192)
    True

    Used in: ch02_gqa_tp (through tp_explorer).
    """
    device = kv.get_gpu(gpu)
    problem = _valid(num_heads, kv_heads, tp)
    style = "<div style='font-family:sans-serif;font-size:13px;line-height:1.6'>"
    if problem:
        return (f"{style}<b style='color:#c0392b'>no engine runs this split</b>: {html.escape(problem)} "
                "(vLLM asks that TP divide the query heads, and divide the KV heads or be a multiple of "
                "them). Pick another TP or KV-head count.</div>")
    per_gpu_heads = kv.kv_heads_per_gpu(kv_heads, tp)
    per_token = kv.kv_bytes_per_token(layers, per_gpu_heads, head_dim, dtype_bytes)
    whole = kv.kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes)
    weights = kv.weight_bytes_per_gpu(weight_bytes, tp)
    budget = device.cuda_memory_bytes - weights - reserve_bytes
    per_seq = kv.kv_bytes_per_sequence(per_token, seq_len)
    fit = kv.max_concurrency(budget, per_seq) if budget > 0 else 0
    gb = kv.format_gb_gib
    copies = tp // kv_heads if tp > kv_heads else 1
    if copies > 1:
        split = (f"<b style='color:#b35900'>replicated</b>: {tp} GPUs for {kv_heads} KV heads, so "
                 f"{copies} copies of each KV head; per-GPU KV stopped shrinking at TP = {kv_heads}")
    else:
        split = f"split: {per_gpu_heads} of the {kv_heads} KV heads on each GPU, no copies"
    fits = (f"<b>{fit}</b>" if budget > 0 else
            f"<b style='color:#c0392b'>0</b> (the weights' share and the reserve exceed one {device.name})")
    nodes = -(-tp // GPUS_PER_NODE)
    where = (f"the TP group fits in one {GPUS_PER_NODE}-GPU node" if nodes == 1 else
             f"<b style='color:#b35900'>the TP group spans {nodes} nodes of {GPUS_PER_NODE} GPUs</b>: unusual, "
             "since every layer's all-reduce would cross the network; between nodes engines use pipeline or "
             "data parallelism")
    return (f"{style}"
            f"KV heads per GPU: <b>{per_gpu_heads}</b> ({split})<br>"
            f"per-GPU bytes per token: <b>{kv.format_bytes(per_token)}</b> "
            f"(whole model: {kv.format_bytes(whole)}; the {tp} GPUs store {kv.format_bytes(per_token * tp)} "
            "per token between them)<br>"
            f"weights per GPU: {gb(weights)}; reserve {gb(reserve_bytes)}; {device.name} as CUDA reports it: "
            f"{gb(device.cuda_memory_bytes)}<br>"
            f"{where}<br>"
            f"sequences of {seq_len:,} tokens per GPU (and so for the whole TP group): {fits}"
            f"{_gpu_strip(kv_heads, tp)}"
            "<span style='color:#cfe0f3'>■</span> a GPU's own KV heads &nbsp;"
            "<span style='color:#f4c7a1'>■</span> a copy of a head another GPU also holds</div>")


def _divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def tp_explorer(models, *, gpu: str = "H100-SXM", reserve_bytes: int = DEFAULT_RESERVE_BYTES,
                tp: int = GPUS_PER_NODE):
    """The TP explorer as ipywidgets: a model, its KV-head count, TP, the context, a GPU.

    ``models`` are names kvlib knows (``kv.load_model``); a model sets L, H, D and its bf16
    weights, and the KV-head slider offers the divisors of its H (K = H is MHA, K = 1 MQA).
    TP opens at ``tp`` (one 8-GPU node by default: a 70B model's weights need it). Returns
    the ``VBox``; its ``.view`` is the HTML widget the controls redraw.

    Used in: ch02_gqa_tp.
    """
    import ipywidgets as widgets

    specs = {model_name(s): s for s in (kv.load_model(m) for m in models)}
    weights = {name: s.weight_bytes(2) for name, s in specs.items()}
    style = {"description_width": LABEL_WIDTH}
    layout = widgets.Layout(width=SLIDER_WIDTH)
    model_w = widgets.Dropdown(options=list(specs), description="model", style=style,
                               layout=widgets.Layout(width="500px"))
    kv_heads_w = widgets.SelectionSlider(options=[1], value=1, description="KV heads K", style=style,
                                         layout=layout)
    tp_w = widgets.SelectionSlider(options=list(TP_SIZES), value=tp, description="TP (GPUs)", style=style,
                                   layout=layout)
    context_w = widgets.SelectionSlider(options=[(f"{t:,}", t) for t in CONTEXTS], value=8192,
                                        description="context T (tokens)", style=style, layout=layout)
    gpu_w = widgets.Dropdown(options=list(kv.gpus.single_gpus()), value=kv.get_gpu(gpu).name, description="GPU", style=style)
    view = widgets.HTML()

    def redraw(_=None):
        spec = specs[model_w.value]
        view.value = tp_explorer_view(spec.num_kv_layers, spec.num_heads, kv_heads_w.value, spec.head_dim,
                                      spec.dtype_bytes, tp_w.value, context_w.value, gpu=gpu_w.value,
                                      weight_bytes=weights[model_w.value], reserve_bytes=reserve_bytes)

    def apply_model(_=None):
        spec = specs[model_w.value]
        kv_heads_w.unobserve(redraw, "value")
        kv_heads_w.options = _divisors(spec.num_heads)
        kv_heads_w.value = spec.num_kv_heads
        kv_heads_w.observe(redraw, "value")
        redraw()

    model_w.observe(apply_model, "value")
    for control in (tp_w, context_w, gpu_w):
        control.observe(redraw, "value")
    kv_heads_w.observe(redraw, "value")
    apply_model()
    box = widgets.VBox([model_w, kv_heads_w, tp_w, context_w, gpu_w, view])
    box.view = view
    return box
