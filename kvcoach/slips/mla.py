"""Multi-head latent attention: one latent plus one RoPE key per layer, whole on every rank.

The slips of ch03_mla (a config's fields, per GPU) and of the ``mla_vs_gqa`` drill.
"""

from __future__ import annotations

from kvlib import formulas

from .engine import base_key, unit_slips
from .gqa_tp import q_kv_bytes_per_token_per_gpu

SLIP_WORDS = {
    "extra_factor_2": ("that is twice the right figure: an MLA layer caches one latent per token and rebuilds every "
                       "head's key and value from it, so nothing is stored twice.",
                       "that is twice the right figure: keys and values are both rebuilt from one cached latent, "
                       "counted once."),
    "missing_rope": ("the {rope_dim}-wide decoupled RoPE key is missing: MLA caches latent ({latent_dim}) + rope "
                     "({rope_dim}) per layer.",
                     "the decoupled RoPE key (qk_rope_head_dim) is missing: the cache holds latent + rope key per "
                     "layer."),
    "reference_without_dtype": ("your figures to compare with leave out b, the bytes per number (dtype_bytes = "
                                "{dtype_bytes}): L (d_c + d_R) counts numbers; the answer is in bytes, so compare it "
                                "with L (d_c + d_R) b, twice that, and L d_c b.",
                                "the figures to compare with leave out b, the bytes per number."),
    "doubled_latent_only": ("'extra_factor_2' is the whole right figure twice, 2 L (d_c + d_R) b: a K and a V counted "
                            "for the whole cached width; you doubled the latent alone, L (2 d_c + d_R) b.",
                            "'extra_factor_2' is twice the whole figure, 2 L (d_c + d_R) b, not the latent alone "
                            "doubled."),
    "mla_as_mha": ("you treated MLA as ordinary attention (2 x heads x head_dim); MLA caches one latent of "
                   "{latent_dim} + {rope_dim} per layer.",
                   "you treated MLA as ordinary attention (2 x heads x head_dim); MLA caches one latent plus one "
                   "RoPE key per layer."),
    "mla_split_by_tp": ("you divided the MLA cache among the GPUs; it has no KV heads to hand out, and every head on "
                        "every GPU reads the same latent, so each GPU keeps a whole copy.",
                        "you divided the MLA cache among the GPUs; with no KV heads to hand out, each GPU keeps a "
                        "whole copy."),
    "nope_for_rope": ("you added qk_nope_head_dim ({qk_nope_head_dim}) to the latent; the cached key beside it is the "
                      "decoupled RoPE key, qk_rope_head_dim = {rope_dim}.",
                      "you used qk_nope_head_dim where the cached key is qk_rope_head_dim."),
    "query_latent": ("you used q_lora_rank ({q_lora_rank}), the query's compression, which is never cached; the cache "
                     "holds the KV latent, kv_lora_rank = {latent_dim}.",
                     "you used q_lora_rank (the query's compression) instead of kv_lora_rank."),
    "mtp_layer_counted": ("you counted the multi-token-prediction layer (num_nextn_predict_layers = {mtp_layers}); "
                          "the cache is sized over num_hidden_layers = {layers}.",
                          "the multi-token-prediction layer is counted; size the cache over num_hidden_layers."),
    "qk_head_dim_added": ("you added the query/key head width (qk_nope_head_dim + qk_rope_head_dim) to the latent; "
                          "the cache holds the latent ({latent_dim}) and the RoPE key alone ({rope_dim}).",
                          "the query/key head width is added to the latent; the cache holds latent + RoPE key."),
}


def mla_slips(i, widths) -> list:
    """MLA's slips, one list for every MLA exercise: each a wrong bytes-per-token figure, or None.

    The right figure is L (r + d_R) b: one latent and one RoPE key per layer, no factor 2. The case's
    inputs decide which slips apply: a config's qk_nope_head_dim, q_lora_rank and num_nextn_predict_layers
    give their own; the query/key head width (``qk_head_dim``, or qk_nope_head_dim + d_R) gives the width
    added to the latent. Ordinary attention's formula, 2 L K D b, is tried for K the config's
    num_key_value_heads or the query heads and D each of ``widths``, the head widths the learner is shown.
    """
    L, r, rope, b = i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"]
    right = formulas.mla_bytes_per_token(L, r, rope, b)
    out = [("extra_factor_2", 2 * right),
           ("missing_rope", formulas.mla_bytes_per_token(L, r, 0, b)),
           ("missing_rope+extra_factor_2", 2 * formulas.mla_bytes_per_token(L, r, 0, b)),
           ("bits_not_bytes", formulas.mla_bytes_per_token(L, r, rope, 8 * b)),
           ("missing_layers", formulas.mla_bytes_per_token(1, r, rope, b))]
    if i.get("qk_nope_head_dim") and i["qk_nope_head_dim"] != rope:
        out.append(("nope_for_rope", formulas.mla_bytes_per_token(L, r, i["qk_nope_head_dim"], b)))
    if i.get("q_lora_rank") and i["q_lora_rank"] != r:
        out.append(("query_latent", formulas.mla_bytes_per_token(L, i["q_lora_rank"], rope, b)))
    if i.get("mtp_layers"):     # num_nextn_predict_layers: the multi-token-prediction module keeps no cache here
        out.append(("mtp_layer_counted", formulas.mla_bytes_per_token(L + i["mtp_layers"], r, rope, b)))
    qk = i.get("qk_head_dim") or (i["qk_nope_head_dim"] + rope if i.get("qk_nope_head_dim") else None)
    if qk:
        out.append(("qk_head_dim_added", formulas.mla_bytes_per_token(L, r, qk, b)))
    heads = {h for h in (i.get("kv_heads"), i.get("num_heads")) if h}
    for h in sorted(heads):
        for w in sorted(widths):
            out.append((f"mla_as_mha@{h}x{w}", formulas.kv_bytes_per_token(L, h, w, b)))
    return out


