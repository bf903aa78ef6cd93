"""Reading vLLM's startup lines, the pool forwards, and a block range from a printed GiB figure: ch08_vllm_lab's
slips.

A figure read from a log is the figure as printed; the wrong figures a learner picks instead (another
rank's, the weights', the budget's) come with each case (``wrong``: slip key -> the figure taken).
"""

from __future__ import annotations

import math

from kvlib import formulas
from kvlib.units import GB, GiB

SLIP_WORDS = {
    "largest_rank": ("several ranks printed their own figure and you took a larger one ({wrong_value}); vLLM sizes "
                     "the pool from the smallest rank.",
                     "several ranks printed a figure: vLLM sizes the pool from the smallest."),
    "weights_figure": ("that is the model-weights figure ({wrong_value}), not the memory left for the KV cache.",
                       "that is the model-weights figure, not the KV cache's."),
    "budget_figure": ("that is total memory x utilization ({wrong_value}), the budget before weights and activations "
                      "come out of it.",
                      "that is total x utilization, before weights and activations are taken out."),
    "total_figure": ("that is the GPU's total memory ({wrong_value}), not what is left for the KV cache.",
                     "that is the GPU's total memory, not the KV cache's."),
    "cpu_total_figure": ("that is the machine's total memory ({wrong_value}) in 'Explicitly set (space/total) GiB': "
                         "the KV space is the first number.",
                         "in 'Explicitly set (space/total) GiB' the KV space is the first number."),
    "cpu_blocks": ("that is '# CPU blocks' ({wrong_value}), the swap space on the host, not the GPU's blocks.",
                   "that is the CPU (swap) block count, not the GPU's."),
    "tokens_per_request": ("that is max_model_len ({wrong_value}) from the concurrency line, the tokens per request, "
                           "not the cache's capacity.",
                           "that is max_model_len from the concurrency line, not the cache's capacity."),
    "max_seq_len_not_capacity": ("that is the max seq len the error names ({wrong_value}); the KV capacity is the "
                                 "second number in it.",
                                 "that is the max seq len from the error; the KV capacity is its second number."),
    "blocks_as_tokens": ("this log prints blocks; you converted them to tokens ({wrong_value}). Return the count as "
                         "printed.",
                         "the log prints blocks: return the count as printed."),
    "tokens_as_blocks": ("this log prints tokens; you converted them to blocks ({wrong_value}). Return the count as "
                         "printed.",
                         "the log prints tokens: return the count as printed."),
    "gib_as_gb": ("the log prints GiB (2^30 bytes); you converted the figure to GB ({wrong_value:.4g}, x 2^30 / "
                  "10^9). Return it as printed, in GiB.",
                  "the log prints GiB: return the figure as printed, not converted to GB."),
    "activation_left_out": ("the activation peak ({activation_bytes:,} B) is not subtracted: vLLM takes the peak of "
                            "its trial forward pass out of the budget (a V0 log's torch peak less the weights).",
                            "the activation peak is not subtracted."),
    "non_torch_left_out": ("the non-torch memory ({non_torch_bytes:,} B) is not subtracted: what CUDA's libraries and "
                           "NCCL hold outside PyTorch comes out of the budget too.",
                           "the non-torch memory is not subtracted."),
    "cudagraph_left_out": ("the CUDA-graph estimate ({cudagraph_bytes:,} B) is not subtracted: from vLLM 0.20 the "
                           "engine takes it out before sizing the pool.",
                           "the CUDA-graph estimate is not subtracted."),
    "point_not_range": ("a printed GiB figure is rounded to 0.01 GiB, so it allows a range of blocks: from (X - "
                        "0.005) GiB to (X + 0.005) GiB, each divided by the bytes per block.",
                        "a printed GiB figure allows a range of blocks (+/-0.005 GiB), not one count."),
    "window_full_unit": ("the rounding window is half a unit of the last printed decimal either side (+/-0.005 GiB), "
                         "not +/-0.01 GiB.",
                         "the window is +/-0.005 GiB (half the last decimal), not +/-0.01 GiB."),
}


def _q_log_figure(i):
    """A figure read from a log, as printed; ``wrong`` maps slip keys to the figures mistaken for it."""
    expected = i["printed"]
    return expected, [(key, value) for key, value in i.get("wrong", {}).items() if value != expected]


