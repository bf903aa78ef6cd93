"""Serving beyond the cache's size (kvlib.serving): the slips of ch09's serving families and their drills.

Time to first token, the ridge batch, decode rates, chunked prefill, batching, a cached prefix,
speculative decoding, weight-only quantization, the all-reduce, cost per million tokens.
"""

from __future__ import annotations

import math

from kvlib import formulas

from .engine import close, unit_slips
from .kv_formula import kv_token, token_slips

SLIP_WORDS = {
    "prefill_missing_factor_2": ("a multiply-add is 2 FLOPs: a prefill does 2 x P x prompt tokens FLOPs in its linear "
                                 "layers, not P x tokens.",
                                 "a multiply-add is 2 FLOPs: 2 x P x tokens."),
    "ignored_mfu": ("the MFU ({mfu:g}) is not applied: a prefill reaches only that share of the peak FLOP/s, so it "
                    "takes longer than FLOPs / peak.",
                    "the MFU is not applied."),
    "mfu_multiplied": ("the MFU works the wrong way round: reaching only {mfu:g} of the peak makes the prefill longer "
                       "(divide by the MFU, do not multiply).",
                       "divide by the MFU, do not multiply."),
    "moe_total_params": ("a mixture of experts runs only its active parameters on each token ({num_params:,} "
                         "multiplied), not all {total_params:,}.",
                         "a mixture of experts computes with its active parameters only."),
    "embedding_counted": ("the input embedding is a table lookup, not a matmul: a prompt token is multiplied by "
                          "{num_params:,} parameters, not all {active_params:,}; the embedding's V x d do no FLOPs.",
                          "the embedding lookup does no matmul: leave its V x d parameters out of P."),
    "ridge_no_factor_2": ("each weight read ({dtype_bytes:g} B of it) does 2 FLOPs per sequence: the "
                          "intensity is 2 B / b, so the batch is ridge x b / 2.",
                          "the intensity is 2 B / b FLOP per byte: the batch is ridge x b / 2."),
    "ridge_as_batch": ("the ridge point is FLOPs per byte, not a batch: with {dtype_bytes:g}-byte weights a sequence "
                       "adds 2 / b FLOP per weight byte, so the batch is ridge x b / 2.",
                       "the ridge point is FLOP per byte, not a batch."),
    "moe_coverage_forgotten": ("a mixture of experts reads only the experts its batch touches, and each token works "
                               "with its own {top_k} of {num_experts}: the experts' intensity is 2 k B / (E_B b), "
                               "so they reach the ridge near E / k times the dense batch, once the batch covers "
                               "them.",
                               "a mixture of experts' experts reach the ridge only once the batch covers them."),
    "moe_total_weights": ("at batch 1 a mixture of experts reads only its active experts: a target step costs "
                          "W_one, not the total weights, and the verify of gamma + 1 tokens touches more experts "
                          "(W_verify).",
                          "a MoE target step reads its active experts, and the verify reads more."),
    "moe_verify_as_one_step": ("the verify of {draft_tokens} + 1 tokens touches more experts than one token: it "
                               "costs W_verify / W_one target steps, not one.",
                               "a MoE verify reads more experts than one token's step."),
    "batch_rounded_down": ("the first batch that reaches the ridge is the ceiling: one sequence fewer stays below it.",
                           "round the batch up: the first batch that reaches the ridge."),
    "per_replica_not_per_gpu": ("that is the whole replica's rate; it runs on {tp} GPUs, so per GPU divide by {tp}.",
                                "that is the replica's rate: divide by its GPUs."),
    "batch_rate_for_user": ("that is the batch's rate; one user gets one token per step: 1 / step time.",
                            "that is the batch's rate, not one user's."),
    "chunk_ignored": ("the prefill chunk ({chunk_tokens:,} tokens) is left out: its FLOPs share the step with the "
                      "decodes, and every decode waits for the step.",
                      "the prefill chunk is left out of the step."),
    "decodes_not_in_flops": ("the {batch_size} decode tokens are left out of the step's FLOPs: a step computes every "
                             "token it carries, chunk and decodes.",
                             "the decode tokens are left out of the step's FLOPs."),
    "sum_not_max": ("reads and compute overlap in one step: the step takes the longer of the two (the roofline), not "
                    "their sum.",
                    "the step takes the longer of reads and compute, not their sum."),
    "batching_inverted": ("the ratio is upside down: continuous batching delivers more tokens per step than a static "
                          "batch (a number above 1).",
                          "the ratio is upside down."),
    "static_rate_not_speedup": ("that is the static batch's tokens per step; divide the slots kept full by continuous "
                                "batching by it for the speed-up.",
                                "that is the static batch's tokens per step, not the speed-up."),
    "mean_for_max": ("a static batch runs as long as its longest output, not its average one.",
                     "a static batch runs as long as its longest output."),
    "hit_not_miss": ("that is the time of the cached tokens, which the cache skips; the prefill computes the rest of "
                     "the prompt.",
                     "that is the cached part's time, not the rest's."),
    "draft_kv_missing": ("the draft model keeps its own KV cache for every sequence ({batch_size} x {seq_len:,} "
                         "tokens): add it to its weights.",
                         "the draft's own KV cache is missing."),
    "draft_weights_missing": ("the draft model's weights are missing: they sit on the GPU beside its cache.",
                              "the draft's weights are missing."),
    "draft_cost_ignored": ("that is the tokens per verification; each step also runs {draft_tokens} draft steps, so "
                           "divide by gamma x c + 1.",
                           "the draft steps' cost is missing."),
    "no_bonus_token": ("the target's own token comes with every verification: expected tokens are (1 - alpha^(gamma + "
                       "1)) / (1 - alpha), counting it.",
                       "the target's own token per verification is missing."),
    "acceptance_exponent_gamma": ("the exponent is gamma + 1, not gamma: a verification yields up to gamma + 1 tokens "
                                  "(the {draft_tokens} drafts and the target's own), so the expected "
                                  "count is (1 - alpha^(gamma + 1)) / (1 - alpha); alpha^gamma counts one token fewer.",
                                  "the exponent is gamma + 1, not gamma: (1 - alpha^(gamma + 1)) / (1 - alpha)."),
    "acceptance_linear": ("acceptance stops at the first rejected token: the expected count is the geometric sum (1 - "
                          "alpha^(gamma + 1)) / (1 - alpha), not 1 + gamma x alpha.",
                          "the expected count is a geometric sum."),
    "kv_left_out": ("at batch 1 the step also reads the sequence's cache, which quantizing the weights does not "
                    "shrink: (W + KV) / (W_q + KV), not W / W_q.",
                    "the cache read is left out of the ratio."),
    "quant_ratio_inverted": ("the ratio is upside down: the quantized step is the faster one (a number above 1).",
                             "the ratio is upside down."),
    "ring_factor_missing": ("a ring all-reduce sends 2 (t - 1) / t of the message from each GPU (reduce-scatter, then "
                            "all-gather), not the message once.",
                            "a ring all-reduce sends 2 (t - 1) / t of the message."),
    "one_allreduce_per_layer": ("each layer all-reduces twice under tensor parallelism: after attention and after the "
                                "MLP.",
                                "two all-reduces per layer, not one."),
    "all_gpus_not_one": ("that is what all {tp} GPUs send together; the question asks for one GPU.",
                         "that is all GPUs together, not one."),
    "allreduce_layers_missing": ("every one of the {layers} layers all-reduces: multiply by them.",
                                 "multiply by the layers."),
    "hours_not_seconds": ("the price is per hour and the rate per second: an hour has 3,600 seconds.",
                          "an hour has 3,600 seconds."),
    "price_of_one_gpu": ("the replica runs on {gpus} GPUs: pay for all of them.",
                         "pay for every GPU of the replica."),
    "per_token_not_million": ("that is the cost of one token; the question asks for a million.",
                              "that is one token's cost, not a million's."),
    "per_thousand_not_million": ("that is the cost of a thousand tokens; the question asks for a million.",
                                 "that is a thousand tokens' cost, not a million's."),
}


