"""The chapter-04 pool explorer: the KV pool vLLM carves from one GPU, in tokens, sequences and waste.

``pool_explorer_view`` is a plain function returning the view as HTML (tests and benchmarks
call it; no widget needed); ``pool_explorer`` wires ipywidgets controls to it. Every figure
comes from kvlib: the weights as the checkpoint stores them (``kv.weights.stored_weights``: MXFP4
experts for gpt-oss), every other part of the budget as ``kv.vllm.forecast_pool`` predicts it for the
release chosen (vLLM 0.32's estimate, or 0.34's pool measured after warmup with its safety margin), the
pool and block count from ``kv.vllm.predict_pool`` (vLLM's forward rule), what the layers store per
sequence from ``ModelSpec.kv_bytes_per_sequence``, the expected waste of the last blocks from
``kv.block_waste_tokens``.

Used in: ch04_pool_paging (section "Explore").
"""

from __future__ import annotations

import kvlib as kv

from .explorer import wire
from .text import model_name

SLIDER_WIDTH = "640px"
LABEL_WIDTH = "190px"
BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
CONTEXTS = tuple(2**i for i in range(10, 18))     # 1,024 .. 131,072 tokens
KV_DTYPES = (("bf16", "auto"), ("fp8", "fp8"))
VLLM_VERSION = "0.32.0"
RELEASES = (("0.32 (estimate)", "0.32.0"), ("0.34 (measured)", "0.34.0"))   # the two ways vLLM sizes the pool
BATCHED_TOKENS = 8192                            # max_num_batched_tokens: sizes a windowed layer's blocks


def pool_explorer_view(model: str, gpu: str = "H100-SXM", utilization: float = 0.92, kv_cache_dtype: str = "auto",
                       block_size: int = 16, context: int = 8192, other_bytes: int | None = None,
                       version: str = VLLM_VERSION) -> str:
    """The explorer's view as HTML: pool, blocks, tokens, sequences at ``context``, last-block waste.

    pool ``A = ceil(M u) - W - O`` (``kv.vllm.predict_pool``, W the weights as stored, M as CUDA reports
    it, O ``other_bytes`` [B], by default every other part ``kv.vllm.forecast_pool`` predicts for ``version``:
    0.32's torch peak + non-torch + sampler state + CUDA-graph estimate, or 0.34's measured pool, which also
    keeps its safety margin free); blocks ``A // block bytes``; sequences vLLM prints as its
    "Maximum concurrency" at ``context`` (a worst-case estimate) against the sequences the layers' bytes alone would allow;
    waste ``kv.block_waste_tokens(sequences, block_size)`` as a share of the pool's token slots.

    >>> view = pool_explorer_view("llama-3.1-8b")
    >>> "blocks of 16 tokens: <b>28,355</b>" in view, "907,376" in pool_explorer_view("llama-3.1-8b", kv_cache_dtype="fp8")
    (True, True)

    Used in: ch04_pool_paging (through pool_explorer); benchmarks may time it.
    """
    spec, device = kv.load_model(model), kv.get_gpu(gpu)
    weights = kv.weights.stored_weights(model).bytes_per_rank
    measured = kv.vllm.release_rules(version).pool_rule == "measured"
    if other_bytes is None:
        forecast = kv.vllm.forecast_pool(model, device.cuda_memory_bytes, version=version, utilization=utilization,
                                         gpu_name=device.name, max_model_len=context,
                                         kv_cache_dtype=kv_cache_dtype, block_size=block_size)
        other_bytes = sum(p.bytes for p in forecast.parts if p.name != "weights")
    b = 1 if kv_cache_dtype.startswith("fp8") else 2
    f = kv.vllm.predict_pool(spec, device.cuda_memory_bytes, activation_bytes=other_bytes, weights_bytes=weights,
                             cudagraph_bytes=0, version=version, utilization=utilization,
                             block_size=block_size, kv_cache_dtype=kv_cache_dtype, max_model_len=context,
                             max_num_batched_tokens=BATCHED_TOKENS)
    gb = kv.format_gb_gib
    others = ("activations kept free, non-torch, sampler state, captured CUDA graphs and the safety margin"
              if measured else "activations, non-torch, sampler state and CUDA graphs")
    release = (f"vLLM {version.rsplit('.', 1)[0]}, pool {'measured after warmup' if measured else 'estimated'} "
               f"(its defaults: utilization {kv.vllm.default_utilization(version):.2f}, "
               f"{kv.vllm.default_block_size(version)}-token blocks)")
    head = (f"<div style='font-family:sans-serif;font-size:13px;line-height:1.6'>{release}<br>"
            f"{model_name(spec)} on one {device.name}: {gb(device.cuda_memory_bytes)} as CUDA reports it × "
            f"{utilization:.2f} − weights as stored {gb(weights)} − {others} {gb(other_bytes)}<br>")
    if f.available_bytes <= 0 or f.num_gpu_blocks == 0:
        return head + "<b style='color:#c0392b'>no room for a KV pool</b>: the weights and other allocations " \
                      "take the whole budget.</div>"
    per_token = spec.kv_bytes_per_token(b)
    stored = spec.kv_bytes_per_sequence(context, b)
    by_bytes = f.available_bytes // stored
    engine_seqs = int(f.max_concurrency) if f.max_concurrency is not None else by_bytes
    slots = f.num_gpu_blocks * block_size
    waste = kv.block_waste_tokens(engine_seqs, block_size)
    hybrid = "sliding" in spec.layer_kinds
    group_note = ""
    if hybrid:
        size, groups = kv.vllm.kv_cache_groups([k for k in spec.layer_kinds if k != "none"])
        group_note = (f", shared by {len(groups)} KV-cache groups of {size} layers "
                      f"({groups.count('full')} full, {groups.count('sliding')} windowed)")
    lines = [
        f"KV pool: <b>{gb(f.available_bytes)}</b>, bytes per token ({'fp8' if b == 1 else 'bf16'}, every layer): "
        f"<b>{kv.format_bytes(per_token)}</b>",
        f"blocks of {block_size} tokens: <b>{f.num_gpu_blocks:,}</b> of {kv.format_bytes(f.bytes_per_block)}"
        + f" = <b>{slots:,}</b> token slots" + (group_note if hybrid else ""),
        f"vLLM's printed \"Maximum concurrency\" at {context:,} tokens: <b>{engine_seqs:,}</b> sequences "
        "(an estimate from each request's worst case, not a limit the scheduler enforces)"
        + (f"; the layers' bytes alone ({gb(stored)} a sequence, windowed layers capped, as a decoding "
           f"request holds once vLLM frees the blocks behind its window) would allow {by_bytes:,}"
           if hybrid else ""),
        f"expected waste in their last blocks: <b>{waste:,.1f} token slots</b> = "
        f"<b>{100 * waste / slots:.2f}%</b> of the pool",
    ]
    return head + "<br>".join(lines) + "</div>"


