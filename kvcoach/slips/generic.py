"""Slips any numeric exercise can make, whatever its quantity: their words.

The engine recomputes them from the expected value and the exercise's unit alone, after a quantity's
own slips (``engine.generic_slips``, ``engine.rounding_slips``): off by one, seconds and milliseconds,
per GPU and per node, the next unit (blocks, tokens, bytes, nodes), the answer in another byte unit,
KB/GB/TB against KiB/GiB/TiB, a rounding taken the other way; and a choice's tie taken the other way.
A new exercise needs no code for them.
"""

from __future__ import annotations

from .engine import gpu_count

SLIP_WORDS = {
    "answer_in_kib": ("the answer looks like KiB (bytes / 1024); the question asks for bytes.",
                      "the answer looks like KiB; return bytes."),
    "answer_in_kb": ("the answer looks like KB (bytes / 1000); the question asks for bytes.",
                     "the answer looks like KB; return bytes."),
    "answer_in_mib": ("the answer looks like MiB (bytes / 2^20); the question asks for bytes.",
                      "the answer looks like MiB; return bytes."),
    "answer_in_mb": ("the answer looks like MB (bytes / 10^6); the question asks for bytes.",
                     "the answer looks like MB; return bytes."),
    "answer_in_gib": ("the answer looks like GiB (bytes / 2^30); the question asks for bytes.",
                      "the answer looks like GiB; return bytes."),
    "answer_in_gb": ("the answer looks like GB (bytes / 10^9); the question asks for bytes.",
                     "the answer looks like GB; return bytes."),
    "answer_in_tib": ("the answer looks like TiB (bytes / 2^40); the question asks for bytes.",
                      "the answer looks like TiB; return bytes."),
    "answer_in_tb": ("the answer looks like TB (bytes / 10^12); the question asks for bytes.",
                     "the answer looks like TB; return bytes."),
    "kb_for_kib": ("you mixed KB (10^3) and KiB (2^10): a 2.4% error.",
                   "you mixed KB (10^3) and KiB (2^10)."),
    "gb_for_gib": ("you mixed GB (10^9) and GiB (2^30): a 7.4% error.",
                   "you mixed GB (10^9) and GiB (2^30)."),
    "tb_for_tib": ("you mixed TB (10^12) and TiB (2^40): a 10.0% error.",
                   "you mixed TB (10^12) and TiB (2^40)."),
    "off_by_one": ("it is off by exactly one: check which way the rule rounds (floor or ceil, or round) and whether "
                   "the count includes its first or last item.",
                   "it is off by exactly one: check the rounding direction and the first and last item."),
    "seconds_for_ms": ("the answer looks like seconds; the question asks for milliseconds.",
                       "the answer looks like seconds; return milliseconds."),
    "ms_for_seconds": ("the answer looks like milliseconds; the question asks for seconds.",
                       "the answer looks like milliseconds; return seconds."),
    # Neutral on purpose: a factor of the GPU count is either slip (a per-GPU figure taken for the node's, or a
    # TP split applied twice or left out), and the answer's unit does not say which the question asks for.
    "per_node_not_per_gpu": ("that is {gpus} times the figure: {gpus} GPUs' worth. Check which of your figures are "
                             "one GPU's share and which are all {gpus} GPUs together.",
                             "that is a factor of the GPU count too large: check which figures are one GPU's share."),
    "per_gpu_not_per_node": ("that is the figure divided by {gpus}: one GPU's share of {gpus}. Check which of your "
                             "figures are one GPU's share and which are all {gpus} GPUs together.",
                             "that is a factor of the GPU count too small: check which figures are one GPU's share."),
    "blocks_for_tokens": ("that looks like a block count (tokens / block_size = {block_size}); the question asks for "
                          "tokens.",
                          "that looks like a block count; return tokens."),
    "tokens_for_blocks": ("those are tokens (blocks x block_size = {block_size}); the question asks for blocks.",
                          "those are tokens, not blocks."),
    "bytes_for_tokens": ("that looks like bytes (tokens x {bytes_per_token:,} B per token); the question asks for "
                         "tokens.",
                         "that looks like bytes; return tokens."),
    "sequences_for_nodes": ("that counts sequences (the {users:,} users), not nodes.",
                            "that counts sequences, not nodes."),
    "floor_for_ceil": ("the count is rounded up (ceil): a part of one still needs a whole one; you rounded down "
                       "(floor).",
                       "round up (ceil), not down (floor)."),
    "ceil_for_floor": ("the count is rounded down (floor): only whole ones fit; you rounded up (ceil).",
                       "round down (floor), not up (ceil)."),
    "round_for_ceil": ("the count is rounded up (ceil), not to the nearest whole number: a part of one still needs a "
                       "whole one.",
                       "round up (ceil), not to the nearest whole number."),
    "round_for_floor": ("the count is rounded down (floor), not to the nearest whole number: only whole ones fit.",
                        "round down (floor), not to the nearest whole number."),
    "floor_for_round": ("the figure is rounded to the nearest whole number; you rounded down (floor).",
                        "round to the nearest whole number, not down (floor)."),
    "ceil_for_round": ("the figure is rounded to the nearest whole number; you rounded up (ceil).",
                       "round to the nearest whole number, not up (ceil)."),
    "tie_other_way": ("the tie goes the other way: at equality the text says {tie_rule}.",
                      "the tie goes the other way: at exact equality the text's rule picks the other option (read "
                      "its >= or <=)."),
}


def figures(key, inputs) -> dict:
    """``{gpus}``: the GPUs the exercise spreads over."""
    return {"gpus": gpu_count(inputs)}
