"""A capacity plan step by step: per-GPU memory, the ITL limit, replicas, headroom, chunked prefill's TTFT and the
requests in flight (Little's law): ch07_capacity_plan's slips.

Also the drill ``plan_step`` (nodes for memory alone).
"""

from __future__ import annotations

import math

from kvlib import formulas
from kvlib.units import GB, GiB

from .engine import close, exact_ratio, unit_slips
from .gqa_tp import per_gpu_token, q_kv_bytes_per_token_per_gpu
from .kv_formula import kv_token, token_slips

SLIP_WORDS = {
    "weights_not_subtracted": ("the weights are missing: every step reads them (W / tp per GPU) before any cache, so "
                               "take their read time out of the target first.",
                               "the weights' read time is not taken out of the target."),
    "no_utilization": ("the engine's utilization cap ({utilization}) is missing: the budget is the reported memory "
                       "times it.",
                       "the engine's utilization cap is missing."),
    "missing_overhead": ("the overhead for activations and other allocations is not subtracted.",
                         "the overhead is not subtracted."),
    "budget_rounded_down": ("the budget gpu_memory_bytes x utilization is rounded up to a whole byte (ceil, as vLLM "
                            "does), not down: here the byte it loses costs a whole sequence.",
                            "the budget M x u is rounded up to a whole byte, not down."),
    "efficiency_multiplied": ("divide by the efficiency ({efficiency}): kernels that reach only part of the peak "
                              "bandwidth make a step longer, not shorter.",
                              "divide by the efficiency, do not multiply."),
    "no_efficiency": ("the efficiency ({efficiency}) is missing: real kernels reach only part of the peak bandwidth.",
                      "the efficiency is missing."),
    "no_tp_overhead": ("the all-reduce overhead ({tp_overhead} of the step) is missing: with tp > 1 every step pays "
                       "it.",
                       "the all-reduce overhead is missing."),
    "tp_overhead_at_tp1": ("with tp = 1 no all-reduce runs: there is no overhead to add.",
                           "with tp = 1 there is no all-reduce overhead."),
    "bound_only": ("that is the bandwidth bound alone: multiply it by (1 + all-reduce overhead) / efficiency.",
                   "that is the bandwidth bound alone, without overhead and efficiency."),
    "target_ms_as_seconds": ("the ITL target is in milliseconds ({itl_target_ms} ms = {itl_target_ms} / 1000 s): you "
                             "used it as seconds.",
                             "the ITL target is in milliseconds, used as seconds."),
    "non_binding_constraint": ("a replica may hold the smaller of the two limits (memory: {sequences_by_memory}, ITL: "
                               "{sequences_by_itl} sequences); you used the larger.",
                               "use the smaller of the memory and ITL limits."),
    "missing_replicas": ("a node of {gpus_per_node} GPUs runs {replicas} replicas of tp = {tp}: multiply the "
                         "sequences per replica by them.",
                         "a node may run several replicas: multiply by them."),
    "gpu_as_replica": ("a replica is tp = {tp} GPUs, so a node of {gpus_per_node} GPUs runs {replicas}: you counted "
                       "each GPU as a replica.",
                       "a replica spans tp GPUs: a node runs gpus_per_node // tp of them, not one per GPU."),
    "spike_before_rounding": ("round the users up to whole nodes first, then scale those nodes by the spike "
                              "({spike_factor}) and round up again: ceil(ceil(users / per_node) x spike), not "
                              "ceil(users x spike / per_node).",
                              "round the users up to whole nodes before applying the spike."),
    "floor_nodes": ("nodes must be rounded up: a fraction of a node's load still needs a whole node.",
                    "round the nodes up, not down."),
    "no_headroom": ("that is the node count before headroom: scale by the spike ({spike_factor}), round up, then add "
                    "the spare nodes ({redundancy_nodes}).",
                    "the headroom (spike and spare nodes) is missing."),
    "spike_not_rounded_up": ("round the spike up to whole nodes (a part of a node is a whole node) before adding the "
                             "spares.",
                             "round the spike up to whole nodes."),
    "spike_float_noise": ("the spiked node count is a whole number here, but floating point stores the product a hair "
                          "above it, so math.ceil adds a node: round the product (say to 9 decimals) before rounding "
                          "up.",
                          "a whole spiked node count gained a node from floating-point noise: round the product "
                          "before the ceiling."),
    "ceil_as_floor_plus_one": ("users that fill a whole number of nodes need exactly that many: users // per_node + 1 "
                               "adds a node; take the ceiling, -(-users // per_node).",
                               "users that fill whole nodes need exactly that many: take the ceiling, not floor + 1."),
    "spares_scaled": ("add the spare nodes after scaling for the spike: ceil(nodes x spike) + spares, not (nodes + "
                      "spares) x spike.",
                      "add the spare nodes after scaling for the spike."),
    "gpus_not_nodes": ("that counts GPUs; the question asks for nodes of {gpus_per_node} GPUs.",
                       "that counts GPUs, not nodes."),
    "ttft_without_queue": ("the time in the queue is missing: a request waits {queue_ms:g} ms before its first chunk "
                           "is scheduled, and TTFT counts from its arrival.",
                           "the time in the queue is missing: TTFT counts from the request's arrival."),
    "decodes_not_subtracted": ("the running decodes take their tokens of each step's budget first (one each, "
                               "{decode_tokens} here): a chunk gets token_budget - decode_tokens prompt tokens.",
                               "the running decodes take their share of the budget first: chunks of budget - decodes."),
    "chunks_rounded_down": ("the last, partial chunk still takes a step: round the number of chunks up (ceil).",
                            "round the number of chunks up: a partial chunk takes a whole step."),
    "littles_law_inverted": ("Little's law multiplies: requests in flight = rate x time in system ({rate_per_s:g} "
                             "per second x {seconds_in_system:g} s); one divided by the other is not a count of "
                             "requests.",
                             "Little's law multiplies the rate by the time in system; it does not divide them."),
    "time_in_system_in_ms": ("the times are in milliseconds and the rate is per second: a request stays "
                             "{seconds_in_system:g} s (the TTFT plus {output_tokens:,} x {itl_ms:g} ms, over 1,000), "
                             "not {milliseconds_in_system:,g} s.",
                             "the times are in milliseconds and the rate per second: convert the time to seconds."),
    "mean_rounded": ("Little's law gives the mean number in flight, a fraction included ({mean_in_flight:g} here): "
                     "return it as it is, not rounded to whole requests.",
                     "Little's law gives a mean: do not round it to whole requests."),
    "one_prefill_step": ("the prompt does not go in one step: under the budget it takes ceil(prompt / (budget - "
                         "decodes)) steps, each {step_ms:g} ms.",
                         "the prompt takes ceil(prompt / (budget - decodes)) steps, not one."),
}


