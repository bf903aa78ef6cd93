"""A long prompt's time to first token, attention FLOPs included (kvlib.offload, kvlib.serving): ``long_ttft``'s slips.

At tens of thousands of tokens the causal attention, 2 L H (d_qk + d_v) T_p (T_p + 1) / 2 FLOPs, rivals
the linear layers' 2 P T_p; the prefill is compute-bound and splits over the tensor-parallel GPUs.
"""

from __future__ import annotations

from .engine import close
from .serving import _params_slips

SLIP_WORDS = {
    "attention_flops_left_out": ("at {prompt_tokens:,} tokens the attention FLOPs count: 2 L H (d_qk + d_v) per (query, "
                                 "key) pair, T_p (T_p + 1) / 2 pairs, beside the linear layers' 2 P T_p.",
                                 "the attention FLOPs are left out; at a long prompt they count."),
    "attention_not_causal": ("a causal prefill's query sees only the keys before it: T_p (T_p + 1) / 2 pairs per head "
                             "and layer, not T_p^2.",
                             "causal attention: T_p (T_p + 1) / 2 pairs, not T_p^2."),
    "attention_kv_heads_for_query_heads": ("every query head ({num_heads}) computes its own scores, even where "
                                           "{kv_heads} KV heads are shared: the attention FLOPs go with H, not K.",
                                           "attention FLOPs go with the query heads, not the KV heads."),
    "attention_tp_not_split": ("the prefill's FLOPs split over the {tp} GPUs of tensor parallelism: divide by "
                               "t x eta x F.",
                               "the FLOPs split over the tensor-parallel GPUs."),
}


def _flops(i, pairs=None, heads=None, linear_params=None):
    from kvlib.offload import attention_pairs, prefill_linear_flops
    t = i["prompt_tokens"]
    n = attention_pairs(t) if pairs is None else pairs
    h = i["num_heads"] if heads is None else heads
    p = i["num_params"] if linear_params is None else linear_params
    return prefill_linear_flops(p, t) + 2 * i["layers"] * h * (i["qk_head_dim"] + i["v_head_dim"]) * n


def _q_long_ttft_ms(i):
    """TTFT [ms]: (2 P T_p + 2 L H (d_qk + d_v) T_p (T_p + 1) / 2) / (t eta F) x 1000 (serving.ttft_seconds)."""
    from kvlib.offload import prefill_attention_flops, prefill_linear_flops
    t, tp, f, mfu = i["prompt_tokens"], i["tp"], i["peak_flop_per_s"], i["mfu"]
    total = prefill_linear_flops(i["num_params"], t) + prefill_attention_flops(
        i["layers"], i["num_heads"], i["qk_head_dim"], t, i["v_head_dim"])

    def ms(flops, gpus=tp, util=mfu):
        return flops / (gpus * util * f) * 1e3

    expected = ms(total)
    slips = [("attention_flops_left_out", ms(prefill_linear_flops(i["num_params"], t))),
             ("attention_not_causal", ms(_flops(i, pairs=t * t))),
             ("attention_kv_heads_for_query_heads", ms(_flops(i, heads=i["kv_heads"]))),
             ("attention_tp_not_split", ms(total, gpus=1)), ("ignored_mfu", ms(total, util=1))]
    # the input embedding counted (every model: the lookup does no matmul) and, for a mixture of experts, every
    # expert counted: serving's rule for the prefill's parameters
    slips += _params_slips(i, lambda params: ms(_flops(i, linear_params=params)))
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


QUANTITIES = {"long_ttft_ms": _q_long_ttft_ms}
