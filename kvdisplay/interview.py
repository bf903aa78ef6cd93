"""The interview's numbers on one card: a model, a GPU, a context and a batch.

``interview_sheet_view`` is a plain function returning the card as HTML (tests and
benchmarks call it, no widget needed); ``interview_sheet`` wires ipywidgets controls to it.
Every figure comes from kvlib: bytes per token and per sequence from the model's config
(``ModelSpec``), the pool of one GPU from ``kv.kv_pool_bytes`` (memory as CUDA reports it,
the engine's utilization, bf16 weights, other allocations), the crossover from
``kv.crossover_tokens`` and ``kv.roofline.crossover_context``, step times from
``kv.roofline.decode_step`` at the bandwidth limit.

Used in: ch09_interview_drills (section "Explore").
"""

from __future__ import annotations

import html

import kvlib as kv

from .explorer import wire
from .text import model_name

SLIDER_WIDTH = "640px"
LABEL_WIDTH = "170px"
CONTEXTS = tuple(2**i for i in range(10, 18))      # 1,024 .. 131,072 tokens
BATCHES = (1, 2, 4, 5, 8, 16, 32, 64, 128, 256)
REFERENCE_CONTEXT = 4096                           # the step time a longer context is compared with
DEFAULT_OTHER_BYTES = 3 * kv.GB


def interview_sheet_view(model: str, gpu: str = "H100-SXM", context: int = 8192, batch: int = 32, *,
                         utilization: float = 0.92, other_bytes: int = DEFAULT_OTHER_BYTES,
                         kv_dtype_bytes: int = 2) -> str:
    """The card as HTML: bytes per token and per sequence, sequences that fit, crossover, step times.

    pool ``= ceil(M u) - W - O`` (``kv.kv_pool_bytes``, M as CUDA reports it, W bf16 weights);
    sequences that fit ``= floor(pool / (b_tok T))``; crossover ``B T = W / b_tok``; step
    ``(W + b_tok T B) / BW`` at ``context`` and at 4,096 tokens, and their ratio.

    >>> view = interview_sheet_view("llama-3.1-8b", "H100-SXM", 8192, 32)
    >>> "bytes per token: <b>131,072 B (128 KiB)</b>" in view, "sequences of 8,192 tokens that fit: <b>55</b>" in view
    (True, True)

    Used in: ch09_interview_drills (through interview_sheet); benchmarks may time it.
    """
    spec, device = kv.load_model(model), kv.get_gpu(gpu)
    weights = spec.weight_bytes(2)
    per_token = spec.kv_bytes_per_token(kv_dtype_bytes)
    per_seq = spec.kv_bytes_per_sequence(context, kv_dtype_bytes)
    pool = kv.kv_pool_bytes(device.cuda_memory_bytes, utilization, weights, other_bytes, round_budget_up=True)
    gb = kv.format_gb_gib
    head = (f"<div style='font-family:sans-serif;font-size:13px;line-height:1.6'>"
            f"<b>{model_name(spec)}</b> on one {device.name} ({gb(device.cuda_memory_bytes)} as CUDA reports it), "
            f"bf16 weights {gb(weights)}, {'fp8' if kv_dtype_bytes == 1 else 'bf16'} cache<br>"
            f"bytes per token: <b>{kv.format_bytes(per_token)}</b> "
            f"(2 × {spec.num_kv_layers} layers × {spec.num_kv_heads} KV heads × {spec.head_dim} × {kv_dtype_bytes} B)<br>"
            f"one sequence of {context:,} tokens: <b>{gb(per_seq)}</b><br>")
    slots = kv.crossover_tokens(weights, per_token)
    cross = kv.roofline.crossover_context(weights, per_token, batch)
    step = kv.roofline.decode_step(model, batch=batch, context=context, gpu=gpu, kv_dtype_bytes=kv_dtype_bytes)
    ref = kv.roofline.decode_step(model, batch=batch, context=REFERENCE_CONTEXT, gpu=gpu,
                                  kv_dtype_bytes=kv_dtype_bytes)
    timing = (f"crossover: B × T = <b>{slots:,.0f} token-slots</b>; at batch {batch}, context {cross:,.0f} tokens<br>"
              f"decode step at the bandwidth limit, batch {batch}: <b>{step.bandwidth_s * 1e3:,.2f} ms</b> at "
              f"{context:,} tokens, {ref.bandwidth_s * 1e3:,.2f} ms at {REFERENCE_CONTEXT:,} "
              f"(× {step.bandwidth_s / ref.bandwidth_s:.2f}); {step.regime}<br>")
    check = kv.check_deployment(spec, device, batch_size=batch, seq_len=context, kv_dtype_bytes=kv_dtype_bytes,
                                weight_bytes=weights, utilization=utilization, other_bytes=other_bytes)
    if pool <= 0:
        return head + timing + (f"<b style='color:#c0392b'>no KV pool</b>: {html.escape(check.summary())}.</div>")
    fit = kv.max_concurrency(pool, per_seq)
    fit_128k = kv.max_concurrency(pool, spec.kv_bytes_per_sequence(131072, kv_dtype_bytes))
    admitted = ("<span style='color:#2e7d32'>the batch fits in the pool</span>" if check.fits else
                f"<b style='color:#c0392b'>{html.escape(check.summary())}</b>: no engine would run this batch")
    return (head + f"pool: ⌈{gb(device.cuda_memory_bytes)} × {utilization}⌉ − weights − other {gb(other_bytes)} = "
            f"<b>{gb(pool)}</b><br>"
            f"sequences of {context:,} tokens that fit: <b>{fit:,}</b>"
            + (f" (at 131,072 tokens: {fit_128k:,})" if context != 131072 else "") + "; "
            f"{admitted}<br>" + timing + "</div>")


def interview_sheet(models, *, gpus=("H100-SXM", "H200", "A100-80GB", "L40S")):
    """The card as ipywidgets: model, GPU, context and batch sliders, the cache dtype.

    Returns the ``VBox``; its ``.view`` is the HTML widget the controls redraw.

    Used in: ch09_interview_drills.
    """
    import ipywidgets as widgets

    style = {"description_width": LABEL_WIDTH}
    layout = widgets.Layout(width=SLIDER_WIDTH)
    names = {model_name(kv.load_model(m)): m for m in models}
    model_w = widgets.Dropdown(options=list(names), description="model", style=style)
    gpu_w = widgets.Dropdown(options=list(gpus), description="GPU", style=style)
    context_w = widgets.SelectionSlider(options=[(f"{t:,}", t) for t in CONTEXTS], value=8192,
                                        description="context T (tokens)", style=style, layout=layout)
    batch_w = widgets.SelectionSlider(options=[(str(b), b) for b in BATCHES], value=32,
                                      description="batch B (sequences)", style=style, layout=layout)
    dtype_w = widgets.ToggleButtons(options=[("bf16", 2), ("fp8", 1)], value=2, description="KV cache dtype",
                                    style={**style, "button_width": "90px"})
    return wire((model_w, gpu_w, context_w, batch_w, dtype_w),
                lambda: interview_sheet_view(names[model_w.value], gpu_w.value, context_w.value, batch_w.value,
                                             kv_dtype_bytes=dtype_w.value))
