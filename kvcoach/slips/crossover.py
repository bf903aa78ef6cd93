"""The weight/KV crossover, the decode step at the bandwidth limit, what to shrink: ch06_crossover's slips.

Also the drills ``crossover`` and ``step_time``.
"""

from __future__ import annotations

import math

from kvlib import formulas
from kvlib.units import GB, GiB

from .engine import close, exact_ratio
from .kv_formula import kv_token, token_slips

SLIP_WORDS = {
    "crossover_not_divided": ("that is the crossover in token-slots (batch x context); divide by the batch "
                              "({batch_size}) for the context.",
                              "that is the crossover in token-slots (batch x context); divide by the batch."),
    "crossover_rounded_down": ("the crossover context is the first whole context at which the cache reads reach the "
                               "weights: round up (ceil), not down or to the nearest token.",
                               "round the crossover context up (ceil), not down or to the nearest token."),
    "batch_multiplied": ("you multiplied by the batch ({batch_size}); the token-slots W / bytes per token are shared "
                         "by the batch, so divide by it.",
                         "the batch multiplies where it should divide."),
    "kv_only_step": ("the weights are missing: every decode step reads all of them once, besides the KV cache.",
                     "the weights are missing: every decode step reads all of them once."),
    "weights_only_step": ("the KV reads are missing: every step also reads each sequence's whole cache (B = {batch_size} "
                          "of {seq_len} tokens each).",
                          "the KV reads are missing: every step also reads each sequence's whole cache."),
    "ignored_efficiency": ("the efficiency is not applied: at a share e = {efficiency:g} of the peak bandwidth the "
                           "step takes (bandwidth-limit step) / e, so fewer tokens per second.",
                           "the efficiency is not applied."),
    "efficiency_inverted": ("the efficiency works the wrong way round: reaching only a share e = {efficiency:g} of "
                            "the bandwidth makes the step longer (divide the step time by e, do not multiply).",
                            "the efficiency is applied the wrong way round (divide the step time by it)."),
    "per_sequence_rate": ("that is one sequence's rate (one token per step); the batch of {batch_size} sequences each "
                          "get a token every step, so multiply by the batch.",
                          "that is one sequence's rate: multiply by the batch."),
    "speedup_inverted": ("the speedup is upside down: divide the bf16 step time by the fp8 one (a number above 1).",
                         "the speedup is upside down: bf16 step time / fp8 step time."),
    "contexts_swapped": ("the two speedups are swapped: the first is at the short context, the second at the long one.",
                         "the two speedups are swapped (short context first)."),
    "other_fix_chosen": ("you named the fix that takes fewer bytes off the step: int4 weights remove three quarters "
                         "of the weights' read, an fp8 cache half of the cache's (batch x context x bytes per "
                         "token); the one that removes more is the one to make.",
                         "the fix that removes more bytes is the one to make: 3/4 of the weights, or 1/2 the cache."),
    "larger_read_rule": ("you named the fix for the larger read (the regime); a fix is worth the bytes it removes: "
                         "int4 takes off 3/4 of the weights, fp8 half of the cache, so int4 weights still win until "
                         "the cache read is 1.5 x the weights (3 W >= 2 x cache).",
                         "compare the bytes each fix removes (3/4 W against 1/2 the cache), not the two reads."),
    "always_quantise_weights": ("you answered 'quantise_weights' whatever the workload: compare what each fix takes "
                                "off the step (3/4 of the weights, 1/2 of batch x context x bytes per token of "
                                "cache); the larger saving wins.",
                                "the same choice whatever the workload: compare 3/4 of the weights with half the "
                                "cache read."),
    "always_shrink_kv_cache": ("you answered 'shrink_kv_cache' whatever the workload: compare what each fix takes off "
                               "the step (3/4 of the weights, 1/2 of batch x context x bytes per token of cache); the "
                               "larger saving wins.",
                               "the same choice whatever the workload: compare 3/4 of the weights with half the cache "
                               "read."),
    "active_experts_only": ("that is one token's k = {top_k} experts (the active ones); {batch_size} tokens are routed "
                            "independently and reach more of them: E (1 - (1 - k/E)^B).",
                            "that is one token's active experts; a batch reaches more: E (1 - (1 - k/E)^B)."),
    "total_experts": ("that is every expert (the total, E = {num_experts}); a batch of {batch_size} reads only those "
                      "some token was routed to, on average E (1 - (1 - k/E)^B).",
                      "not every expert is read: only those some token of the batch was routed to."),
    "no_expert_overlap": ("tokens share experts: B x k = {batch_size} x {top_k} counts an expert once per token that "
                          "picked it; the distinct experts are E (1 - (1 - k/E)^B).",
                          "tokens share experts: count each expert once, E (1 - (1 - k/E)^B)."),
    "untouched_experts": ("that is the expected number of experts *no* token picked, E (1 - k/E)^B; the experts read "
                          "are the rest.",
                          "that is the experts no token picked; subtract it from E."),
    "share_not_count": ("that counts one expert's chance of being read, 1 - (1 - k/E)^B, as the experts read; "
                        "multiply by the {num_experts} experts.",
                        "that is one expert's chance of being read: multiply by E."),
}


