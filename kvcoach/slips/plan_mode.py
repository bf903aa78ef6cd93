"""A whiteboard plan from a request rate (``kvcoach.plan_mode``, ``kvlib drill --plan``): the slips of its steps.

Each step of the plan is one quantity here, its right value kvlib's (``kvlib.planner.plan_requests``)
and its slips recomputed with the slip applied. The figures a slip needs that only the planner's loop
can give (the sequences the ITL allows without its margin, say) are computed by kvlib when the scenario
is drawn and passed in as inputs; the arithmetic a learner does on the whiteboard is redone here.
"""

from __future__ import annotations

import math

from kvlib import formulas

_TOLERANCE = 0.005        # a byte figure's tolerance in the drills (kvcoach.drills.TOLERANCE)

SLIP_WORDS = {
    "itl_margin_left_out": ("the ITL target is a p95: the steps that also carry a prompt chunk of {token_budget} "
                            "tokens set it, so aim the mean step at the target less that chunk's compute "
                            "({itl_margin_ms:.1f} ms), not at the whole target.",
                            "aim the mean step at the ITL target less one prompt chunk's compute."),
    "allreduce_left_out": ("each decode step also pays the tensor-parallel all-reduces (two per layer at the "
                           "latency you assumed, {allreduce_ms:.2f} ms a step): take them out of the target before "
                           "the reads.",
                           "the all-reduce time per step is left out of the ITL."),
    "ttft_cut_left_out": ("the p95 prompt must reach its first token within the TTFT SLO while the replica's "
                          "decodes share each step: with {sequences_before_ttft} sequences it does not, so the "
                          "sequences per replica are cut until it does.",
                          "the TTFT SLO cuts the sequences per replica too."),
    "prefill_left_out": ("the replicas must also keep up with the prompts ({rate_per_s:g} requests/s of "
                         "{prompt_tokens:,} tokens, less the prefix-cache hits): the nodes that hold the sequences "
                         "({nodes_for_decode}) cannot prefill that fast.",
                         "the nodes must also keep up with the prompt tokens (prefill throughput)."),
    "ttft_left_out_of_w": ("a request stays in the system its time to first token and then every output token's "
                           "ITL: W = TTFT + T_out x ITL, not T_out x ITL alone.",
                           "W in Little's law includes the time to first token."),
    "p95_for_mean": ("Little's law takes the mean time in the system: use the mean output length "
                     "({output_tokens:,} tokens), not the p95.",
                     "Little's law takes the mean output length, not the p95."),
    "binding_misnamed": ("the constraint that sets the node count here is {binding}: compare the limits step by "
                         "step (memory, ITL, TTFT, then the prompts' prefill rate) and name the one that bites.",
                         "name the constraint that sets the node count."),
}


def _q_pool_bytes_per_gpu(i):
    """ceil(M u) - W / tp - O: the bytes one GPU's engine keeps for the KV cache (M as CUDA reports it)."""
    m, u, w, o, tp = i["gpu_bytes"], i["utilization"], i["weight_bytes"], i["other_bytes"], i["tp"]

    def pool(memory=m, util=u, weights=formulas.weight_bytes_per_gpu(w, tp), other=o):
        return formulas.kv_pool_bytes(memory, util, weights, other, round_budget_up=True)

    expected = pool()
    slips = [("weights_not_split", pool(weights=w)), ("no_utilization", pool(util=1)),
             ("missing_overhead", pool(other=0)), ("label_memory", pool(memory=i["label_bytes"]))]
    # a slip a right answer's tolerance would swallow is no slip (a B200's label is within 0.5% of what CUDA reports)
    return expected, [(k, v) for k, v in slips if abs(v - expected) > _TOLERANCE * abs(expected)]


def _q_sequences_per_replica(i):
    """min(memory, ITL less margin and all-reduce, token budget - 1, the TTFT cut): kvlib's planner's limits."""
    expected = i["sequences_per_replica"]
    mem, itl = i["sequences_by_memory"], i["sequences_by_itl"]
    cap = min(i["max_num_seqs"], i["token_budget"] - 1)
    # the limit applied last leads where two slips give one number: the TTFT cut, the ITL's margin and all-reduce,
    # then the larger of memory and ITL
    slips = [("ttft_cut_left_out", i["sequences_before_ttft"]),
             ("itl_margin_left_out", min(mem, i["sequences_by_itl_without_margin"], cap)),
             ("allreduce_left_out", min(mem, i["sequences_by_itl_without_allreduce"], cap)),
             ("non_binding_constraint", min(max(mem, itl), cap))]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_plan_nodes(i):
    """ceil(N / (replicas x n)), raised until the replicas keep up with the prompts (kvlib's ``nodes``)."""
    expected, users, replicas, n = i["nodes"], i["users"], i["replicas"], i["sequences_per_replica"]
    slips = [("prefill_left_out", i["nodes_for_decode"]), ("floor_nodes", users // (replicas * n)),
             ("gpus_not_nodes", expected * i["gpus_per_node"])]
    if replicas > 1:
        slips.append(("missing_replicas", -(-users // n)))
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_plan_nodes_with_headroom(i):
    """ceil(nodes x spike) + spares, from the plan's nodes."""
    nodes, f, r = i["nodes"], i["spike_factor"], i["redundancy_nodes"]
    expected = math.ceil(round(nodes * f, 9)) + r
    slips = [("no_headroom", nodes), ("spike_not_rounded_up", math.floor(nodes * f) + r),
             ("spares_scaled", math.ceil(round((nodes + r) * f, 9))), ("gpus_not_nodes", expected * i["gpus_per_node"])]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_plan_concurrency(i):
    """Little's law at the SLOs: rate x (TTFT + T_out x ITL) requests in flight."""
    rate, ttft, out, itl = i["rate_per_s"], i["ttft_ms"] / 1e3, i["output_tokens"], i["itl_ms"] / 1e3
    expected = rate * (ttft + out * itl)
    slips = [("ttft_left_out_of_w", rate * out * itl), ("target_ms_as_seconds", rate * (ttft + out * itl * 1e3)),
             ("p95_for_mean", rate * (ttft + i["output_tokens_p95"] * itl))]
    return expected, [(k, v) for k, v in slips if not math.isclose(v, expected)]


QUANTITIES = {
    "plan_pool_bytes_per_gpu": _q_pool_bytes_per_gpu,
    "plan_sequences_per_replica": _q_sequences_per_replica,
    "plan_nodes": _q_plan_nodes,
    "plan_nodes_with_headroom": _q_plan_nodes_with_headroom,
    "plan_concurrency": _q_plan_concurrency,
}
COUNT_SLIPS = {"prefill_left_out"}


def figures(key, inputs) -> dict:
    """``{itl_target_ms}`` (the ITL SLO, for the ms-as-seconds slip) where a plan states ``itl_ms``."""
    return {"itl_target_ms": f"{inputs['itl_ms']:g}"} if "itl_ms" in inputs and "itl_target_ms" not in inputs else {}