def _serving():
    from kvlib import serving
    return serving


def _params_slips(i, ms):
    """The parameter-count slips of a prefill (``ms(params)``: the figure asked with P replaced): 2 x all the
    active parameters, the input embedding included (``embedding_counted``); a mixture of experts' 2 x all its
    parameters (``moe_total_params``). A tied table is multiplied by as the LM head: no embedding slip there."""
    p, out = i["num_params"], []
    if i.get("active_params") and i["active_params"] != p:
        out.append(("embedding_counted", ms(i["active_params"])))
    if i.get("total_params") and i["total_params"] != i.get("active_params", p):
        out.append(("moe_total_params", ms(i["total_params"])))
    return out


def _q_ttft_ms(i):
    """Compute-bound time to first token [ms]: 2 P T_p / (eta F) x 1000 (serving.prefill_seconds), P the
    parameters multiplied per token (``kvlib.offload.prefill_params_per_token``: the embedding lookup excluded)."""
    sv = _serving()
    p, t, f, mfu = i["num_params"], i["prompt_tokens"], i["peak_flop_per_s"], i["mfu"]

    def ms(params=p, tokens=t, util=mfu):
        return sv.prefill_seconds(params, tokens, f, util) * 1e3

    expected = ms()
    slips = [("prefill_missing_factor_2", expected / 2), ("ignored_mfu", ms(util=1)),
             ("mfu_multiplied", expected * mfu * mfu), ("seconds_for_ms", expected / 1e3)]
    slips += _params_slips(i, lambda params: ms(params=params))
    return expected, slips