def _q_block_range(i):
    """(fewest, most) blocks a printed GiB figure allows: (lo // B, hi // B), B = L 2 max(1, K // tp) D b bs."""
    from kvlib.vllm.log import gib_window
    from kvlib.vllm.mismatch import block_bytes, block_range

    text, bs, tp = i["available_gib"], i["block_size"], i.get("tp", 1)
    geometry = (i["layers"], i["kv_heads"], i["head_dim"], i["dtype_bytes"])
    b = block_bytes(*geometry, bs, tp)
    expected = block_range(text, *geometry, bs, tp)
    lo, hi = gib_window(text)
    x = float(text)
    slips = [("point_not_range", (round(x * GiB) // b, round(x * GiB) // b)),
             ("point_not_range", (int(x * GiB / b), int(x * GiB / b))),
             ("window_full_unit", (int((x - 0.01) * GiB) // b, int((x + 0.01) * GiB) // b)),
             ("gb_for_gib", (int((x - 0.005) * GB) // b, int((x + 0.005) * GB) // b)),
             ("tokens_for_blocks", (expected[0] * bs, expected[1] * bs))]
    whole = block_bytes(*geometry, bs)           # one GPU holding every head: b itself at tp 1 (dropped below)
    slips.append(("total_not_per_gpu", (lo // whole, hi // whole)))
    slips.append(("missing_kv_factor", (lo // (b // 2), hi // (b // 2))))
    return expected, [(k, v) for k, v in slips if v != expected]


def _pool_blocks(i, *, u=None, weights=None, activation=None, non_torch=None, cudagraph=None, block=None):
    """floor(M u - W - O_act - O_nt - O_cg) // B with any term replaced (a slip)."""
    terms = (i["activation_bytes"] if activation is None else activation) \
        + (i["non_torch_bytes"] if non_torch is None else non_torch) \
        + (i["cudagraph_bytes"] if cudagraph is None else cudagraph)
    pool = formulas.kv_pool_bytes(i["total_bytes"], i["utilization"] if u is None else u,
                                  i["weights_bytes"] if weights is None else weights, terms)
    return pool // (block or _block_bytes(i))


def _block_bytes(i, tp=None, kv_factor=2):
    from kvlib.vllm.mismatch import block_bytes
    b = block_bytes(i["layers"], i["kv_heads"], i["head_dim"], i["dtype_bytes"], i["block_size"],
                    i["tp"] if tp is None else tp)
    return b // 2 * kv_factor


def _q_pool_blocks(i):
    """Blocks one rank's pool holds, forwards: floor(M u - W - O_act - O_nt - O_cg) // (2 L max(1, K // t) D b bs)."""
    expected = _pool_blocks(i)
    m, u = i["total_bytes"], i["utilization"]
    others = i["weights_bytes"] + i["activation_bytes"] + i["non_torch_bytes"] + i["cudagraph_bytes"]
    exact = (m * u - others) / _block_bytes(i)
    slips = [("activation_left_out", _pool_blocks(i, activation=0)),
             ("non_torch_left_out", _pool_blocks(i, non_torch=0)),
             ("cudagraph_left_out", _pool_blocks(i, cudagraph=0)),
             ("ignored_utilization", _pool_blocks(i, u=1)),
             ("utilization_after_weights", math.floor((m - others) * u) // _block_bytes(i)),
             ("total_not_per_gpu", _pool_blocks(i, block=_block_bytes(i, tp=1))),
             ("missing_kv_factor", _pool_blocks(i, block=_block_bytes(i, kv_factor=1))),
             ("tokens_for_blocks", expected * i["block_size"]),
             ("ceil_for_floor", math.ceil(exact)), ("round_for_floor", round(exact))]
    return expected, [(k, v) for k, v in slips if v != expected]


QUANTITIES = {
    "log_figure": _q_log_figure,
    "pool_blocks": _q_pool_blocks,
    "block_range": _q_block_range,
}


def figures(key, inputs) -> dict:
    """``{wrong_value}``: the figure the learner took for slip ``key`` (a log_figure case's ``wrong``)."""
    if isinstance(inputs.get("wrong"), dict) and key in inputs["wrong"]:
        return {"wrong_value": inputs["wrong"][key]}
    return {}
