"""Bytes per token, per sequence and per batch, and how many sequences fit: ch01_kv_formula's slips.

Also the drills on them (``kv_per_token``, ``per_sequence``, ``concurrency``). ``token_slips``, bytes
per token with each slip applied, is what every later topic that counts bytes per token (per GPU, per
step, per node) starts from.
"""

from __future__ import annotations

import math

from kvlib import formulas
from kvlib.units import GB, GiB

from .engine import exact_ratio, unit_slips

SLIP_WORDS = {
    "query_heads": ("you multiplied by the query heads (num_attention_heads = {num_heads}) instead of the KV heads "
                    "(num_key_value_heads = {kv_heads}).",
                    "you multiplied by the query heads (num_attention_heads) instead of the KV heads."),
    "missing_kv_factor": ("the factor 2 for K and V is missing: every token stores a key and a value.",
                          "the factor 2 for K and V is missing."),
    "bits_not_bytes": ("you used bits per element ({bits}) instead of bytes ({dtype_bytes}).",
                       "you used bits per element instead of bytes."),
    "fp32_bytes": ("you used 4 bytes per element (fp32); the cache is stored in 16 bits ({dtype_bytes} bytes).",
                   "you used 4 bytes per element instead of dtype_bytes."),
    "wrong_16bit_vs_fp8": ("the element size is off: fp8 is 1 byte, fp16/bf16 are 2 bytes (you used {wrong_bytes}).",
                           "the element size is off: use dtype_bytes as given."),
    "hidden_over_heads": ("you derived head_dim as hidden_size / num_attention_heads = {derived_head_dim}; this "
                          "config gives head_dim = {head_dim} explicitly.",
                          "you derived head_dim as hidden_size / num_attention_heads where the config gives head_dim "
                          "explicitly."),
    "missing_layers": ("the number of layers ({layers}) is missing: every layer keeps its own cache.",
                       "the number of layers is missing."),
    "ignored_dtype_bytes": ("the answer does not follow the argument dtype_bytes ({dtype_bytes} B per element): "
                            "it uses another element size (a fixed one, or one read from the config).",
                            "the argument dtype_bytes is not followed (another element size is used)."),
    "missing_seq_len": ("the sequence length ({seq_len}) is missing: one entry per token.",
                        "the sequence length is missing."),
    "missing_batch": ("the batch ({batch_size}) is missing: sequences share nothing.",
                      "the batch size is missing."),
    "tokens_not_sequences": ("that is how many tokens fit, not how many sequences: divide by the sequence length "
                             "({seq_len} tokens).",
                             "that counts tokens, not sequences: divide by the sequence length."),
    "ceil_not_floor": ("a fraction of a sequence cannot be admitted: take the floor, not the ceiling (or rounding).",
                       "take the floor, not the ceiling (or a rounding): a fraction of a sequence cannot be admitted."),
    "utilization_after_weights": ("the utilization caps the engine's share of the whole memory: budget M x u, then "
                                  "subtract the weights and the other allocations (M u - W - O), not (M - W - O) x u nor "
                                  "(M - W) x u - O.",
                                  "the utilization applies to the whole memory (M u - W - O), not to what is left "
                                  "after the weights."),
    "weights_missing": ("the weights are missing: {num_params:,} parameters x {weight_dtype_bytes} B sit on the GPU "
                        "before any cache does.",
                        "the weights are not subtracted."),
    "weight_dtype_ignored": ("the weights are not num_params x weight_dtype_bytes ({weight_dtype_bytes} B per "
                             "parameter): you used another size per parameter (a fixed one, or the cache's).",
                             "the weights are not num_params x weight_dtype_bytes."),
    "negative_count": ("the weights and other allocations leave no room for a cache: no sequence fits, so the answer "
                       "is 0, not a negative count.",
                       "when nothing fits, the answer is zero, not a negative count."),
    "inverted_ratio": ("the ratio is upside down: each KV head serves num_attention_heads / num_key_value_heads = "
                       "{num_heads} / {kv_heads} query heads, not K / H.",
                       "the ratio is upside down: query heads per KV head is H / K."),
    "absent_as_mqa": ("num_key_value_heads absent (or null) means one KV head per query head (K = H = {num_heads}, "
                      "MHA), not a single KV head (MQA).",
                      "num_key_value_heads absent or null means one KV head per query head (MHA), not one in all."),
    "inflated_not_extra": ("that second figure is the bytes per token counted with the query heads; the cost of that "
                           "slip is what it adds: subtract the bytes per token counted with the KV heads.",
                           "the second figure is the inflated bytes per token, not what the slip adds to it."),
    "real_not_extra": ("that second figure is the real bytes per token (counted with the KV heads); the question asks "
                       "what counting the query heads instead would add to it.",
                       "the second figure is the real bytes per token, not what counting the query heads adds."),
}