def _q_ridge_batch(i):
    """First batch whose decode step reaches the ridge: ceil(F / BW x b / 2) (serving.ridge_batch)."""
    from fractions import Fraction
    sv = _serving()
    f, bw, b = i["peak_flop_per_s"], i["bandwidth_bytes_per_s"], i["dtype_bytes"]
    experts = (i["num_experts"], i["top_k"]) if i.get("num_experts") else ()
    expected = sv.ridge_batch(f, bw, b, *experts)
    exact = Fraction(f) * Fraction(b) / (2 * Fraction(bw))
    slips = [("ridge_no_factor_2", sv.ridge_batch(f, bw, 2 * b, *experts))]
    if experts:
        slips.append(("moe_coverage_forgotten", sv.ridge_batch(f, bw, b)))
    if b != 2:      # with 2-byte weights the ridge is the batch itself: no slip
        slips += [("ridge_as_batch", math.ceil(Fraction(f, bw))), ("ridge_as_batch", math.floor(Fraction(f, bw)))]
    slips += [("batch_rounded_down", math.floor(exact)), ("batch_rounded_down", round(exact))]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_decode_rate(i):
    """Decode tokens/s, one user's (``per`` 'user') or per GPU ('gpu'): 1 / step, or B / (t x step)."""
    sv = _serving()
    w, s, b, bw, tp = (i["weight_bytes"], i["kv_bytes_per_sequence_per_gpu"], i["batch_size"],
                       i["bandwidth_bytes_per_s"], i["tp"])
    per_gpu = i["per"] == "gpu"

    def rate(step):
        return sv.decode_tokens_per_s(step, b, tp) if per_gpu else sv.decode_tokens_per_s(step)

    step = sv.tp_decode_step_seconds(w, s, b, bw, tp)
    expected = rate(step)
    slips = [("weights_not_split", rate(sv.tp_decode_step_seconds(w * tp, s, b, bw, tp))),
             ("kv_only_step", rate(b * s / bw)), ("weights_only_step", rate(sv.tp_decode_step_seconds(w, 0, b, bw, tp)))]
    if i.get("kv_bytes_per_sequence"):
        slips.append(("total_not_per_gpu", rate(sv.tp_decode_step_seconds(w, i["kv_bytes_per_sequence"], b, bw, tp))))
    if per_gpu:
        slips += [("per_replica_not_per_gpu", sv.decode_tokens_per_s(step, b)),
                  ("per_sequence_rate", sv.decode_tokens_per_s(step)),
                  ("missing_batch", sv.decode_tokens_per_s(sv.tp_decode_step_seconds(w, s, 1, bw, tp), b, tp))]
    else:
        slips += [("batch_rate_for_user", sv.decode_tokens_per_s(step, b)),
                  ("batch_rate_for_user", sv.decode_tokens_per_s(step, b, tp)),
                  ("missing_batch", sv.decode_tokens_per_s(sv.tp_decode_step_seconds(w, s, 1, bw, tp)))]
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


