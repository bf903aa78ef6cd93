"""Multi-head latent attention on the page: the cache as two arrays, and the MLA explorer.

An MLA layer caches, per token, one compressed latent (``kv_lora_rank`` numbers) that
stands for both keys and values, and one decoupled RoPE key (``qk_rope_head_dim``
numbers) shared by all heads. ``mla_cache_arrays`` allocates both, so their ``.nbytes``
can be set beside ``kvlib.mla_bytes_per_token``. ``mla_explorer_view`` is a plain
function returning the explorer's view as HTML (tests and benchmarks call it);
``mla_explorer`` wires ipywidgets controls to it.

Used in: ch03_mla.
"""

from __future__ import annotations

import html

import kvlib as kv

from .arrays import numpy_dtype
from .explorer import LABEL_WIDTH, SLIDER_WIDTH, wire
from .text import model_name

MLA_LATENT_AXES = ("layers", "batch", "seq_len", "latent_dim")
MLA_ROPE_AXES = ("layers", "batch", "seq_len", "rope_dim")
TP_SIZES = (1, 2, 4, 8, 16)
LATENT_DIMS = (128, 256, 384, 512, 768, 1024)
ROPE_DIMS = (0, 16, 32, 64, 128)
DTYPES = (("fp8", 1), ("bf16", 2), ("fp32", 4))


def mla_cache_arrays(layers: int, latent_dim: int, rope_dim: int, seq_len: int, batch_size: int,
                     dtype_bytes: int = 2):
    """An MLA cache as two zero-filled arrays: ``(latent, rope)``.

    ``latent`` has shape ``[layers, batch_size, seq_len, latent_dim]`` and ``rope``
    ``[layers, batch_size, seq_len, rope_dim]``; together their ``.nbytes`` is
    ``layers * (latent_dim + rope_dim) * dtype_bytes * seq_len * batch_size`` bytes [B]:
    ``kvlib.mla_bytes_per_token`` times the tokens. There is no K/V axis: the latent
    stands for both. Keep the dimensions small: the arrays are really allocated.

    >>> latent, rope = mla_cache_arrays(layers=2, latent_dim=8, rope_dim=2, seq_len=10, batch_size=3)
    >>> latent.shape, rope.shape, latent.nbytes + rope.nbytes    # 2 * (8 + 2) * 2 B * 10 * 3
    ((2, 3, 10, 8), (2, 3, 10, 2), 1200)

    Used in: ch03_mla.
    """
    import numpy as np

    dims = dict(layers=layers, latent_dim=latent_dim, seq_len=seq_len, batch_size=batch_size)
    for name, value in dims.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"mla_cache_arrays: {name} must be a positive int, got {value!r}")
    if not isinstance(rope_dim, int) or isinstance(rope_dim, bool) or rope_dim < 0:
        raise ValueError(f"mla_cache_arrays: rope_dim must be a non-negative int, got {rope_dim!r}")
    dtype = numpy_dtype(dtype_bytes)
    return (np.zeros((layers, batch_size, seq_len, latent_dim), dtype=dtype),
            np.zeros((layers, batch_size, seq_len, rope_dim), dtype=dtype))


def _bar(value: int, longest: int, color: str) -> str:
    width = 100 * value / longest if longest else 0
    return (f"<div style='width:100%;max-width:640px;background:#f2f2f2;height:14px'>"
            f"<div style='width:{width:.2f}%;height:14px;background:{color}'></div></div>")


