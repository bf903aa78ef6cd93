"""Requests in flight and prefill under a token budget (kvlib.serving): the slips of ``requests_concurrency``.

Little's law (requests in the system = arrival rate x time each one spends there) and the engine steps a
prompt's chunked prefill takes beside the running decodes.
"""

from __future__ import annotations

import math

from .engine import close

SLIP_WORDS = {
    "decode_time_left_out": ("a request stays in the system until its last token: {output_tokens:,} tokens at "
                             "{itl_ms:g} ms each after the first, not just the time to first token.",
                             "a request stays until its last token, not just its first."),
    "ttft_left_out": ("a request is in the system from its arrival: the time to first token ({ttft_s:g} s) counts "
                      "as well as the decode.",
                      "the time to first token counts too."),
    "itl_ms_as_seconds": ("the inter-token latency is {itl_ms:g} milliseconds, not seconds: {output_tokens:,} tokens "
                          "take {output_tokens:,} x {itl_ms:g} / 1000 s.",
                          "the inter-token latency is in milliseconds."),
    "one_token_not_output": ("a request decodes {output_tokens:,} tokens, each one inter-token latency long, not "
                             "one.",
                             "multiply the inter-token latency by the output tokens."),
    "decodes_counted_once": ("the {decode_tokens} decodes take their tokens in every step, not once: each step "
                             "leaves C - n_d tokens for the prompt.",
                             "the decodes take their tokens in every step."),
}


def _q_requests_in_system(i):
    """Requests in the system at once: lambda (TTFT + T_o ITL) (serving.littles_law_concurrency)."""
    from kvlib.serving import littles_law_concurrency
    rate, ttft, t_o, itl = i["rate_per_s"], i["ttft_s"], i["output_tokens"], i["itl_ms"]
    expected = littles_law_concurrency(rate, ttft + t_o * itl / 1e3)
    slips = [("decode_time_left_out", rate * ttft), ("ttft_left_out", rate * t_o * itl / 1e3),
             ("itl_ms_as_seconds", rate * (ttft + t_o * itl)), ("one_token_not_output", rate * (ttft + itl / 1e3))]
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


def _q_prefill_steps(i):
    """Engine steps of a chunked prefill: ceil(T_p / (C - n_d)) (serving.prefill_steps)."""
    from kvlib.serving import prefill_steps
    t, c, n = i["prompt_tokens"], i["token_budget"], i["decode_tokens"]
    expected = prefill_steps(t, c, n)
    slips = [("decodes_not_subtracted", math.ceil(t / c)), ("chunks_rounded_down", t // (c - n)),
             ("decodes_counted_once", math.ceil((t + n) / c))]
    return expected, [(k, v) for k, v in slips if v != expected]


QUANTITIES = {
    "requests_in_system": _q_requests_in_system,
    "prefill_steps": _q_prefill_steps,
}
