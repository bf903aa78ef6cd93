"""KV heads split over tensor-parallel GPUs, replicated past K: ch02_gqa_tp's slips (and the tp_per_gpu drill).

``q_kv_bytes_per_token_per_gpu`` (per-GPU bytes per token) and ``per_gpu_token`` are what the capacity
plan and MLA's per-GPU figure start from.
"""

from __future__ import annotations

import math

from kvlib import formulas
from kvlib.units import GB, GiB

from .engine import exact_ratio, unit_slips
from .kv_formula import kv_token, token_slips

SLIP_WORDS = {
    "total_not_per_gpu": ("under tensor parallelism ({tp} GPUs) each GPU holds only its own KV heads: divide by the "
                          "GPUs that split them.",
                          "under tensor parallelism each GPU holds only its own KV heads: divide by the GPUs that "
                          "split them."),
    "split_replicated": ("with tp = {tp} > KV heads = {kv_heads}, heads are replicated, not split: each GPU keeps at "
                         "least one full KV head.",
                         "with more GPUs than KV heads, heads are replicated, not split: each GPU keeps at least one "
                         "whole KV head."),
    "tp_floor_missing": ("with tp = {tp} > KV heads = {kv_heads}, kv_heads // tp is 0: each GPU keeps at least one "
                         "whole KV head, max(1, kv_heads // tp).",
                         "with more GPUs than KV heads, kv_heads // tp is 0: each GPU keeps at least one KV head."),
    "weights_not_split": ("under tensor parallelism each GPU holds 1/{tp} of the weights: use W / tp per GPU, not the "
                          "whole W.",
                          "under tensor parallelism each GPU holds only its share of the weights."),
    "reserve_times_tp": ("the reserve ({reserve_bytes:,} B) is for each GPU already: subtract it once per GPU, do not "
                         "multiply it by tp.",
                         "the reserve is per GPU already: do not multiply it by tp."),
}


def _query_heads_split(i):
    """The query heads split over the GPUs, in words with both per-GPU counts (None: a figure is missing)."""
    if not (i.get("num_heads") and i.get("tp") and i.get("kv_heads")):
        return None
    words = ("you split the query heads over the GPUs (num_attention_heads / TP = {num_heads} / {tp} = "
             "{query_heads_per_gpu} per GPU) instead of the KV heads (max(1, {kv_heads} / {tp}) = {kv_heads_per_gpu} "
             "per GPU).")
    return words.format(**dict(i, query_heads_per_gpu=i["num_heads"] // i["tp"],
                               kv_heads_per_gpu=formulas.kv_heads_per_gpu(i["kv_heads"], i["tp"])))


#: A variant whose case figures differ from its catalogue key's: its own words (the same slip, the same key).
VARIANT_SLIPS = {"query_heads@split": _query_heads_split}