def _q_kv_bytes_per_sequence_per_gpu(i):
    """One sequence's KV bytes on one GPU under TP: bytes per token per GPU x seq_len."""
    per_token, slips = q_kv_bytes_per_token_per_gpu(i)
    t = i["seq_len"]
    scaled = [(k, v * t) for k, v in slips if not k.startswith("answer_in")]
    expected = per_token * t
    scaled.append(("missing_seq_len", per_token))
    return expected, scaled + unit_slips(expected)


def _q_sequences_per_gpu_by_memory(i):
    """floor((ceil(M u) - ceil(W / tp) - O) / S_g): sequences one GPU's pool holds (M as CUDA reports it)."""
    m, u, w, o, tp, s = (i["gpu_bytes"], i["utilization"], i["weight_bytes"], i["other_bytes"], i["tp"],
                         i["kv_bytes_per_sequence_per_gpu"])

    def fit(memory=m, util=u, weights=formulas.weight_bytes_per_gpu(w, tp), other=o, per_seq=s):
        return math.floor(formulas.kv_pool_bytes(memory, util, weights, other, round_budget_up=True) / per_seq)

    expected = fit()
    pool = formulas.kv_pool_bytes(m, u, formulas.weight_bytes_per_gpu(w, tp), o, round_budget_up=True)
    slips = [("weights_not_split", fit(weights=w)), ("no_utilization", fit(util=1)),
             ("missing_overhead", fit(other=0)), ("ceil_not_floor", math.ceil(pool / s)),
             ("ceil_not_floor@round", round(pool / s)),
             ("budget_rounded_down", math.floor(formulas.kv_pool_bytes(m, u, formulas.weight_bytes_per_gpu(w, tp), o)
                                                / s)),
             ("gb_for_gib@down", fit(memory=m * GB / GiB)),
             ("gb_for_gib@up", fit(memory=m * GiB / GB))]
    if i.get("label_bytes"):
        slips.append(("label_memory", fit(memory=i["label_bytes"])))
    slips.append(("total_not_per_gpu", fit(per_seq=s * _split(i))))    # the right count (dropped) at tp 1
    return expected, [(k, v) for k, v in slips if v != expected]


