"""A mixture of experts at decode (kvlib.roofline): the slips of the ``moe_decode`` drill.

The experts one MoE layer reads at batch B (uniform routing), the weight bytes a step reads (the
dense part whole, the routed experts touched), and the batch from which every expert is read.
"""

from __future__ import annotations

import math

from .engine import close, unit_slips

SLIP_WORDS = {
    "experts_batch_times_k": ("the {batch_size} tokens do not bring {top_k} new experts each: they pick at random and "
                              "overlap, so a layer reads N_e (1 - (1 - k_e / N_e)^B) experts, not B x k_e.",
                              "tokens overlap in the experts they pick: N_e (1 - (1 - k_e / N_e)^B), not B x k_e."),
    "experts_all_read": ("not every one of the {num_experts} experts is read at a batch of {batch_size}: a layer reads "
                         "only the experts its tokens are routed to, N_e (1 - (1 - k_e / N_e)^B).",
                         "a layer reads only the experts its tokens are routed to."),
    "experts_top_k_only": ("{top_k} experts is one token's share; the batch's {batch_size} tokens touch more of them: "
                           "N_e (1 - (1 - k_e / N_e)^B).",
                           "k_e experts is one token's share, not the batch's."),
    "experts_unread_not_read": ("that is the experts left unread, N_e (1 - k_e / N_e)^B; the ones read are the rest, "
                                "N_e (1 - (1 - k_e / N_e)^B).",
                                "that is the experts left unread, not the ones read."),
    "moe_read_all_weights": ("that is every weight, all {num_experts} experts of each MoE layer; at a batch of "
                             "{batch_size} a step reads only the experts its tokens touch, beside the dense part.",
                             "a step reads only the experts its tokens touch, not every weight."),
    "moe_read_top_k_only": ("that is one token's read (the top {top_k} of each layer's experts); the batch's {batch_size} "
                            "tokens touch N_e (1 - (1 - k_e / N_e)^B) experts per layer, and a step reads them all.",
                            "that is one token's read; the batch touches more experts."),
    "moe_dense_left_out": ("the dense part (attention, shared experts, router, embeddings: {dense_params:,} "
                           "parameters) is read whole every step: add it to the experts read.",
                           "the dense part is read every step too."),
    "all_read_at_e_over_k": ("N_e / k_e = {num_experts} / {top_k} would cover every expert only if no two tokens "
                             "shared one; routed at random they overlap, so the experts left unread fall as "
                             "N_e (1 - k_e / N_e)^B: the first batch with fewer than one is far larger.",
                             "tokens overlap in the experts they pick: N_e / k_e is far too small."),
    "all_read_top_k_forgotten": ("each token picks {top_k} experts, not one: an expert is missed by a token with "
                                 "probability 1 - k_e / N_e, not 1 - 1 / N_e.",
                                 "each token picks k_e experts: the miss probability is 1 - k_e / N_e."),
    "all_read_rounded_down": ("the first batch with fewer than one expert unread is the one past the solution of "
                              "N_e (1 - k_e / N_e)^B = 1: round up (one sequence fewer leaves one expert unread).",
                              "round up: the first batch past the solution."),
}


def figures(key, inputs):
    """The dense part's parameters, for ``moe_dense_left_out``'s words."""
    if key == "moe_dense_left_out" and "expert_params" in inputs:
        return {"dense_params": inputs["num_params"] - inputs["moe_layers"] * inputs["num_experts"]
                * inputs["expert_params"]}
    return {}


def _touched(e, k, b):
    from kvlib.roofline import expected_experts_touched
    return expected_experts_touched(e, k, b)


def _q_moe_experts_read(i):
    """Routed experts one MoE layer reads at batch B: N_e (1 - (1 - k_e / N_e)^B) (roofline.expected_experts_touched)."""
    e, k, b = i["num_experts"], i["top_k"], i["batch_size"]
    expected = _touched(e, k, b)
    slips = [("experts_batch_times_k", b * k), ("experts_all_read", e), ("experts_top_k_only", k),
             ("experts_unread_not_read", e - expected)]
    return expected, [(key, v) for key, v in slips if not close(v, expected, 1e-9)]


def _q_moe_step_bytes(i):
    """Weight bytes a decode step reads: (P - L_e N_e P_e) b + ceil(L_e N_B P_e b) (roofline.weight_bytes_read)."""
    from kvlib.roofline import weight_bytes_read
    p, le, pe, e, k, b, batch = (i["num_params"], i["moe_layers"], i["expert_params"], i["num_experts"], i["top_k"],
                                 i["weight_dtype_bytes"], i["batch_size"])
    expected = weight_bytes_read(i["model"], batch, dtype_bytes=b, embedding_rows=False)
    dense = (p - le * e * pe) * b

    def read(experts):
        return dense + math.ceil(le * pe * b * experts)

    slips = [("moe_read_all_weights", p * b), ("moe_read_top_k_only", read(k)),
             ("experts_batch_times_k", read(batch * k)), ("moe_dense_left_out", expected - dense)]
    return expected, [(key, v) for key, v in slips if v != expected] + unit_slips(expected)


def _q_all_experts_batch(i):
    """First batch with fewer than one expert per layer unread: floor(ln N_e / -ln(1 - k_e / N_e)) + 1."""
    from kvlib.roofline import all_experts_batch
    e, k = i["num_experts"], i["top_k"]
    expected = all_experts_batch(e, k)
    exact = math.log(e) / -math.log1p(-k / e)
    slips = [("all_read_at_e_over_k", math.ceil(e / k)), ("all_read_top_k_forgotten", all_experts_batch(e, 1)),
             ("all_read_rounded_down", math.floor(exact))]
    return expected, [(key, v) for key, v in slips if v != expected]


QUANTITIES = {
    "moe_experts_read": _q_moe_experts_read,
    "moe_step_bytes": _q_moe_step_bytes,
    "all_experts_batch": _q_all_experts_batch,
}
