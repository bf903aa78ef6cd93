"""The pool vLLM reserves, paging and block waste, sliding-window layers, fp8: ch04_pool_paging's slips.

Also the drills on a pool (``pool``, ``fp8``, ``block_waste``).
"""

from __future__ import annotations

import math

from kvlib import formulas
from kvlib.alloc_sim import allocator_waste
from kvlib.units import GB, GiB

from .engine import exact_ratio, unit_slips
from .kv_formula import kv_token, token_slips

SLIP_WORDS = {
    "label_memory": ("you started from the memory on the label ({label_gb} GB) instead of what CUDA reports "
                     "({cuda_gb} GB).",
                     "you started from the memory on the label instead of what CUDA reports."),
    "ignored_utilization": ("the utilization ({utilization}) is not applied: vLLM budgets only that share of the "
                            "memory CUDA reports.",
                            "the utilization is not applied."),
    "ignored_other_bytes": ("the other allocations ({other_bytes:,} B: activation peak, non-torch memory, CUDA "
                            "graphs) are not subtracted.",
                            "the other allocations are not subtracted."),
    "windowed_as_full": ("sliding-window layers hold at most {sliding_window} tokens; you counted them at the full "
                         "context.",
                         "the sliding-window layers are counted at the full length instead of the window."),
    "sliding_layers_dropped": ("the sliding-window layers are left out; they still hold up to {sliding_window} tokens "
                               "each.",
                               "the sliding-window layers are left out."),
    "all_layers_windowed": ("every layer is capped at the window ({sliding_window} tokens); only the sliding-window "
                            "layers are, the full-attention layers hold the whole sequence.",
                            "every layer is capped at the window, the full-attention layers too."),
    "window_minus_one": ("a sliding-window layer holds the whole window, up to {sliding_window} tokens: "
                         "min(seq_len, window), not window - 1 (vLLM's w - 1 is the tokens before the newest one, "
                         "which the newest one joins).",
                         "a sliding-window layer holds up to the whole window (w tokens), not w - 1."),
    "window_not_capped": ("a sequence shorter than the window ({sliding_window} tokens) holds only its own tokens in "
                          "a sliding-window layer: min(seq_len, window), not the whole window.",
                          "a sequence shorter than the window holds only its own tokens in a windowed layer."),
    "tokens_not_blocks": ("vLLM counts the pool in whole blocks of {block_size} tokens: take the floor in blocks, "
                          "then multiply by the block size.",
                          "the pool is counted in whole blocks: floor in blocks, then multiply by the block size."),
    "answer_in_blocks": ("that is the number of blocks; the question asks for tokens (blocks x {block_size}).",
                         "that is a block count; return tokens."),
    "block_size_not_minus_one": ("a last block is short by 0 to block_size - 1 tokens (block_size = {block_size}), "
                                 "never by a whole block: the average is (bs - 1) / 2, not bs / 2.",
                                 "a last block is short by 0 to block_size - 1 tokens: the average is (bs - 1) / 2."),
    "half_floored": ("floor division (//) drops the half: a last block wastes (bs - 1) / 2 slots on average, "
                     "a fraction when the block size ({block_size}) is even: divide with /, not //.",
                     "floor division (//) drops the half: the average (bs - 1) / 2 is a fraction for an even block "
                     "size."),
    "worst_case_waste": ("that is the worst case, every last block holding one token; with lengths uniform modulo the "
                         "block size the expected waste is half of it.",
                         "that is the worst case, not the expected waste."),
    "one_sequence_waste": ("that is one sequence's expected waste; multiply by the {num_seqs} sequences.",
                           "that is one sequence's waste; multiply by the number of sequences."),
    "paged_whole_last_block": ("a sequence whose length is a multiple of the block size wastes nothing: the last "
                               "block's empty slots are (-length) mod block_size, not block_size - length mod "
                               "block_size.",
                               "a length that is a multiple of the block size wastes nothing in its last block."),
    "paged_floor_not_ceil": ("the paged policy allocates ceil(held / block_size) blocks, never fewer: a partial last "
                             "block is a whole block allocated (you took the floor).",
                             "the paged policy allocates ceil(held / block_size) blocks, not the floor."),
    "tokens_not_waste": ("that is the slots holding tokens; the question asks for the slots allocated that hold none.",
                         "that counts slots holding tokens, not waste."),
    "allocated_not_waste": ("that is every slot allocated; subtract the slots that hold a token.",
                            "that counts every allocated slot, not waste."),
    "prompt_without_first_token": ("at the step of admission each sequence holds its prompt and its first generated "
                                   "token (prompt + 1 tokens), not the prompt alone.",
                                   "at admission a sequence holds prompt + 1 tokens."),
    "reservation_ignored": ("slots reserved for tokens a sequence has yet to generate also hold no token now: count "
                            "them as waste.",
                            "slots reserved for tokens still to come are waste now."),
    "oracle_extra_slot": ("the oracle reserves exactly prompt + output slots; the first generated token is one of the "
                          "output's, so there is no extra slot for it.",
                          "the oracle reserves exactly prompt + output slots, no extra one."),
}