def _config_widths(i) -> set:
    """Every head width a config suggests: head_dim, v_head_dim, the RoPE key's, nope + rope, hidden / heads."""
    rope = i["rope_dim"]
    widths = {w for w in (i.get("head_dim_field"), i.get("v_head_dim"), rope,
                          (i.get("qk_nope_head_dim") or 0) + rope) if w}
    if i.get("hidden_size") and i.get("num_heads") and i["hidden_size"] % i["num_heads"] == 0:
        widths.add(i["hidden_size"] // i["num_heads"])
    return widths


def _q_mla_bytes_per_token(i):
    """MLA bytes per token from the figures a question states (the mla_vs_gqa drill): L (r + d_R) b.

    The question names one query/key head width (``qk_head_dim``) and the cache's dtype, so its own slips
    are the 16-bit/fp8 mix-up, named first where the question says fp8.
    """
    L, r, rope, b = i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"]
    expected = formulas.mla_bytes_per_token(L, r, rope, b)
    slips = mla_slips(i, {i["qk_head_dim"]} if i.get("qk_head_dim") else set())
    if b in (1, 2):     # bf16 for an fp8 cache (named first: the question says fp8), or fp8 for a bf16 one
        fp8 = ("wrong_16bit_vs_fp8@mla", formulas.mla_bytes_per_token(L, r, rope, 3 - b))
        if b == 1:
            slips.insert(0, fp8)
        else:
            slips.append(fp8)
    return expected, slips + unit_slips(expected)


def _mla_config_slips(i):
    """MLA's slips on a config read by a function that takes dtype_bytes: every width the config suggests, and
    the element size not followed."""
    L, r, rope, b = i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"]
    out = mla_slips(i, _config_widths(i))
    for other in (1, 2, 4):
        if other != b:
            out.append((f"ignored_dtype_bytes@{other}", formulas.mla_bytes_per_token(L, r, rope, other)))
    return out


def _q_mla_config_bytes_per_token(i):
    """MLA bytes per token from a config's fields: L (r + d_R) b, no factor 2 (formulas.mla_bytes_per_token)."""
    expected = formulas.mla_bytes_per_token(i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"])
    return expected, _mla_config_slips(i) + unit_slips(expected)


def _q_config_kv_bytes_per_token_per_gpu(i):
    """Per-GPU bytes per token of an MLA or an ordinary model under TP (MLA's latent whole on every rank)."""
    if not i.get("latent_dim"):
        return q_kv_bytes_per_token_per_gpu(i)
    tp = i["tp"]
    expected = formulas.mla_bytes_per_token(i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"])
    slips = [("mla_split_by_tp", expected / tp)] if tp > 1 else []
    slips += [(k, v) for k, v in _mla_config_slips(i) if base_key(k) != "mla_as_mha"]
    # ordinary attention on the MLA config, split over the ranks as GQA would be
    for key, value in _mla_config_slips(i):
        if base_key(key) == "mla_as_mha":
            slips.append((key + "@split", value / tp))
            slips.append((key, value))
    if tp > 1:
        slips += [(k + "+mla_split_by_tp", v / tp) for k, v in _mla_config_slips(i)
                  if k in ("extra_factor_2", "missing_rope")]
    return expected, slips + unit_slips(expected)


def _kind(answer, right, doubled, latent) -> str:
    """The name ch03's Exercise 3 gives ``answer`` against these three figures."""
    return ("correct" if answer == right else "extra_factor_2" if answer == doubled
            else "missing_rope" if answer == latent else "other")


def _q_mla_slip_name(i):
    """The kind of a reported MLA bytes-per-token figure: 'correct' (L (d_c + d_R) b), 'extra_factor_2' (twice
    that), 'missing_rope' (L d_c b) or 'other'; each slip names the kind with one of the figures recomputed wrong."""
    a, L, dc, dr, b = i["answer_bytes"], i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"]
    right, latent = formulas.mla_bytes_per_token(L, dc, dr, b), formulas.mla_bytes_per_token(L, dc, 0, b)
    expected = _kind(a, right, 2 * right, latent)
    slips = [("reference_without_dtype", _kind(a, right // b, 2 * right // b, latent // b)),   # numbers, not bytes
             ("doubled_latent_only", _kind(a, right, formulas.mla_bytes_per_token(L, 2 * dc, dr, b), latent))]
    return expected, [(k, v) for k, v in slips if v != expected]


QUANTITIES = {
    "mla_bytes_per_token": _q_mla_bytes_per_token,
    "mla_slip_name": _q_mla_slip_name,
    "mla_config_bytes_per_token": _q_mla_config_bytes_per_token,
    "config_kv_bytes_per_token_per_gpu": _q_config_kv_bytes_per_token_per_gpu,
}


def figures(key, inputs) -> dict:
    """``{rope_dim}`` where a case does not give it: the 64-wide RoPE key of DeepSeek-V2 and V3."""
    return {"rope_dim": 64}
