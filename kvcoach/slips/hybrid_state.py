"""A hybrid model's constant state (kvlib.spec state_tensor_shapes): the slips of the ``hybrid_state`` drill.

A Mamba2 or Gated DeltaNet layer keeps, per sequence, a conv state and a recurrent (SSM) state whose
size does not grow with the context; the attention layers beside them keep a KV cache that does.
"""

from __future__ import annotations

import math

SLIP_WORDS = {
    "state_grows_with_context": ("a linear-attention or Mamba layer folds the whole history into a state of fixed "
                                 "size: it does not grow with the {seq_len:,} tokens.",
                                 "the state does not grow with the context."),
    "conv_state_left_out": ("each state layer also keeps its short convolution's last kernel - 1 inputs (the conv "
                            "state), beside the recurrent state.",
                            "the conv state is left out."),
    "ssm_state_in_model_dtype": ("vLLM keeps this model's SSM state in float32 (4 bytes), not the model's 16-bit dtype; "
                                 "only the conv state is 16-bit.",
                                 "the SSM state is float32 here."),
    "state_all_layers": ("only the {state_layers} state layers keep a state; the attention layers keep a KV cache "
                         "instead (and MLP-only layers nothing).",
                         "only the state layers keep a state."),
    "hybrid_state_left_out": ("the state layers keep {state_bytes:,} bytes for the sequence too, whatever its length: "
                              "add them to the attention layers' KV.",
                              "the state layers' state is missing."),
    "hybrid_kv_every_layer": ("only the {attention_layers} attention layers keep a KV cache; the state layers keep a "
                              "fixed state instead.",
                              "only the attention layers keep a KV cache."),
}


def _spec(i):
    from kvlib.config import load_model
    return load_model(i["model"])


def _state_kind(spec):
    from kvlib.spec import STATE_KINDS
    return next(k for k in spec.layer_kinds if k in STATE_KINDS)


def state_variants(spec, tp):
    """(right state bytes per sequence on one GPU, [(slip, value), ...]) of a hybrid spec's state layers."""
    kind = _state_kind(spec)
    layers = spec.layer_kinds.count(kind)
    shapes, sizes = spec.state_tensor_shapes(kind, tp), spec.state_dtype_bytes(kind)
    expected = spec.state_bytes_per_sequence(tp)
    one = spec.layer_state_bytes(kind, tp)
    temporal = "ssm" if "ssm" in shapes else "recurrent"
    slips = [("conv_state_left_out", layers * math.prod(shapes[temporal]) * sizes[temporal]),
             ("state_all_layers", spec.num_layers * one)]
    if sizes[temporal] != spec.dtype_bytes:
        slips.append(("ssm_state_in_model_dtype", layers * (math.prod(shapes["conv"]) * sizes["conv"]
                                                            + math.prod(shapes[temporal]) * spec.dtype_bytes)))
    if tp > 1:
        slips.append(("state_whole_on_rank", spec.state_bytes_per_sequence(1)))
    return expected, slips


def _q_hybrid_state_bytes(i):
    """State bytes one sequence keeps on one GPU: L_s x (conv + recurrent) (ModelSpec.state_bytes_per_sequence)."""
    from .engine import unit_slips
    spec = _spec(i)
    expected, slips = state_variants(spec, i["tp"])
    slips.append(("state_grows_with_context", expected * i["seq_len"]))
    return expected, [(k, v) for k, v in slips if v != expected] + unit_slips(expected)


def _q_hybrid_sequence_bytes(i):
    """A sequence's memory on one GPU: its state plus the attention layers' KV of T tokens."""
    from .engine import unit_slips
    spec = _spec(i)
    tp, t = i["tp"], i["seq_len"]
    state, wrong = state_variants(spec, tp)
    kv = spec.kv_bytes_per_sequence(t, tp=tp)
    expected = state + kv
    attention = sum(1 for k in spec.layer_kinds if k == "full")
    slips = [("hybrid_state_left_out", kv), ("hybrid_kv_every_layer", state + kv // attention * spec.num_layers)]
    slips += [(k, v + kv) for k, v in wrong]
    return expected, [(k, v) for k, v in slips if v != expected] + unit_slips(expected)


def figures(key, inputs):
    """The state layers, attention layers and state bytes the words name."""
    if "model" not in inputs or key not in ("state_all_layers", "hybrid_state_left_out", "hybrid_kv_every_layer"):
        return {}
    spec = _spec(inputs)
    kind = _state_kind(spec)
    return {"state_layers": spec.layer_kinds.count(kind),
            "attention_layers": sum(1 for k in spec.layer_kinds if k == "full"),
            "state_bytes": spec.state_bytes_per_sequence(inputs.get("tp", 1))}


QUANTITIES = {"hybrid_state_bytes": _q_hybrid_state_bytes, "hybrid_sequence_bytes": _q_hybrid_sequence_bytes}
