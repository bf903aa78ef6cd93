"""Views of what is not per-token KV: a hybrid's constant state beside its attention cache.

``state_arrays`` allocates one state layer's tensors, so their ``.nbytes`` can be set beside
``ModelSpec.layer_state_bytes``; ``sequence_memory_view`` is a plain function returning HTML, every
figure from kvlib (``state_bytes_per_sequence``, ``kv_bytes_per_sequence``, ``state_crossover_tokens``);
``state_explorer`` only wires ipywidgets controls to it.

Used in: ch10_state_and_sparsity.
"""

from __future__ import annotations

import html

import kvlib as kv

from .arrays import numpy_dtype
from .explorer import LABEL_WIDTH, SLIDER_WIDTH, wire
from .text import model_name

CONTEXTS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
TPS = (1, 2, 4, 8)
_STYLE = "font-family:sans-serif;font-size:13px;line-height:1.6"


def state_arrays(spec, kind: str, tp: int = 1) -> dict:
    """One state layer's tensors on one rank, zero-filled: ``{name: array}`` with vLLM's shapes.

    Their ``.nbytes`` add up to ``spec.layer_state_bytes(kind, tp)`` (bf16 held by a 2-byte stand-in).
    Qwen3-Next's Gated DeltaNet layer at TP 4: conv (3, 2,048) in 2 B, recurrent (8, 128, 128) in 2 B:

    >>> arrays = state_arrays(kv.load_model("qwen3-next-80b-a3b"), "gated_deltanet", tp=4)
    >>> {name: a.shape for name, a in arrays.items()}, sum(a.nbytes for a in arrays.values())
    ({'conv': (3, 2048), 'recurrent': (8, 128, 128)}, 274432)

    Used in: ch10_state_and_sparsity.
    """
    import numpy as np

    shapes, sizes = spec.state_tensor_shapes(kind, tp), spec.state_dtype_bytes(kind)
    return {name: np.zeros(shape, dtype=numpy_dtype(sizes[name])) for name, shape in shapes.items()}


def all_attention_bytes_per_token(spec, tp: int = 1) -> int:
    """Bytes a token costs if every mixer layer (attention and state) were one of the model's attention layers.

    The hybrid's all-attention twin: ``(L_attention + L_state) x`` one full-attention layer's bytes per token.

    >>> all_attention_bytes_per_token(kv.load_model("qwen3-next-80b-a3b"))      # 48 x 2,048 B
    98304

    Used in: ch10_state_and_sparsity.
    """
    return (spec.num_kv_layers + spec.num_state_layers) * spec.layer_kv_bytes_per_token(tp=tp, kind="full")


def sequence_memory_view(model: str, context: int, tp: int = 1, dense: str = "llama-3.3-70b") -> str:
    """One sequence of ``context`` tokens on one rank: the hybrid's state and KV, its twin's and a dense model's.

    >>> view = sequence_memory_view("qwen3-next-80b-a3b", 4096)
    >>> "536" in view and "state" in view
    True

    Used in: ch10_state_and_sparsity (through state_explorer).
    """
    spec, other = kv.load_model(model), kv.load_model(dense)
    state = spec.state_bytes_per_sequence(tp)
    attention = spec.kv_bytes_per_sequence(context, tp=tp)
    twin_token = all_attention_bytes_per_token(spec, tp)
    dense_token = other.kv_bytes_per_token(tp=tp)
    gb = kv.format_gb_gib
    rows = [("the hybrid's state (every state layer)", gb(state)),
            ("the hybrid's attention KV", gb(attention)),
            ("<b>the hybrid, in all</b>", f"<b>{gb(state + attention)}</b>"),
            ("its all-attention twin", gb(twin_token * context)),
            (f"{html.escape(model_name(other))} (dense)", gb(other.kv_bytes_per_sequence(context, tp=tp)))]
    crossings = []
    for label, per_token in (("its twin", twin_token), (html.escape(model_name(other)), dense_token)):
        if per_token > spec.kv_bytes_per_token(tp=tp):
            t = kv.state_crossover_tokens(state, spec.kv_bytes_per_token(tp=tp), per_token)
            crossings.append(f"holds no more than {label} from <b>{t:,}</b> tokens on")
    over = ""
    if spec.max_position_embeddings and context > spec.max_position_embeddings:
        over = (f"<br><span style='color:#c0392b'>{context:,} tokens is past the config's max_position_embeddings "
                f"({spec.max_position_embeddings:,}): vLLM refuses a longer max_model_len unless told to</span>")
    body = "".join(f"<tr><td style='padding:2px 10px'>{a}</td><td style='padding:2px 10px;text-align:right'>{b}"
                   f"</td></tr>" for a, b in rows)
    return (f"<div style='{_STYLE}'>{html.escape(model_name(spec))}, {context:,} tokens, one rank of TP {tp}"
            f"<table style='border-collapse:collapse'>{body}</table>"
            f"the hybrid {' and '.join(crossings) or 'never holds less than the others'}{over}</div>")


def state_explorer(models, *, dense: str = "llama-3.3-70b", context: int = 4096, tp: int = 1):
    """A model menu, a context and a TP slider over ``sequence_memory_view``.

    Used in: ch10_state_and_sparsity.
    """
    import ipywidgets as widgets

    style, layout = {"description_width": LABEL_WIDTH}, widgets.Layout(width=SLIDER_WIDTH)
    model_w = widgets.Dropdown(options=[(model_name(kv.load_model(m)), m) for m in models], description="model",
                               style=style)
    context_w = widgets.SelectionSlider(options=CONTEXTS, value=context, description="context T (tokens)",
                                        style=style, layout=layout)
    tp_w = widgets.SelectionSlider(options=TPS, value=tp, description="TP (GPUs)", style=style, layout=layout)
    return wire((model_w, context_w, tp_w),
                lambda: sequence_memory_view(model_w.value, context_w.value, tp_w.value, dense))
