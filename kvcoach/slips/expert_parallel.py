"""Expert parallelism's all-to-all (kvlib.serving.ep_all_to_all_bytes): the slips of ``expert_parallel``.

Under EP each token's hidden vector goes to the GPUs of its top-k experts (dispatch) and comes back
weighted (combine); a route to an expert on the token's own GPU sends nothing. Against tensor
parallelism's all-reduce of the whole batch, EP with data-parallel attention sends k / t as much.
"""

from __future__ import annotations

from .engine import close, unit_slips

SLIP_WORDS = {
    "a2a_combine_missing": ("the tokens come back too: a dispatch to the experts and a combine of their outputs, "
                            "two transfers per route.",
                            "dispatch and combine: two transfers per route."),
    "a2a_local_routes_counted": ("a route to an expert on the token's own GPU sends nothing: only (ep - 1) / ep = "
                                 "{ep_minus_one} / {ep} of the routes leave the GPU.",
                                 "only (ep - 1) / ep of the routes leave the GPU."),
    "a2a_top_k_missing": ("each token goes to {top_k} experts, so up to {top_k} GPUs: multiply by k_e.",
                          "each token goes to k_e experts: multiply by k_e."),
    "a2a_moe_layers_missing": ("every one of the {moe_layers} MoE layers dispatches and combines: multiply by L_e.",
                               "multiply by the MoE layers."),
    "a2a_one_dtype": ("DeepEP dispatches in fp8 (1 byte a number) and combines in bf16 (2 bytes): 3 bytes a number "
                      "per route, not {wrong_bytes} x 2.",
                      "the dispatch is fp8 and the combine bf16."),
    "ep_tokens_not_split": ("with data-parallel attention each of the {ep} GPUs holds only its own {tokens_per_gpu} "
                            "of the batch's tokens, and sends only those.",
                            "each GPU sends its own share of the tokens."),
    "ep_tp_ratio_inverted": ("the ratio is upside down: EP's bytes over TP's.",
                             "the ratio is upside down."),
}


def figures(key, inputs):
    """Figures the words derive: ep - 1, one dtype's bytes, the tokens each GPU holds."""
    out = {}
    if "ep" in inputs:
        out["ep_minus_one"] = inputs["ep"] - 1
    if key == "a2a_one_dtype":
        out["wrong_bytes"] = "1 or 2"
    if "batch_size" in inputs and "ep" in inputs:
        out["tokens_per_gpu"] = inputs["batch_size"] // inputs["ep"]
    return out


def _q_ep_step_bytes(i):
    """Bytes one GPU sends per step: L_e (n k (ep - 1) / ep d) (b_dispatch + b_combine) (serving.ep_all_to_all_bytes)."""
    from kvlib.serving import ep_all_to_all_bytes
    n, d, k, ep, le = i["tokens"], i["hidden_size"], i["top_k"], i["ep"], i["moe_layers"]
    b_in, b_out = i["dispatch_bytes"], i["combine_bytes"]

    def sent(tokens=n, experts=k, gpus=ep, layers=le, one=b_in, two=b_out):
        # ep_all_to_all_bytes counts dispatch and combine at one dtype: half of it at each
        return layers * (ep_all_to_all_bytes(tokens, d, experts, gpus, one) + ep_all_to_all_bytes(tokens, d, experts,
                                                                                                  gpus, two)) // 2

    expected = sent()
    slips = [("a2a_combine_missing", le * ep_all_to_all_bytes(n, d, k, ep, b_in) // 2),
             ("a2a_local_routes_counted", le * n * k * d * (b_in + b_out)),
             ("a2a_top_k_missing", sent(experts=1)), ("a2a_moe_layers_missing", sent(layers=1))]
    if b_in != b_out:
        slips += [("a2a_one_dtype", sent(one=b_out)), ("a2a_one_dtype", sent(two=b_in))]
    return expected, [(key, v) for key, v in slips if v != expected] + unit_slips(expected)


def _q_ep_over_tp(i):
    """EP's all-to-all over TP's all-reduce, per GPU and MoE layer: (2 (B / t) k (t - 1) / t d b) / (2 (t - 1) / t B d b)."""
    from kvlib.serving import ep_all_to_all_bytes, ring_allreduce_bytes_sent
    b, d, k, t = i["batch_size"], i["hidden_size"], i["top_k"], i["ep"]
    tp = ring_allreduce_bytes_sent(b * d * 2, t)
    expected = ep_all_to_all_bytes(b // t, d, k, t) / tp
    slips = [("ep_tokens_not_split", ep_all_to_all_bytes(b, d, k, t) / tp), ("ep_tp_ratio_inverted", 1 / expected),
             ("a2a_local_routes_counted", 2 * (b // t) * k * d * 2 / tp), ("a2a_top_k_missing", expected / k)]
    return expected, [(key, v) for key, v in slips if not close(v, expected, 1e-9)]


QUANTITIES = {"ep_step_bytes": _q_ep_step_bytes, "ep_over_tp": _q_ep_over_tp}