def _split(i):
    """How many times one GPU's KV heads go into the model's: tp, or K once tp exceeds K (replicated heads)."""
    k = i.get("kv_heads", i["tp"])
    return k / formulas.kv_heads_per_gpu(k, i["tp"])


def _slowdown(tp, tp_overhead, efficiency):
    return (1 + (tp_overhead if tp > 1 else 0)) / efficiency


def _itl_variants(i, measure):
    """(expected, slips) of ``measure(w_gpu, s_gpu, slowdown)`` with each ITL slip applied."""
    w, tp, o, e, s = i["weight_bytes"], i["tp"], i["tp_overhead"], i["efficiency"], i["kv_bytes_per_sequence_per_gpu"]
    w_gpu, slow = formulas.weight_bytes_per_gpu(w, tp), _slowdown(tp, o, e)
    expected = measure(w_gpu, s, slow)
    slips = [("weights_not_split", measure(w, s, slow)), ("bound_only", measure(w_gpu, s, 1)),
             ("no_efficiency", measure(w_gpu, s, slow * e)),
             ("efficiency_multiplied", measure(w_gpu, s, slow * e * e))]
    if tp > 1:
        slips += [("total_not_per_gpu", measure(w_gpu, s * _split(i), slow)),
                  ("no_tp_overhead", measure(w_gpu, s, 1 / e))]
    else:
        slips.append(("tp_overhead_at_tp1", measure(w_gpu, s, (1 + o) / e)))
    return expected, slips


def _q_itl_ms(i):
    """ITL [ms] of a replica holding ``sequences``: (W/tp + n S_g) / BW x (1 + o [tp > 1]) / e x 1000."""
    n, bw = i["sequences"], i["bandwidth_bytes_per_s"]

    def ms(w_gpu, s_gpu, slow):
        return (w_gpu + n * s_gpu) / bw * slow * 1e3

    expected, slips = _itl_variants(i, ms)
    w_gpu = formulas.weight_bytes_per_gpu(i["weight_bytes"], i["tp"])
    slow = _slowdown(i["tp"], i["tp_overhead"], i["efficiency"])
    slips += [("kv_only_step", n * i["kv_bytes_per_sequence_per_gpu"] / bw * slow * 1e3),
              ("weights_only_step", w_gpu / bw * slow * 1e3), ("seconds_for_ms", expected / 1e3)]
    return expected, slips