def _q_kv_pool_tokens(i):
    """Pool tokens from CUDA-reported memory (gpu_bytes), as kv_pool_tokens."""
    args = (i["utilization"], i["weight_bytes"], i["other_bytes"])
    bpt = i["bytes_per_token"]
    expected = formulas.kv_pool_tokens(i["gpu_bytes"], *args, bpt)
    slips = []
    if i.get("label_bytes"):
        slips.append(("label_memory", formulas.kv_pool_tokens(i["label_bytes"], *args, bpt)))
    slips.append(("gb_for_gib@down", formulas.kv_pool_tokens(i["gpu_bytes"] * GB / GiB, *args, bpt)))
    slips.append(("ignored_utilization@pool", formulas.kv_pool_tokens(i["gpu_bytes"], 1, *args[1:], bpt)))
    slips.append(("ceil_not_floor", math.ceil((i["gpu_bytes"] * args[0] - args[1] - args[2]) / bpt)))
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_pool_tokens(i):
    """Tokens a KV budget holds: floor(budget_bytes / bytes_per_token) from the geometry."""
    budget = i["budget_bytes"]
    bpt = kv_token(**i)
    expected = math.floor(budget / bpt)
    slips = [(key, math.floor(budget / wrong)) for key, wrong in token_slips(i) if wrong]
    slips += [("ceil_not_floor", math.ceil(budget / bpt)), ("ceil_not_floor@round", round(budget / bpt)),
              ("gb_for_gib@up", math.floor(budget * GiB / GB / bpt)), ("gb_for_gib@down", math.floor(budget * GB / GiB / bpt))]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_pool_tokens_reported(i):
    """Pool tokens from memory as CUDA reports it (kv_pool_tokens), with the label and unit slips of ch04."""
    m, u, w, o, bpt = i["gpu_bytes"], i["utilization"], i["weight_bytes"], i["other_bytes"], i["bytes_per_token"]
    expected = formulas.kv_pool_tokens(m, u, w, o, bpt)
    slips = []
    if i.get("label_bytes"):
        slips.append(("label_memory", formulas.kv_pool_tokens(i["label_bytes"], u, w, o, bpt)))
    slips += [("gb_for_gib@down", formulas.kv_pool_tokens(m * GB / GiB, u, w, o, bpt)),
              ("gb_for_gib@up", formulas.kv_pool_tokens(m * GiB / GB, u, w, o, bpt)),
              ("ignored_utilization", formulas.kv_pool_tokens(m, 1, w, o, bpt)),
              ("ignored_other_bytes", formulas.kv_pool_tokens(m, u, w, 0, bpt)),
              # u applied to what the weights leave (chapter 01's order slip): (M - W - O) u, or (M - W) u - O
              ("utilization_after_weights", math.floor((m - w - o) * u / bpt)),
              ("utilization_after_weights@other_last", math.floor(((m - w) * u - o) / bpt)),
              ("ceil_not_floor", math.ceil((m * u - w - o) / bpt)),
              ("round_for_floor", round((m * u - w - o) / bpt))]      # round(): the ceiling above a half only
    return expected, [(k, v) for k, v in slips if v != expected]


def _hybrid_bytes(full_layers, sliding_layers, kv_heads, head_dim, dtype_bytes, seq_len, window):
    per_layer_token = formulas.kv_bytes_per_token(1, kv_heads, head_dim, dtype_bytes)
    return per_layer_token * (full_layers * seq_len + sliding_layers * min(seq_len, window))