def kv_token(layers, kv_heads, head_dim, dtype_bytes, **_):
    """Bytes per token of a case's geometry (its other keywords ignored): 2 L K D b."""
    return formulas.kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes)


def token_slips(i):
    """Slipped variants of bytes per token (each returns a wrong value or None)."""
    L, K, D, b = i["layers"], i["kv_heads"], i["head_dim"], i["dtype_bytes"]
    H, hidden = i.get("num_heads"), i.get("hidden_size")
    out = []
    if H and H != K:
        out.append(("query_heads", formulas.kv_bytes_per_token(L, H, D, b)))
    out.append(("missing_kv_factor", formulas.kv_bytes_per_token(L, K, D, b) // 2))
    out.append(("bits_not_bytes", formulas.kv_bytes_per_token(L, K, D, b * 8)))
    if b == 2:
        out.append(("fp32_bytes", formulas.kv_bytes_per_token(L, K, D, 4)))
    if b in (1, 2):
        out.append(("wrong_16bit_vs_fp8", formulas.kv_bytes_per_token(L, K, D, 3 - b)))
    if H and hidden and hidden % H == 0 and hidden // H != D:
        out.append(("hidden_over_heads", formulas.kv_bytes_per_token(L, K, hidden // H, b)))
    out.append(("missing_layers", formulas.kv_bytes_per_token(1, K, D, b)))
    for other in (1, 2, 4):  # dtype_bytes not followed: another element size (fixed, or read from a config)
        if other != b:
            out.append((f"ignored_dtype_bytes@{other}", formulas.kv_bytes_per_token(L, K, D, other)))
    if H and H != K:
        out.append(("query_heads+missing_kv_factor", formulas.kv_bytes_per_token(L, H, D, b) // 2))
    return out


def _scaled(slips, factor):
    """The slipped bytes per token times ``factor`` (tokens, or tokens x batch)."""
    return [(key, value * factor) for key, value in slips if value is not None]


def _q_kv_bytes_per_token(i):
    expected = kv_token(**i)
    return expected, token_slips(i) + unit_slips(expected)


def _q_kv_bytes_per_sequence(i):
    expected = kv_token(**i) * i["seq_len"]
    slips = _scaled(token_slips(i), i["seq_len"])
    slips.append(("missing_seq_len", kv_token(**i)))
    return expected, slips + unit_slips(expected)


def _q_kv_bytes_total(i):
    per_seq = kv_token(**i) * i["seq_len"]
    expected = per_seq * i["batch_size"]
    slips = _scaled(token_slips(i), i["seq_len"] * i["batch_size"])
    slips += [("missing_batch", per_seq), ("missing_seq_len", kv_token(**i) * i["batch_size"])]
    return expected, slips + unit_slips(expected)


def _q_max_concurrency(i):
    """Sequences that fit in budget_bytes, from geometry and seq_len."""
    budget = i["budget_bytes"]
    per_seq = kv_token(**i) * i["seq_len"]
    expected = formulas.max_concurrency(budget, per_seq)
    slips = []
    for key, wrong_token in token_slips(i):
        slips.append((key, formulas.max_concurrency(budget, wrong_token * i["seq_len"])))
    slips.append(("ceil_not_floor", math.ceil(budget / per_seq)))
    slips.append(("ceil_not_floor@round", round(budget / per_seq)))
    slips.append(("gb_for_gib@up", formulas.max_concurrency(budget * GiB / GB, per_seq)))
    slips.append(("gb_for_gib@down", formulas.max_concurrency(budget * GB / GiB, per_seq)))
    slips.append(("gb_for_gib@up", budget / per_seq * GiB / GB))
    slips.append(("tokens_not_sequences", formulas.max_concurrency(budget, kv_token(**i))))
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_bytes_to_gib(i):
    return i["n_bytes"] / GiB, [("gb_for_gib", i["n_bytes"] / GB)]


def _q_bytes_to_gb(i):
    return i["n_bytes"] / GB, [("gb_for_gib", i["n_bytes"] / GiB)]


def _sequences_on_gpu(m, u, w, o, per_seq):
    """floor((M u - W - O) / per_seq), with M u - W - O floored to whole bytes first (kv_pool_bytes)."""
    return formulas.max_concurrency(formulas.kv_pool_bytes(m, u, w, o), per_seq)


def _q_sequences_on_gpu(i):
    """Sequences that fit on one GPU: max(0, floor((M u - W - O) / (bytes_per_token T))), W = P x weight bytes.

    ``gpu_bytes`` is M as CUDA reports it (``cuda_total_gib`` x 2^30), ``label_bytes`` the label read as GB.
    """
    m, u, o, bpt, t = i["gpu_bytes"], i["utilization"], i["other_bytes"], i["bytes_per_token"], i["seq_len"]
    p, wb = i["num_params"], i["weight_dtype_bytes"]
    w = formulas.weight_bytes(p, wb)
    per_seq = formulas.kv_bytes_per_sequence(bpt, t)
    raw = _sequences_on_gpu(m, u, w, o, per_seq)
    expected = max(0, raw)

    def fit(**changed):     # the count with one input changed, negative counts kept (they are slips too)
        args = dict(m=m, u=u, w=w, o=o, per_seq=per_seq)
        args.update(changed)
        return max(0, _sequences_on_gpu(**args))

    slips = []
    if i.get("label_bytes"):
        slips.append(("label_memory", fit(m=i["label_bytes"])))
        slips.append(("label_memory+gb_for_gib", fit(m=i["label_bytes"] * GiB / GB)))
    slips += [("gb_for_gib@down", fit(m=m * GB / GiB)),
              ("ignored_utilization", fit(u=1)),
              ("utilization_after_weights", max(0, formulas.max_concurrency(math.floor((m - w - o) * u), per_seq))),
              # the same slip with the other allocations taken off after the share: (M - W) u - O
              ("utilization_after_weights@other_last",
               max(0, formulas.max_concurrency(math.floor((m - w) * u - o), per_seq))),
              ("ignored_other_bytes", fit(o=0)),
              ("weights_missing", fit(w=0))]
    for other in (1, 2, 4):
        if other != wb:
            slips.append((f"weight_dtype_ignored@{other}", fit(w=formulas.weight_bytes(p, other))))
    pool = formulas.kv_pool_bytes(m, u, w, o)
    slips += [("tokens_not_sequences", max(0, formulas.max_concurrency(pool, bpt))),
              ("ceil_not_floor", max(0, math.ceil(pool / per_seq))),
              ("ceil_not_floor@round", max(0, round(pool / per_seq)))]
    slips.append(("negative_count", raw))     # the right count itself (dropped below) unless it is negative
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_kv_head_sharing(i):
    """(H / K, extra bytes per token from counting H instead of K): (H // K, 2 L (H - K) D b).

    ``kv_heads`` is K as the config resolves it (absent or null: K = H); ``kv_field_absent`` says the
    config had no value for it, where reading the absence as one KV head (MQA) is the slip.
    """
    L, H, K, D, b = i["layers"], i["num_heads"], i["kv_heads"], i["head_dim"], i["dtype_bytes"]
    group = H // K
    with_h, with_k = (formulas.kv_bytes_per_token(L, h, D, b) for h in (H, K))
    expected = (group, with_h - with_k)
    slips = [("inverted_ratio", (K / H, with_h - with_k)), ("inverted_ratio", (K // H, with_h - with_k))]
    if i.get("kv_field_absent"):
        slips.append(("absent_as_mqa", (H, with_h - formulas.kv_bytes_per_token(L, 1, D, b))))
    slips += [("inflated_not_extra", (group, with_h)), ("real_not_extra", (group, with_k))]
    # the slips of bytes per token, made in both counts alike
    on_h = token_slips(dict(i, kv_heads=H))     # H heads both ways: no query-head slip in it
    on_k = [(k, v) for k, v in token_slips(i) if not k.startswith("query_heads")]
    for (key, wrong_h), (_, wrong_k) in zip(on_h, on_k):
        slips.append((key, (group, wrong_h - wrong_k)))
    return expected, [(k, v) for k, v in slips if v != expected]


QUANTITIES = {
    "kv_bytes_per_token": _q_kv_bytes_per_token,
    "kv_bytes_per_sequence": _q_kv_bytes_per_sequence,
    "kv_bytes_total": _q_kv_bytes_total,
    "max_concurrency": _q_max_concurrency,
    "bytes_to_gib": _q_bytes_to_gib,
    "bytes_to_gb": _q_bytes_to_gb,
    "sequences_on_gpu": _q_sequences_on_gpu,
    "kv_head_sharing": _q_kv_head_sharing,
}
UNROUNDED = {
    "max_concurrency": ("floor", lambda i: exact_ratio(i["budget_bytes"], kv_token(**i) * i["seq_len"])),
}
COUNT_SLIPS = {"ceil_not_floor"}


def figures(key, inputs) -> dict:
    """``{bits}`` and ``{wrong_bytes}`` of the cache's element, ``{derived_head_dim}`` (hidden_size / heads)."""
    element = inputs.get("dtype_bytes", 2)      # a 16-bit cache unless the case says otherwise
    out = {"bits": 8 * element, "wrong_bytes": 3 - element}
    if inputs.get("hidden_size") and inputs.get("num_heads"):
        out["derived_head_dim"] = inputs["hidden_size"] // inputs["num_heads"]
    return out