def q_kv_bytes_per_token_per_gpu(i):
    """Per-GPU bytes per token under TP (kv_heads split, replicated past K; MLA whole)."""
    tp, K = i["tp"], i["kv_heads"]
    if i.get("latent_dim"):
        expected = formulas.mla_bytes_per_token(i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"])
        return expected, [("mla_split_by_tp", expected / tp)] + unit_slips(expected)
    per_gpu = formulas.kv_heads_per_gpu(K, tp)
    expected = formulas.kv_bytes_per_token(i["layers"], per_gpu, i["head_dim"], i["dtype_bytes"])
    total = formulas.kv_bytes_per_token(i["layers"], K, i["head_dim"], i["dtype_bytes"])
    slips = [("total_not_per_gpu", total)] if tp > 1 else []
    if tp > K:
        slips.append(("split_replicated", total / tp))
        slips.append(("tp_floor_missing", formulas.kv_bytes_per_token(i["layers"], K // tp, i["head_dim"],
                                                                      i["dtype_bytes"])))
    if i.get("num_heads") and i["num_heads"] != K and tp <= i["num_heads"]:
        # the query heads split over the GPUs instead of the KV heads
        slips.append(("query_heads@split", formulas.kv_bytes_per_token(i["layers"], i["num_heads"] // tp, i["head_dim"],
                                                                 i["dtype_bytes"])))
    per_gpu_inputs = dict(i, kv_heads=per_gpu)
    if i.get("num_heads"):
        per_gpu_inputs["num_heads"] = i["num_heads"] // min(tp, i["num_heads"])
    slips += [(k, v) for k, v in token_slips(per_gpu_inputs) if not k.startswith("query_heads")]
    return expected, slips + unit_slips(expected)


def _q_kv_heads_and_group(i):
    """(K, H // K) from a config: K as it resolves (absent or null: K = H, MHA).

    ``kv_field_absent``: the config had no value for num_key_value_heads, where reading the absence as one KV
    head in all (MQA) is the slip.
    """
    H, K = i["num_heads"], i["kv_heads"]
    expected = (K, H // K)
    slips = [("inverted_ratio", (K, K // H)), ("inverted_ratio", (K, K / H))]
    if i.get("kv_field_absent"):
        slips.append(("absent_as_mqa", (1, H)))
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_max_concurrency_per_gpu(i):
    """Sequences per GPU under TP: floor((M - ceil(W / tp) - R) / (per-GPU bytes per token x T)).

    Inputs: cuda_memory_bytes (M, as CUDA reports it), weight_bytes (W, the whole model),
    reserve_bytes (R, per GPU), the geometry, tp, seq_len (and num_heads for the query-head slip).
    """
    tp, k, t = i["tp"], i["kv_heads"], i["seq_len"]
    memory, weights, reserve = i["cuda_memory_bytes"], i["weight_bytes"], i["reserve_bytes"]
    geometry = (i["layers"], i["head_dim"], i["dtype_bytes"])
    budget = memory - formulas.weight_bytes_per_gpu(weights, tp) - reserve
    per_gpu = dict(i, kv_heads=formulas.kv_heads_per_gpu(k, tp))
    bpt = kv_token(**per_gpu)
    total = kv_token(**i)

    def seqs(budget_bytes, bytes_per_token):
        return formulas.max_concurrency(budget_bytes, bytes_per_token * t)

    expected = seqs(budget, bpt)
    # at tp 1 the TP slips give the right count, and a query-head count equal to K the right bytes: all dropped
    slips = [("weights_not_split", seqs(memory - weights - reserve, bpt)), ("total_not_per_gpu", seqs(budget, total)),
             ("weights_not_split+total_not_per_gpu", seqs(memory - weights - reserve, total)),
             # the whole weights on one GPU leave a negative budget, which max(0, ...) turns into zero
             ("weights_not_split@clamped", max(0, seqs(memory - weights - reserve, bpt)))]
    if tp > 1:
        slips.append(("reserve_times_tp", max(0, seqs(memory - formulas.weight_bytes_per_gpu(weights, tp)
                                                      - reserve * tp, bpt))))
        slips.append(("reserve_times_tp@unclamped", seqs(memory - formulas.weight_bytes_per_gpu(weights, tp)
                                                          - reserve * tp, bpt)))
    if tp > k:
        slips.append(("split_replicated", seqs(budget, total / tp)))
    h = i.get("num_heads")
    if h:
        wrong = formulas.kv_bytes_per_token(geometry[0], formulas.kv_heads_per_gpu(h, tp), *geometry[1:])
        slips.append(("query_heads", seqs(budget, wrong)))
    slips += [(key, seqs(budget, wrong)) for key, wrong in token_slips(dict(per_gpu, num_heads=None)) if wrong]
    slips += [("ceil_not_floor", math.ceil(budget / (bpt * t))), ("ceil_not_floor@round", round(budget / (bpt * t))),
              ("tokens_not_sequences", seqs(budget, bpt / t)),
              ("gb_for_gib@up", seqs(budget * GiB / GB, bpt)), ("gb_for_gib@down", seqs(budget * GB / GiB, bpt))]
    return expected, [(key, v) for key, v in slips if v != expected]


def per_gpu_token(i):
    return kv_token(**dict(i, kv_heads=formulas.kv_heads_per_gpu(i["kv_heads"], i["tp"])))


QUANTITIES = {
    "kv_bytes_per_token_per_gpu": q_kv_bytes_per_token_per_gpu,
    "kv_heads_and_group": _q_kv_heads_and_group,
    "max_concurrency_per_gpu": _q_max_concurrency_per_gpu,
}
UNROUNDED = {
    "max_concurrency_per_gpu": ("floor", lambda i: exact_ratio(
        i["cuda_memory_bytes"] - formulas.weight_bytes_per_gpu(i["weight_bytes"], i["tp"]) - i["reserve_bytes"],
        per_gpu_token(i) * i["seq_len"])),
}