def _q_chunked_itl_ms(i):
    """ITL of a step carrying B decodes and a C-token chunk [ms]: max((W + KV) / BW, 2 P (B + C) / (eta F))."""
    sv = _serving()
    w, kv, p, b, c = i["weight_bytes"], i["kv_bytes"], i["num_params"], i["batch_size"], i["chunk_tokens"]
    bw, f, mfu = i["bandwidth_bytes_per_s"], i["peak_flop_per_s"], i["mfu"]

    def ms(tokens=b + c, util=mfu):
        return sv.mixed_step_seconds(w, kv, p, tokens, bw, f, util) * 1e3

    expected = ms()
    slips = [("chunk_ignored", ms(tokens=b)), ("decodes_not_in_flops", ms(tokens=c)),
             ("sum_not_max", ((w + kv) / bw + sv.prefill_seconds(p, b + c, f, mfu)) * 1e3),
             ("ignored_mfu", ms(util=1)), ("mfu_multiplied", ms(util=1 / mfu)),
             ("seconds_for_ms", expected / 1e3)]
    slips += _params_slips(i, lambda params: sv.mixed_step_seconds(w, kv, params, b + c, bw, f, mfu) * 1e3)
    return expected, [(k, v) for k, v in slips if v is not None and not close(v, expected, 1e-9)]


def _q_batching_speedup(i):
    """Continuous over static batching, tokens per step: B max(o) / sum(o) (serving.continuous_batching_speedup)."""
    sv = _serving()
    outputs = tuple(i["output_tokens"])
    expected = sv.continuous_batching_speedup(outputs)
    slips = [("batching_inverted", 1 / expected), ("static_rate_not_speedup", sv.static_batch_tokens_per_step(outputs)),
             ("mean_for_max", 1.0)]
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


def _q_idle_slot_steps(i):
    """Slot-steps a static batch leaves idle: B max(o) - sum(o) (finished sequences wait for the longest)."""
    outputs = tuple(i["output_tokens"])
    expected = len(outputs) * max(outputs) - sum(outputs)
    slips = [("tokens_not_waste", sum(outputs)), ("allocated_not_waste", len(outputs) * max(outputs)),
             ("mean_for_max", 0)]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_cached_ttft_ms(i):
    """TTFT with a prefix cache [ms]: 2 P (T_p - floor(S / bs) bs) / (eta F) x 1000."""
    sv = _serving()
    p, t, s, bs, f, mfu = (i["num_params"], i["prompt_tokens"], i["shared_tokens"], i["block_size"],
                           i["peak_flop_per_s"], i["mfu"])
    hit = sv.prefix_hit_tokens(s, bs)

    def ms(tokens, util=mfu):
        return sv.prefill_seconds(p, tokens, f, util) * 1e3

    expected = ms(t - hit)
    slips = [("partial_block_shared", ms(t - s)), ("no_cache", ms(t)), ("hit_not_miss", ms(hit)),
             ("ignored_mfu", ms(t - hit, util=1)), ("prefill_missing_factor_2", expected / 2),
             ("mfu_multiplied", expected * mfu * mfu), ("seconds_for_ms", expected / 1e3)]
    slips += _params_slips(i, lambda params: sv.prefill_seconds(params, t - hit, f, mfu) * 1e3)
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


def _q_spec_extra_bytes(i):
    """Bytes a draft model adds: W_draft + 2 L K D b (the draft's) x T x B (serving.speculative_extra_bytes)."""
    sv = _serving()
    w, t, b = i["draft_weight_bytes"], i["seq_len"], i["batch_size"]
    bpt = kv_token(**i)
    expected = sv.speculative_extra_bytes(w, bpt, t, b)
    slips = [("draft_kv_missing", w), ("draft_weights_missing", expected - w),
             ("missing_batch", sv.speculative_extra_bytes(w, bpt, t, 1))]
    slips += [(key, sv.speculative_extra_bytes(w, wrong, t, b)) for key, wrong in token_slips(i) if wrong]
    return expected, [(k, v) for k, v in slips if v != expected] + unit_slips(expected)