def pool_explorer(models, *, gpu: str = "H100-SXM"):
    """The explorer as ipywidgets: model, GPU, vLLM release, utilization (up to 1.0), KV dtype, block size, context.

    ``models`` are names kvlib knows. Choosing a release sets the utilization and the block size to that
    release's defaults (0.92 and 16 for 0.32, 1.0 and 64 for 0.34); the sliders move them from there. Returns
    the ``VBox`` (the cell's last expression shows it); its ``.view`` is the HTML widget the controls redraw.

    Used in: ch04_pool_paging.
    """
    import ipywidgets as widgets

    style = {"description_width": LABEL_WIDTH}
    layout = widgets.Layout(width=SLIDER_WIDTH)
    model_w = widgets.Dropdown(options=[(model_name(kv.load_model(m)), m) for m in models], description="model",
                               style=style, layout=widgets.Layout(width="520px"))
    gpu_w = widgets.Dropdown(options=list(kv.gpus.single_gpus()), value=kv.get_gpu(gpu).name, description="GPU", style=style)
    release_w = widgets.ToggleButtons(options=list(RELEASES), value=VLLM_VERSION, description="vLLM release",
                                      style={**style, "button_width": "130px"})
    util_w = widgets.FloatSlider(0.92, min=0.5, max=1.0, step=0.01, description="gpu_memory_utilization",
                                 style=style, layout=layout)
    dtype_w = widgets.ToggleButtons(options=list(KV_DTYPES), value="auto", description="KV cache dtype",
                                    style={**style, "button_width": "90px"})
    block_w = widgets.SelectionSlider(options=list(BLOCK_SIZES), value=16, description="block size (tokens)",
                                      style=style, layout=layout)
    context_w = widgets.SelectionSlider(options=[(f"{t:,}", t) for t in CONTEXTS], value=8192,
                                        description="context (tokens)", style=style, layout=layout)
    def release_defaults(change):
        util_w.value = kv.vllm.default_utilization(change["new"])
        block_w.value = kv.vllm.default_block_size(change["new"])

    release_w.observe(release_defaults, "value")     # registered first: the view then redraws with both set
    return wire((model_w, gpu_w, release_w, util_w, dtype_w, block_w, context_w),
                lambda: pool_explorer_view(model_w.value, gpu_w.value, util_w.value, dtype_w.value, block_w.value,
                                           context_w.value, version=release_w.value))