def mla_explorer_view(latent_dim: int, rope_dim: int, layers: int, tp: int, dtype_bytes: int = 2,
                      gqa_model: str = "llama-3.3-70b") -> str:
    """The MLA explorer's view as HTML, every figure from kvlib.

    MLA per GPU = ``kv.mla_bytes_per_token(layers, latent_dim, rope_dim, dtype_bytes)``
    on every one of the ``tp`` ranks (the latent is not split); the GQA model's per GPU =
    ``spec.kv_bytes_per_token(dtype_bytes, tp=tp)`` (its KV heads split, replicated past
    K). Both in bytes per token [B]. The bars share one scale whatever ``tp`` is (the longer of
    the two at TP 1), so moving TP shortens the GQA bar and leaves the MLA bar where it was.

    >>> view = mla_explorer_view(512, 64, 61, 8)
    >>> "MLA per GPU: <b>70,272 B" in view, "Llama-3.3-70B-Instruct per GPU: <b>40,960 B" in view
    (True, True)

    Used in: ch03_mla (through mla_explorer).
    """
    mla = kv.mla_bytes_per_token(layers, latent_dim, rope_dim, dtype_bytes)
    spec = kv.load_model(gqa_model)
    name = model_name(spec)
    gqa = spec.kv_bytes_per_token(dtype_bytes, tp=tp)
    gqa_total = spec.kv_bytes_per_token(dtype_bytes)
    heads = spec.kv_heads_per_gpu(tp)
    longest = max(mla, gqa_total)     # one scale for every TP: the longer bar at TP 1
    ratio = mla / gqa
    verdict = (f"MLA stores <b>{ratio:.2f}×</b> what {html.escape(name)} stores per GPU"
               if ratio >= 1 else f"MLA stores <b>{1 / ratio:.2f}× less</b> than {html.escape(name)} per GPU")
    return (f"<div style='font-family:sans-serif;font-size:13px;line-height:1.6'>"
            f"MLA per GPU: <b>{kv.format_bytes(mla)}</b> per token = {layers} layers × ({latent_dim} latent + "
            f"{rope_dim} rope) × {dtype_bytes} B, the same on each of the {tp} GPU(s)"
            f"{_bar(mla, longest, '#55a868')}"
            f"{html.escape(name)} per GPU: <b>{kv.format_bytes(gqa)}</b> per token ({spec.attention.upper()}, "
            f"{heads} of {spec.num_kv_heads} KV heads on each GPU; {kv.format_bytes(gqa_total)} for the whole model)"
            f"{_bar(gqa, longest, '#4c72b0')}"
            f"{verdict}; across all {tp} GPU(s) MLA keeps {kv.format_bytes(mla * tp)} per token, "
            f"{html.escape(name)} {kv.format_bytes(gqa * tp)}.<br><small>Both bars are drawn to one scale, "
            f"full width = {kv.format_bytes(longest)} (the longer of the two at TP 1), whatever TP is.</small></div>")


def mla_explorer(gqa_models=("llama-3.3-70b", "llama-3.1-8b", "qwen2.5-32b", "mixtral-8x7b"), *,
                 model: str = "deepseek-v3"):
    """The MLA explorer as ipywidgets: latent width, rope width, layers, TP and the cache dtype,
    beside a GQA model chosen from ``gqa_models``; starts at ``model``'s MLA geometry.

    Returns the ``VBox`` (the cell's last expression shows it); its ``.view`` is the HTML
    widget the controls redraw.

    Used in: ch03_mla.
    """
    import ipywidgets as widgets

    start = kv.load_model(model)
    style = {"description_width": LABEL_WIDTH}
    layout = widgets.Layout(width=SLIDER_WIDTH)
    latent_w = widgets.SelectionSlider(options=sorted(set(LATENT_DIMS) | {start.kv_lora_rank}),
                                       value=start.kv_lora_rank, description="latent width d_c", style=style,
                                       layout=layout)
    rope_w = widgets.SelectionSlider(options=sorted(set(ROPE_DIMS) | {start.qk_rope_head_dim}),
                                     value=start.qk_rope_head_dim, description="rope width d_R", style=style,
                                     layout=layout)
    layers_w = widgets.IntSlider(start.num_kv_layers, min=1, max=128, description="layers L", style=style,
                                 layout=layout)
    tp_w = widgets.SelectionSlider(options=list(TP_SIZES), value=8, description="TP (GPUs)", style=style,
                                   layout=layout)
    dtype_w = widgets.ToggleButtons(options=list(DTYPES), value=2, description="cache dtype b",
                                    style={**style, "button_width": "90px"})
    gqa_w = widgets.Dropdown(options=[(model_name(kv.load_model(m)), m) for m in gqa_models],
                             value=gqa_models[0], description="beside (GQA)", style=style,
                             layout=widgets.Layout(width="480px"))
    return wire((latent_w, rope_w, layers_w, tp_w, dtype_w, gqa_w),
                lambda: mla_explorer_view(latent_w.value, rope_w.value, layers_w.value, tp_w.value, dtype_w.value,
                                          gqa_w.value))