def _q_spec_speedup(i):
    """Speculative decoding's speed-up: E / (gamma c + 1), c = W_draft / W_target (serving.speculative_speedup)."""
    sv = _serving()
    a, g = i["acceptance"], i["draft_tokens"]
    c = i["draft_weight_bytes"] / i["weight_bytes"]
    v = i.get("verify_weight_bytes", i["weight_bytes"]) / i["weight_bytes"]   # a MoE verify touches more experts
    e = sv.speculative_expected_tokens(a, g)
    expected = sv.speculative_speedup(a, g, c, v)
    slips = [("draft_cost_ignored", e), ("no_bonus_token", (e - 1) / (g * c + v)),
             ("acceptance_linear", (1 + g * a) / (g * c + v)), ("acceptance_linear", 1 + g * a),
             ("acceptance_exponent_gamma", sv.speculative_expected_tokens(a, g - 1) / (g * c + v))]
    if "verify_weight_bytes" in i:
        slips += [("moe_verify_as_one_step", sv.speculative_speedup(a, g, c)),
                  ("moe_total_weights", sv.speculative_speedup(a, g, i["draft_weight_bytes"] / i["total_weight_bytes"]))]
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


def _q_quant_speedup(i):
    """Batch-1 speed-up of weight-only quantization: (W + KV) / (W_q + KV) (serving.weight_only_speedup)."""
    sv = _serving()
    w, wq, kv = i["weight_bytes"], i["quant_weight_bytes"], i["kv_bytes"]
    expected = sv.weight_only_speedup(w, wq, kv)
    slips = [("kv_left_out", sv.weight_only_speedup(w, wq, 0)), ("quant_ratio_inverted", 1 / expected),
             ("kv_left_out", 16 / i["bits_per_weight"])]
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


def _q_allreduce_bytes(i):
    """Bytes each GPU sends per step: L x 2 x 2 (t - 1) / t x tokens x d x b (serving.tp_allreduce_bytes_per_step)."""
    sv = _serving()
    L, n, d, b, tp = i["layers"], i["tokens"], i["hidden_size"], i["dtype_bytes"], i["tp"]
    expected = sv.tp_allreduce_bytes_per_step(L, n, d, b, tp)
    message = n * d * b
    slips = [("ring_factor_missing", L * 2 * message), ("one_allreduce_per_layer", formulas.exact_div(expected, 2)),
             ("all_gpus_not_one", expected * tp), ("allreduce_layers_missing", formulas.exact_div(expected, L)),
             ("bits_not_bytes", expected * 8), ("ignored_dtype_bytes@4", expected * 2)]
    return expected, [(k, v) for k, v in slips if v != expected] + unit_slips(expected)


def _q_cost_per_million(i):
    """Dollars per million tokens: C_h x gpus / (3600 x tokens/s) x 10^6 (serving.cost_per_million_tokens)."""
    sv = _serving()
    price, gpus = i["price_per_gpu_hour"], i["gpus"]
    if "tokens_per_s" in i:
        rate = i["tokens_per_s"]
        rates = []
    else:    # from a stated step: B tokens every step_ms
        rate = i["batch_size"] / (i["step_ms"] / 1e3)
        rates = [("per_sequence_rate", sv.cost_per_million_tokens(price, gpus, 1 / (i["step_ms"] / 1e3)))]
    expected = sv.cost_per_million_tokens(price, gpus, rate)
    slips = [("hours_not_seconds", expected * 3600), ("price_of_one_gpu", sv.cost_per_million_tokens(price, 1, rate)),
             ("per_token_not_million", expected / 1e6), ("per_thousand_not_million", expected / 1e3)] + rates
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


QUANTITIES = {
    "ttft_ms": _q_ttft_ms,
    "ridge_batch": _q_ridge_batch,
    "decode_rate": _q_decode_rate,
    "chunked_itl_ms": _q_chunked_itl_ms,
    "batching_speedup": _q_batching_speedup,
    "idle_slot_steps": _q_idle_slot_steps,
    "cached_ttft_ms": _q_cached_ttft_ms,
    "spec_extra_bytes": _q_spec_extra_bytes,
    "spec_speedup": _q_spec_speedup,
    "quant_speedup": _q_quant_speedup,
    "allreduce_bytes": _q_allreduce_bytes,
    "cost_per_million": _q_cost_per_million,
}
