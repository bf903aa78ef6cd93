"""A hybrid's constant state, the sparse-attention indexer, the crossover: ch10_state_and_sparsity's slips."""

from __future__ import annotations

from fractions import Fraction

from kvlib import formulas

from .engine import unit_slips

INDEXER_QUANT_BLOCK = 128     # one fp32 scale per 128 fp8 indexer numbers (vLLM's DeepseekV32IndexerCache)

SLIP_WORDS = {
    "state_per_token": ("a state layer keeps its state once per sequence, whatever its length: you multiplied it by "
                        "the context ({context:,} tokens).",
                        "a state is kept once per sequence, not per token."),
    "state_whole_on_rank": ("tensor parallelism splits a state layer's heads and channels as it splits KV heads: each "
                            "of the {tp} GPUs keeps 1/{tp} of the state; you counted the whole state (TP 1) on one "
                            "GPU.",
                            "each GPU of a TP group keeps 1/tp of the state, not all of it."),
    "attention_as_all_layers": ("only the {attention_layers} attention layers keep KV per token; the {state_layers} "
                                "state layers keep a state instead: you counted KV in all {all_layers} layers.",
                                "only a hybrid's attention layers keep KV per token."),
    "state_forgotten": ("the state is missing: {state_layers} layers x state_bytes_per_layer / tp, once per "
                        "sequence, beside the attention KV.",
                        "the state layers' state is missing."),
    "indexer_forgotten": ("the indexer's key is missing: {indexer_layers} layers each keep index_head_dim fp8 numbers "
                          "plus a 4-byte scale per 128 of them per token, beside the latent.",
                          "the sparse-attention indexer's key is missing."),
    "indexer_split_by_tp": ("the indexer key has one head, like the latent: each of the {tp} GPUs keeps it whole, so "
                            "the group holds {tp} copies of it; you split it over the GPUs.",
                            "the indexer key is whole on every GPU: a TP group holds tp copies, not one."),
    "indexer_in_cache_dtype": ("the indexer's numbers are fp8, 1 byte each, with one 4-byte scale per 128, whatever "
                               "the cache's dtype_bytes ({dtype_bytes}).",
                               "the indexer's numbers are fp8 (1 byte) whatever the cache's dtype."),
    "indexer_scale_forgotten": ("each 128 indexer numbers carry a 4-byte fp32 scale: you counted the fp8 numbers "
                                "alone.",
                                "the indexer's fp32 scales (4 bytes per 128 numbers) are missing."),
    "hybrid_kv_not_subtracted": ("the hybrid keeps KV per token too: divide the state by the difference of the two "
                                 "per-token figures (dense - hybrid), not by the dense model's alone.",
                                 "divide by dense_bytes_per_token - bytes_per_token, not by the dense figure alone."),
}


def _kv(layers, kv_heads, head_dim, dtype_bytes, tp, context):
    return formulas.kv_bytes_per_token(layers, formulas.kv_heads_per_gpu(kv_heads, tp), head_dim, dtype_bytes) * context


def _q_hybrid_sequence_bytes_per_gpu(i):
    """One sequence on one GPU: L_s state / t + 2 L K_g D b T (state split over t; K_g = max(1, K // t))."""
    la, ls, t, ctx = i["attention_layers"], i["state_layers"], i["tp"], i["context"]
    state = ls * i["state_bytes_per_layer"] // t
    kv = _kv(la, i["kv_heads"], i["head_dim"], i["dtype_bytes"], t, ctx)
    expected = state + kv
    slips = [("state_per_token", state * ctx + kv),
             ("state_whole_on_rank", ls * i["state_bytes_per_layer"] + kv),
             ("attention_as_all_layers", state + _kv(la + ls, i["kv_heads"], i["head_dim"], i["dtype_bytes"], t, ctx)),
             ("state_forgotten", kv),
             ("state_whole_on_rank+attention_as_all_layers",
              ls * i["state_bytes_per_layer"] + _kv(la + ls, i["kv_heads"], i["head_dim"], i["dtype_bytes"], t, ctx))]
    return expected, [(k, v) for k, v in slips if v != expected] + unit_slips(expected)


def _indexer_layer_bytes(index_head_dim, number_bytes=1, scales=True):
    return index_head_dim * number_bytes + (index_head_dim // INDEXER_QUANT_BLOCK * 4 if scales else 0)


def _q_dsa_bytes_per_token_per_group(i):
    """Per token on a TP group of t GPUs: t (L (d_c + d_R) b + L_idx (index_head_dim + index_head_dim // 128 x 4)),
    every GPU keeping both whole."""
    latent = formulas.mla_bytes_per_token(i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"])
    li, dim, t = i["indexer_layers"], i["index_head_dim"], i["tp"]
    indexer = li * _indexer_layer_bytes(dim)
    expected = t * (latent + indexer)
    slips = [("indexer_forgotten", t * latent),
             ("indexer_split_by_tp", t * latent + indexer if t > 1 else None),
             ("indexer_in_cache_dtype", t * (latent + li * _indexer_layer_bytes(dim, i["dtype_bytes"]))),
             ("indexer_scale_forgotten", t * (latent + li * dim)),
             ("mla_split_by_tp", latent + indexer if t > 1 else None)]
    return expected, [(k, v) for k, v in slips if v is not None and v != expected] + unit_slips(expected)


def _q_state_crossover(i):
    """ceil(S / (b_dense - b_tok)): the first context at which the hybrid holds no more than the dense model."""
    s, bh, bd = i["state_bytes"], i["bytes_per_token"], i["dense_bytes_per_token"]
    expected = formulas.state_crossover_tokens(s, bh, bd)
    slips = [("hybrid_kv_not_subtracted", -(-s // bd))]
    # the figure before the ceil: the generic rounding slips (floor_for_ceil, round_for_ceil) come from it
    return expected, [(k, v) for k, v in slips if v != expected], Fraction(s, bd - bh)


QUANTITIES = {
    "hybrid_sequence_bytes_per_gpu": _q_hybrid_sequence_bytes_per_gpu,
    "dsa_bytes_per_token_per_group": _q_dsa_bytes_per_token_per_group,
    "state_crossover": _q_state_crossover,
}


def figures(key, inputs) -> dict:
    """``{all_layers}``: a hybrid's attention and state layers together."""
    if "attention_layers" in inputs and "state_layers" in inputs:
        return {"all_layers": inputs["attention_layers"] + inputs["state_layers"]}
    return {}
