"""The chapter-01 explorer: bytes per token, per sequence and per batch, and one GPU's memory.

``kv_explorer_view`` is a plain function returning the view as HTML (tests and
benchmarks call it; no widget needed); ``kv_explorer`` wires ipywidgets controls to it.
Presets carry a real model's geometry and bf16 weights; a preset whose model has
sliding-window layers is flagged, because this chapter counts every layer in full.

Used in: ch01_kv_formula (section "Explore").
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import kvlib as kv

from .text import model_name

DEFAULT_RESERVE_BYTES = 4 * kv.GB      # activations and workspace on one GPU, as in chapter 01's Question 3
SLIDER_WIDTH = "640px"
LABEL_WIDTH = "170px"
DTYPES = (("fp8", 1), ("bf16", 2), ("fp32", 4))
HEAD_DIMS = (64, 80, 96, 128, 160, 192, 256)
CONTEXTS = tuple(2**i for i in range(9, 21))   # 512 .. 1,048,576 tokens


@dataclass(frozen=True)
class ExplorerPreset:
    """A real model's cache geometry and bf16 weights, for the explorer's preset menu.

    Used in: (none yet; chapters get them from ``presets_from_models``).
    """
    name: str
    layers: int
    kv_heads: int
    head_dim: int
    weight_bytes: int
    sliding_layers: int = 0            # layers that attend over a window only
    sliding_window: int | None = None  # tokens

    @property
    def label(self) -> str:
        """The menu entry: the name, and a flag when some layers use a sliding window."""
        if not self.sliding_layers:
            return self.name
        return f"{self.name}  ⚠ sliding window on {self.sliding_layers} of {self.layers} layers"


def presets_from_models(models) -> dict:
    """``{label: ExplorerPreset}`` from model names kvlib knows (``kv.load_model``).

    Weights are ``spec.weight_bytes(2)`` (bf16, from kvlib's parameter count).

    >>> presets = presets_from_models(["llama-3.1-8b", "mistral-7b"])
    >>> [p.name for p in presets.values()], list(presets)[1].endswith("on 32 of 32 layers")
    (['Llama-3.1-8B', 'Mistral-7B-v0.1'], True)

    Used in: ch01_kv_formula.
    """
    out = {}
    for model in models:
        spec = kv.load_model(model)
        sliding = sum(1 for kind in spec.layer_kinds if kind == "sliding")
        preset = ExplorerPreset(model_name(spec), spec.num_kv_layers, spec.num_kv_heads, spec.head_dim,
                                spec.weight_bytes(2), sliding, spec.sliding_window if sliding else None)
        out[preset.label] = preset
    return out


def _bar(segments, memory: int) -> str:
    """A horizontal bar of ``memory`` bytes, segments clipped in order where memory ends."""
    parts, room = [], memory
    for name, size, color in segments:
        shown = max(0, min(size, room))
        room -= shown
        width = 100 * shown / memory
        parts.append(f'<div title="{html.escape(name)}: {kv.format_gb_gib(size)}" '
                     f'style="flex:none;width:{width:.2f}%;background:{color}"></div>')
    return ("<div style='display:flex;width:100%;max-width:900px;height:22px;border:1px solid #555;"
            f"margin-top:4px'>{''.join(parts)}</div>")


def kv_explorer_view(layers: int, kv_heads: int, head_dim: int, dtype_bytes: int, seq_len: int, batch_size: int,
                     gpu: str = "H100-SXM", weight_bytes: int = 0, reserve_bytes: int = DEFAULT_RESERVE_BYTES,
                     sliding_note: str = "", num_gpus: int = 1) -> str:
    """The explorer's view as HTML, every figure from kvlib.

    bytes per token = ``kv.kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes)``;
    per sequence and per batch from ``kv.kv_bytes_total`` and ``kv.kv_bytes_per_sequence``;
    sequences that fit = ``kv.max_concurrency(N M - W - N R, per sequence)`` with N ``num_gpus``, M one GPU's
    memory as CUDA reports it, W ``weight_bytes`` and R ``reserve_bytes`` per GPU [B]: weights and cache
    spread evenly over the N GPUs, as tensor parallelism spreads them while the KV heads divide.

    >>> view = kv_explorer_view(32, 8, 128, 2, 8192, 16, weight_bytes=16_060_522_496)
    >>> "bytes per token: <b>131,072 B (128 KiB)</b>" in view, "fits" in view
    (True, True)
    >>> "4 × H100-SXM" in kv_explorer_view(80, 8, 128, 2, 8192, 16, weight_bytes=141 * 10**9, num_gpus=4)
    True

    Used in: ch01_kv_formula (through kv_explorer); benchmarks/run.py times it.
    """
    per_token = kv.kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes)
    per_seq = kv.kv_bytes_per_sequence(per_token, seq_len)
    per_batch = kv.kv_bytes_total(per_token, seq_len, batch_size)
    device = kv.get_gpu(gpu)
    if not isinstance(num_gpus, int) or num_gpus < 1:
        raise ValueError(f"num_gpus: a whole number of GPUs, at least 1 (got {num_gpus!r})")
    memory = num_gpus * device.cuda_memory_bytes
    reserve_bytes = num_gpus * reserve_bytes
    where = device.name if num_gpus == 1 else f"{num_gpus} × {device.name}"
    budget = memory - weight_bytes - reserve_bytes
    fit = kv.max_concurrency(budget, per_seq) if budget > 0 else 0
    over = weight_bytes + reserve_bytes + per_batch - memory
    gb = kv.format_gb_gib
    if weight_bytes > memory:
        verdict = f"<b style='color:#c0392b'>the weights alone do not fit</b> on {where}"
    elif over > 0:
        verdict = f"<b style='color:#c0392b'>does not fit</b>: {gb(over)} over"
    else:
        verdict = f"<b style='color:#2e7d32'>fits</b>, {gb(-over)} free"
    bar = _bar([("weights", weight_bytes, "#4c72b0"), ("reserve", reserve_bytes, "#b0b0b0"),
                (f"KV cache of {batch_size} × {seq_len:,} tokens", per_batch, "#dd8452")], memory)
    note = (f"<div style='color:#8a5a00;margin-top:4px'>⚠ {sliding_note}</div>" if sliding_note else "")
    return (f"<div style='font-family:sans-serif;font-size:13px;line-height:1.6'>"
            f"bytes per token: <b>{kv.format_bytes(per_token)}</b><br>"
            f"per sequence of {seq_len:,} tokens: <b>{gb(per_seq)}</b><br>"
            f"per batch of {batch_size}: <b>{gb(per_batch)}</b>, {verdict}<br>"
            f"{where}, as CUDA reports it: {gb(memory)} = weights {gb(weight_bytes)} (bf16, whatever the "
            f"cache dtype) + reserve {gb(reserve_bytes)} + cache; sequences of this length that fit: <b>{fit}</b>"
            f"{bar}"
            "<span style='color:#4c72b0'>■</span> weights &nbsp;<span style='color:#b0b0b0'>■</span> reserve "
            "&nbsp;<span style='color:#dd8452'>■</span> KV cache of the batch (cut off where memory ends) "
            f"&nbsp;□ free{note}</div>")


def _sliding_note(preset: ExplorerPreset) -> str:
    if not preset.sliding_layers:
        return ""
    return (f"{preset.name}: {preset.sliding_layers} of {preset.layers} layers attend over the last "
            f"{preset.sliding_window:,} tokens only, so an engine caches less than shown past that length. "
            "Here every layer is counted in full, as this chapter's formula does.")


def wire(controls, render):
    """An explorer: ``controls`` (ipywidgets) above an HTML view showing ``render()``, redrawn on every change.

    ``render`` reads the controls' values and returns the view's HTML (a call of a plain view
    function, which tests and benchmarks call without widgets). The box keeps the view as
    ``box.view``. The chapters' explorers (``mla_explorer``, ``pool_explorer``,
    ``prefix_sharing_explorer``, ``fetch_recompute_explorer``, ``crossover_explorer``,
    ``planner_explorer``) are built with it.
    """
    import ipywidgets as widgets

    view = widgets.HTML()

    def redraw(_=None):
        view.value = render()

    for control in controls:
        control.observe(redraw, "value")
    redraw()
    box = widgets.VBox([*controls, view])
    box.view = view
    return box


def kv_explorer(presets: dict, *, gpu: str = "H100-SXM", reserve_bytes: int = DEFAULT_RESERVE_BYTES):
    """The explorer as ipywidgets: a preset menu, sliders for L, K, D, T, B, the cache dtype, a GPU and their number.

    ``presets`` is ``presets_from_models(...)``. Choosing a preset sets L, K, D and the
    weights; the sliders then change the geometry only. Returns the ``VBox`` (the cell's
    last expression shows it); its ``.view`` is the HTML widget the sliders redraw.

    Used in: ch01_kv_formula.
    """
    import ipywidgets as widgets

    style = {"description_width": LABEL_WIDTH}
    layout = widgets.Layout(width=SLIDER_WIDTH)
    head_dims = sorted(set(HEAD_DIMS) | {p.head_dim for p in presets.values()})
    preset_w = widgets.Dropdown(options=list(presets), description="preset model", style=style,
                                layout=widgets.Layout(width="760px"))
    layers_w = widgets.IntSlider(32, min=1, max=128, description="layers L", style=style, layout=layout)
    kv_heads_w = widgets.IntSlider(8, min=1, max=128, description="KV heads K", style=style, layout=layout)
    head_dim_w = widgets.SelectionSlider(options=head_dims, value=128, description="head dim D", style=style,
                                         layout=layout)
    dtype_w = widgets.ToggleButtons(options=list(DTYPES), value=2, description="cache dtype b",
                                    style={**style, "button_width": "90px"})
    dtype_note = widgets.HTML("<span style='font-size:12px;color:#555;margin-left:" + LABEL_WIDTH + "'>"
                              "the cache dtype changes the KV cache only: the weights stay bf16</span>")
    context_w = widgets.SelectionSlider(options=[(f"{t:,}", t) for t in CONTEXTS], value=8192,
                                        description="context T (tokens)", style=style, layout=layout)
    batch_w = widgets.IntSlider(16, min=1, max=512, description="batch B (sequences)", style=style, layout=layout)
    gpu_w = widgets.Dropdown(options=list(kv.gpus.single_gpus()), value=kv.get_gpu(gpu).name, description="GPU",
                             style=style)
    gpus_w = widgets.IntSlider(1, min=1, max=8, description="GPUs N (TP)", style=style, layout=layout)
    view = widgets.HTML()

    def redraw(_=None):
        preset = presets[preset_w.value]
        view.value = kv_explorer_view(layers_w.value, kv_heads_w.value, head_dim_w.value, dtype_w.value,
                                      context_w.value, batch_w.value, gpu=gpu_w.value,
                                      weight_bytes=preset.weight_bytes, reserve_bytes=reserve_bytes,
                                      sliding_note=_sliding_note(preset), num_gpus=gpus_w.value)

    def apply_preset(_=None):
        preset = presets[preset_w.value]
        layers_w.value, kv_heads_w.value, head_dim_w.value = preset.layers, preset.kv_heads, preset.head_dim
        redraw()

    preset_w.observe(apply_preset, "value")
    for control in (layers_w, kv_heads_w, head_dim_w, dtype_w, context_w, batch_w, gpu_w, gpus_w):
        control.observe(redraw, "value")
    apply_preset()
    box = widgets.VBox([preset_w, layers_w, kv_heads_w, head_dim_w, dtype_w, dtype_note, context_w, batch_w,
                        gpu_w, gpus_w, view])
    box.view = view
    return box