def _q_hybrid_kv_bytes_per_sequence(i):
    """One sequence's KV bytes when some layers attend over a sliding window (windowed layers capped)."""
    f, s, K, D, b, t, win = (i["full_layers"], i["sliding_layers"], i["kv_heads"], i["head_dim"], i["dtype_bytes"],
                             i["seq_len"], i["sliding_window"])
    expected = _hybrid_bytes(f, s, K, D, b, t, win)
    per_layer_token = formulas.kv_bytes_per_token(1, K, D, b)
    slips = [("windowed_as_full", _hybrid_bytes(f + s, 0, K, D, b, t, win)),
             ("window_not_capped", per_layer_token * (f * t + s * win)),
             ("window_minus_one", _hybrid_bytes(f, s, K, D, b, t, win - 1)),
             ("sliding_layers_dropped", _hybrid_bytes(f, 0, K, D, b, t, win)),
             ("all_layers_windowed", _hybrid_bytes(0, f + s, K, D, b, t, win)),
             ("missing_kv_factor", expected // 2)]
    H = i.get("num_heads")
    if H:       # H = K gives the right figure, dropped below
        slips.append(("query_heads", _hybrid_bytes(f, s, H, D, b, t, win)))
    for other in (1, 2, 4):
        if other != b:
            slips.append((f"ignored_dtype_bytes@{other}", _hybrid_bytes(f, s, K, D, other, t, win)))
    return expected, [(k, v) for k, v in slips if v != expected] + unit_slips(expected)


def _q_fp8_pool_tokens(i):
    """Tokens an fp8 pool holds as vLLM counts them: (A // (bs * L * 2 * K * D * 1)) * bs."""
    a, bs = i["available_bytes"], i["block_size"]
    L, K, D = i["layers"], i["kv_heads"], i["head_dim"]

    def tokens(per_token, avail=a):     # whole bytes (a GB/GiB slip gives a float), whole blocks, then tokens
        return int(avail) // (bs * per_token) * bs

    fp8 = formulas.kv_bytes_per_token(L, K, D, 1)
    expected = tokens(fp8)
    slips = [("wrong_16bit_vs_fp8", tokens(formulas.kv_bytes_per_token(L, K, D, 2))),
             ("tokens_not_blocks", a // fp8),
             ("answer_in_blocks", a // (bs * fp8)),
             ("missing_kv_factor", tokens(fp8 // 2)),
             ("missing_layers", tokens(formulas.kv_bytes_per_token(1, K, D, 1))),
             ("gb_for_gib@down", tokens(fp8, a * GB / GiB)), ("gb_for_gib@up", tokens(fp8, a * GiB / GB))]
    H = i.get("num_heads")
    if H:       # H = K gives the right figure, dropped below
        slips.append(("query_heads", tokens(formulas.kv_bytes_per_token(L, H, D, 1))))
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_block_waste_tokens(i):
    """Expected slots wasted in last blocks: N (bs - 1) / 2 (kvlib.formulas.block_waste_tokens)."""
    n, bs = i["num_seqs"], i["block_size"]
    expected = formulas.block_waste_tokens(n, bs)
    return expected, [("block_size_not_minus_one", formulas.exact_div(n * bs, 2)),
                      ("worst_case_waste", n * (bs - 1)),
                      ("one_sequence_waste", formulas.exact_div(bs - 1, 2)),
                      # floor division: each sequence's (bs - 1) // 2, or the total's
                      ("half_floored", n * ((bs - 1) // 2)), ("half_floored@total", n * (bs - 1) // 2)]


def _q_allocator_waste(i):
    reqs, pol, bs, msl = i["requests"], i["policy"], i["block_size"], i["max_seq_len"]
    expected = allocator_waste(reqs, pol, bs, msl)
    held = sum(p + 1 for p, _ in reqs)
    slips = [("tokens_not_waste", held), ("allocated_not_waste", expected + held),
             ("prompt_without_first_token", allocator_waste(reqs, pol, bs, msl, held_extra=0)),
             # the same slip made on the prompt itself (prompt - 1 everywhere): the oracle's waste is then right
             ("prompt_without_first_token@prompt", allocator_waste([[p - 1, o] for p, o in reqs], pol, bs, msl))]
    if pol == "paged":
        slips.append(("paged_whole_last_block", allocator_waste(reqs, pol, bs, msl, last_block="whole")))
        floor_blocks = sum((p + 1) // bs * bs - (p + 1) for p, _ in reqs)
        slips += [("paged_floor_not_ceil", floor_blocks), ("paged_floor_not_ceil@clamped", max(0, floor_blocks))]
    else:   # a variant of its own for the oracle ("it knows the final length, so it wastes nothing"): a
        # max_reservation case the learner gets right does not rule out the oracle's
        slips.append(("reservation_ignored" + ("@oracle" if pol == "oracle" else ""),
                      allocator_waste(reqs, pol, bs, msl, count_reservation=False)))
    if pol == "oracle":
        slips.append(("oracle_extra_slot", expected + len(reqs)))
    return expected, [(k, v) for k, v in slips if v != expected]


QUANTITIES = {
    "kv_pool_tokens": _q_kv_pool_tokens,
    "pool_tokens": _q_pool_tokens,
    "pool_tokens_reported": _q_pool_tokens_reported,
    "hybrid_kv_bytes_per_sequence": _q_hybrid_kv_bytes_per_sequence,
    "fp8_pool_tokens": _q_fp8_pool_tokens,
    "block_waste_tokens": _q_block_waste_tokens,
    "allocator_waste": _q_allocator_waste,
}


def _pool_tokens_unrounded(i):
    return exact_ratio(formulas.kv_pool_bytes(i["gpu_bytes"], i["utilization"], i["weight_bytes"], i["other_bytes"]),
                       i["bytes_per_token"])


UNROUNDED = {
    "kv_pool_tokens": ("floor", _pool_tokens_unrounded),
    "pool_tokens": ("floor", lambda i: exact_ratio(i["budget_bytes"], kv_token(**i))),
    "pool_tokens_reported": ("floor", _pool_tokens_unrounded),
}
COUNT_SLIPS = {"paged_floor_not_ceil"}


def figures(key, inputs) -> dict:
    """``{label_gb}`` and ``{cuda_gb}``: the memory on the label and as CUDA reports it, in GB to 0.01."""
    if not inputs.get("label_bytes"):
        return {}
    return {"label_gb": f"{inputs['label_bytes'] / GB:.2f}", "cuda_gb": f"{inputs['gpu_bytes'] / GB:.2f}"}