def _q_crossover_context(i):
    """Context at which batch_size sequences read as many KV bytes as weights: W / (bytes_per_token B)."""
    w, b = i["weight_bytes"], i["batch_size"]
    expected = formulas.crossover_tokens(w, kv_token(**i)) / b
    slips = [(key, w / wrong / b) for key, wrong in token_slips(i) if wrong]
    slips += [("crossover_not_divided", expected * b), ("gb_for_gib@up", expected * GiB / GB),
              ("gb_for_gib@down", expected * GB / GiB)]
    return expected, slips


def _q_crossover_context_tokens(i):
    """First whole context at which batch_size sequences read as many KV bytes as weights: ceil(W / (bpt B))."""
    w, b = i["weight_bytes"], i["batch_size"]
    bpt = kv_token(**i)
    expected = -(-w // (bpt * b))
    exact = w / (bpt * b)
    slips = [(key, math.ceil(w / (wrong * b))) for key, wrong in token_slips(i) if wrong]
    # two ways, told apart: a case where one of them gives the right context rules out only the other
    slips += [("crossover_rounded_down@floor", math.floor(exact)), ("crossover_rounded_down@round", round(exact)),
              ("crossover_not_divided", w / bpt), ("batch_multiplied", w / bpt * b)]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_decode_step_ms(i):
    """Bandwidth-bound decode step [ms]: (W + bytes_per_token T B) / BW x 1000."""
    w, t, b, bw = i["weight_bytes"], i["seq_len"], i["batch_size"], i["bandwidth_bytes_per_s"]
    bpt = kv_token(**i)
    expected = formulas.decode_step_seconds(w, bpt, t, b, bw) * 1e3
    slips = [(key, formulas.decode_step_seconds(w, wrong, t, b, bw) * 1e3) for key, wrong in token_slips(i) if wrong]
    slips += [("kv_only_step", bpt * t * b / bw * 1e3), ("weights_only_step", w / bw * 1e3),
              ("missing_batch", formulas.decode_step_seconds(w, bpt, t, 1, bw) * 1e3),
              ("missing_seq_len", formulas.decode_step_seconds(w, bpt, 1, b, bw) * 1e3),
              ("seconds_for_ms", expected / 1e3)]
    return expected, slips


def _q_decode_tokens_per_s(i):
    """Decode throughput at a share e of peak bandwidth: B e / ((W + bpt T B) / BW) [tokens/s]."""
    w, t, b, bw, e = i["weight_bytes"], i["seq_len"], i["batch_size"], i["bandwidth_bytes_per_s"], i["efficiency"]
    bpt = kv_token(**i)
    step = formulas.decode_step_seconds(w, bpt, t, b, bw)
    expected = b * e / step
    slips = [(key, b * e / formulas.decode_step_seconds(w, wrong, t, b, bw)) for key, wrong in token_slips(i) if wrong]
    slips += [("ignored_efficiency", b / step), ("efficiency_inverted", b / (step * e)),
              ("per_sequence_rate", e / step), ("kv_only_step", b * e / (bpt * t * b / bw)),
              ("weights_only_step", b * e / (w / bw)),
              ("missing_seq_len", b * e / formulas.decode_step_seconds(w, bpt, 1, b, bw))]
    return expected, slips


def _q_fp8_speedups(i):
    """(speedup at the short context, at the long one) of an fp8 cache over bf16: step(2 B) / step(1 B),
    step = W + bytes_per_token x T x B (the weights stay bf16, read in full every step)."""
    w, b = i["weight_bytes"], i["batch_size"]

    def speedup(context, weights=w, batch=b):
        step = [weights + formulas.kv_bytes_per_token(i["layers"], i["kv_heads"], i["head_dim"], d) * context * batch
                for d in (2, 1)]
        return step[0] / step[1]

    contexts = (i["short_context"], i["long_context"])
    expected = tuple(speedup(t) for t in contexts)
    slips = [("kv_only_step", tuple(speedup(t, weights=0) for t in contexts)),
             ("speedup_inverted", tuple(1 / x for x in expected)),
             ("contexts_swapped", expected[::-1]),
             ("missing_batch", tuple(speedup(t, batch=1) for t in contexts))]
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


def _q_optimisation_choice(i):
    """'quantise_weights' while int4 weights take at least as much off the step as an fp8 cache, 3/4 W >= 1/2 the
    cache read (3 W >= 2 bpt T B: ch06 §7's 1.5x rule), else 'shrink_kv_cache': each slip recomputes the choice
    the slipped way."""
    w, t, b = i["weight_bytes"], i["seq_len"], i["batch_size"]
    options = ("quantise_weights", "shrink_kv_cache")

    def choose(kv_read, weights=w, tie=True, weight_share=3, cache_share=2):
        mine, theirs = weight_share * weights, cache_share * kv_read
        return options[0] if mine > theirs or (tie and mine == theirs) else options[1]

    bpt = kv_token(**i)
    expected = choose(bpt * t * b)
    # the question's own first; a forgotten context (or layer count) shrinks the cache so far that it answers
    # 'quantise_weights' on every case, which "whatever the workload" describes better, so the choices go before it
    slips = [("missing_batch", choose(bpt * t))] + [(f"always_{option}", option) for option in options]
    slips.append(("missing_seq_len", choose(bpt * b)))
    slips.append(("tie_other_way", choose(bpt * t * b, tie=False)))      # > for >=: only a tie differs
    slips.append(("larger_read_rule", choose(bpt * t * b, weight_share=1, cache_share=1)))   # the regime decides
    slips += [(key, choose(wrong * t * b)) for key, wrong in token_slips(i) if wrong]
    slips.append(("other_fix_chosen", options[1] if expected == options[0] else options[0]))
    return expected, slips


def _q_moe_expert_bytes(i):
    """Routed-expert bytes one decode step reads: L_e x E (1 - (1 - k/E)^B) x P_e x b [B], the experts a batch of B
    tokens touches under uniform top-k routing (kvlib.roofline.expected_experts_touched); each slip counts the
    experts the slipped way."""
    e, k, b = i["num_experts"], i["top_k"], i["batch_size"]
    per_expert = i["moe_layers"] * i["expert_params"] * i["dtype_bytes"]
    missed = (1 - k / e) ** b
    expected = e * (1 - missed) * per_expert
    slips = [("active_experts_only", k * per_expert), ("total_experts", e * per_expert),
             ("no_expert_overlap", min(e, k * b) * per_expert), ("untouched_experts", e * missed * per_expert),
             ("share_not_count", (1 - missed) * per_expert)]
    return expected, [(key, v) for key, v in slips if not close(v, expected, 1e-9)]


QUANTITIES = {
    "crossover_context": _q_crossover_context,
    "crossover_context_tokens": _q_crossover_context_tokens,
    "decode_step_ms": _q_decode_step_ms,
    "decode_tokens_per_s": _q_decode_tokens_per_s,
    "fp8_speedups": _q_fp8_speedups,
    "optimisation_choice": _q_optimisation_choice,
    "moe_expert_bytes": _q_moe_expert_bytes,
}
UNROUNDED = {
    "crossover_context_tokens": ("ceil", lambda i: exact_ratio(i["weight_bytes"], kv_token(**i) * i["batch_size"])),
}
#: A choice made by a comparison: what the text says at a tie (``tie_other_way``'s words).
TIE_RULES = {
    "optimisation_choice": "int4 weights win when they take off at least as much as an fp8 cache (3 W >= 2 x "
                           "batch x context x bytes per token), so at exactly 1.5 x the answer is 'quantise_weights'",
}
COUNT_SLIPS = {"crossover_rounded_down"}