def _q_sequences_by_itl(i):
    """Most sequences per replica under the ITL target: floor((tau BW / s - W/tp) / S_g)."""
    tau, bw = i["itl_target_ms"] / 1e3, i["bandwidth_bytes_per_s"]

    def fit(w_gpu, s_gpu, slow):
        return math.floor((tau / slow * bw - w_gpu) / s_gpu)

    expected, slips = _itl_variants(i, fit)
    exact = (tau / _slowdown(i["tp"], i["tp_overhead"], i["efficiency"]) * bw
             - formulas.weight_bytes_per_gpu(i["weight_bytes"], i["tp"])) / i["kv_bytes_per_sequence_per_gpu"]
    # the other rounding made in code that keeps 0 when nothing meets the target, as the exercise asks
    slips += [("ceil_not_floor", max(0, math.ceil(exact))), ("ceil_not_floor@round", max(0, round(exact)))]
    w_gpu, s_gpu = formulas.weight_bytes_per_gpu(i["weight_bytes"], i["tp"]), i["kv_bytes_per_sequence_per_gpu"]
    slow = _slowdown(i["tp"], i["tp_overhead"], i["efficiency"])
    slips += [("target_ms_as_seconds", math.floor((tau * 1e3 / slow * bw - w_gpu) / s_gpu)),
              ("weights_not_subtracted", math.floor(tau / slow * bw / s_gpu))]
    if expected < 0:        # nothing meets the target: 0 sequences (ch07 Exercise 4), not the negative formula
        slips.append(("negative_count", expected))
        expected = 0
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_nodes_with_headroom(i):
    """ceil(ceil(users / ((g // tp) x min(mem, itl))) x f) + r: the nodes to deploy."""
    users, g, tp = i["users"], i["gpus_per_node"], i["tp"]
    mem, lat, f, r = i["sequences_by_memory"], i["sequences_by_itl"], i["spike_factor"], i["redundancy_nodes"]
    replicas = g // tp

    def spike(nodes):
        return math.ceil(round(nodes * f, 9))

    def deploy(per_replica=min(mem, lat), reps=replicas):
        return spike(-(-users // (reps * per_replica))) + r

    nodes = -(-users // (replicas * min(mem, lat)))
    expected = deploy()
    slips = [("non_binding_constraint", deploy(per_replica=max(mem, lat))), ("no_headroom", nodes),
             ("floor_nodes", spike(users // (replicas * min(mem, lat))) + r),
             ("spike_not_rounded_up", round(nodes * f) + r),
             ("spike_not_rounded_up", math.floor(nodes * f) + r),
             ("spike_float_noise", math.ceil(nodes * f) + r),
             ("ceil_as_floor_plus_one", spike(users // (replicas * min(mem, lat)) + 1) + r),
             ("spares_scaled", spike(nodes + r)), ("gpus_not_nodes", expected * g),
             ("missing_replicas", deploy(reps=1)),      # the right count (dropped) when a node is one replica
             ("gpu_as_replica", deploy(reps=g)),        # the right count (dropped) at tp = 1
             ("spike_before_rounding", math.ceil(round(users * f / (replicas * min(mem, lat)), 9)) + r),
             ("spike_before_rounding@raw", math.ceil(users * f / (replicas * min(mem, lat))) + r)]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_nodes_for_memory(i):
    """Nodes of one TP = gpus_per_node replica each: ceil(users / floor(pool_per_gpu / kv_per_seq_per_gpu))."""
    tp, k = i["tp"], i["kv_heads"]
    per_gpu = dict(i, kv_heads=formulas.kv_heads_per_gpu(k, tp))
    if i.get("num_heads"):
        per_gpu["num_heads"] = max(1, i["num_heads"] // tp)
    pool, users, t = i["pool_bytes_per_gpu"], i["users"], i["seq_len"]

    def nodes(bytes_per_token_per_gpu, pool_bytes=pool):
        per_node = math.floor(pool_bytes / (bytes_per_token_per_gpu * t))
        return math.ceil(users / per_node) if per_node > 0 else None

    per_seq_gpu = kv_token(**per_gpu) * t
    expected = nodes(kv_token(**per_gpu))
    slips = [("total_not_per_gpu", nodes(kv_token(**i)))]
    slips += [(key, nodes(wrong)) for key, wrong in token_slips(per_gpu) if wrong and not key.startswith("query_heads")]
    slips += [("floor_nodes", users // math.floor(pool / per_seq_gpu)),
              ("ceil_not_floor", math.ceil(users * per_seq_gpu / pool)),
              ("gb_for_gib@up", nodes(kv_token(**per_gpu), pool * GiB / GB)),
              ("gb_for_gib@down", nodes(kv_token(**per_gpu), pool * GB / GiB))]
    return expected, [(k2, v) for k2, v in slips if v is not None and v != expected]


def _q_chunked_ttft_ms(i):
    """TTFT under chunked prefill [ms]: the queue, then ceil(T_p / (C - n_d)) steps of step_ms
    (kvlib.serving.prefill_steps); each slip recomputed the slipped way."""
    t, c, n, step, queue = i["prompt_tokens"], i["token_budget"], i["decode_tokens"], i["step_ms"], i["queue_ms"]
    steps = -(-t // (c - n))
    expected = queue + steps * step
    slips = [("ttft_without_queue", steps * step), ("decodes_not_subtracted", queue + -(-t // c) * step),
             ("chunks_rounded_down", queue + t // (c - n) * step), ("one_prefill_step", queue + step)]
    return expected, [(key, v) for key, v in slips if v != expected]


def _q_requests_in_flight(i):
    """Requests in flight on average, Little's law: rate x (TTFT + T_o x ITL), the times in seconds
    (kvlib.serving.littles_law_concurrency); each slip recomputed the slipped way."""
    from kvlib.serving import littles_law_concurrency
    rate, ttft_ms, t_o, itl_ms = i["rate_per_s"], i["ttft_ms"], i["output_tokens"], i["itl_ms"]
    seconds = (ttft_ms + t_o * itl_ms) / 1e3
    expected = littles_law_concurrency(rate, seconds)
    ms = ttft_ms + t_o * itl_ms
    slips = [("littles_law_inverted", rate / seconds), ("littles_law_inverted@time_over_rate", seconds / rate),
             ("time_in_system_in_ms", rate * ms),
             ("decode_time_left_out", rate * ttft_ms / 1e3), ("ttft_left_out", rate * t_o * itl_ms / 1e3),
             ("itl_ms_as_seconds", rate * (ttft_ms / 1e3 + t_o * itl_ms)),
             ("one_token_not_output", rate * (ttft_ms + itl_ms) / 1e3),
             ("littles_law_inverted+time_in_system_in_ms", rate / ms),
             ("littles_law_inverted@time_over_rate+time_in_system_in_ms", ms / rate),
             ("mean_rounded", float(round(expected))), ("mean_rounded@down", float(math.floor(expected))),
             ("mean_rounded@up", float(math.ceil(expected)))]
    return expected, [(key, v) for key, v in slips if not close(v, expected, 1e-9)]


QUANTITIES = {
    "chunked_ttft_ms": _q_chunked_ttft_ms,
    "requests_in_flight": _q_requests_in_flight,
    "kv_bytes_per_sequence_per_gpu": _q_kv_bytes_per_sequence_per_gpu,
    "sequences_per_gpu_by_memory": _q_sequences_per_gpu_by_memory,
    "itl_ms": _q_itl_ms,
    "sequences_by_itl": _q_sequences_by_itl,
    "nodes_with_headroom": _q_nodes_with_headroom,
    "nodes_for_memory": _q_nodes_for_memory,
}
UNROUNDED = {
    "sequences_per_gpu_by_memory": ("floor", lambda i: exact_ratio(formulas.kv_pool_bytes(
        i["gpu_bytes"], i["utilization"], formulas.weight_bytes_per_gpu(i["weight_bytes"], i["tp"]),
        i["other_bytes"], round_budget_up=True), i["kv_bytes_per_sequence_per_gpu"])),
    "nodes_for_memory": ("ceil", lambda i: exact_ratio(i["users"], math.floor(i["pool_bytes_per_gpu"]
                                                                              / (per_gpu_token(i) * i["seq_len"])))),
}
COUNT_SLIPS = {"floor_nodes", "spike_not_rounded_up", "spike_float_noise", "ceil_as_floor_plus_one",
               "budget_rounded_down"}


def figures(key, inputs) -> dict:
    """``{replicas}``: the replicas of tp GPUs a node of gpus_per_node runs; a request's time in system
    (``{seconds_in_system}``, ``{milliseconds_in_system}``, ``{ttft_s}``) where its TTFT is given in ms, and the
    mean in flight at a rate (``{mean_in_flight}``)."""
    out = {}
    if inputs.get("gpus_per_node") and inputs.get("tp"):
        out["replicas"] = inputs["gpus_per_node"] // inputs["tp"]
    if all(name in inputs for name in ("ttft_ms", "output_tokens", "itl_ms")):
        ms = inputs["ttft_ms"] + inputs["output_tokens"] * inputs["itl_ms"]
        out.update(seconds_in_system=ms / 1e3, milliseconds_in_system=ms, ttft_s=inputs["ttft_ms"] / 1e3)
        if "rate_per_s" in inputs:
            out["mean_in_flight"] = inputs["rate_per_s"] * ms / 1e3
    return out
