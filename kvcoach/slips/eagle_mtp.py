"""Speculative decoding with draft heads (EAGLE, multi-token prediction): the slips of ``eagle_mtp``.

A draft head proposes a chain whose acceptance falls with the position: the j-th draft is accepted
with probability a_j given the ones before it were, so a verification yields 1 + sum_i prod_{j <= i} a_j
tokens (kvlib.serving.eagle_expected_tokens), the target's own token included.
"""

from __future__ import annotations

from .engine import close

SLIP_WORDS = {
    "eagle_no_bonus": ("the target's own token comes with every verification: 1 + sum_i prod_(j <= i) a_j, counting "
                       "it.",
                       "the target's own token per verification is missing."),
    "eagle_sum_not_product": ("a draft counts only if every draft before it was accepted: the i-th adds "
                              "a_1 x ... x a_i, not a_i alone.",
                              "a draft counts only if all before it were accepted: multiply the rates."),
    "eagle_first_rate_for_all": ("the acceptance falls with the position ({acceptance_text}): the first position's "
                                 "rate does not hold for the later ones.",
                                 "each position has its own acceptance rate."),
}


def figures(key, inputs):
    """The acceptance rates in words, for ``eagle_first_rate_for_all``."""
    if "acceptance_per_position" in inputs:
        return {"acceptance_text": ", ".join(f"{a:g}" for a in inputs["acceptance_per_position"])}
    return {}


def _tables(i):
    from kvlib.serving import eagle_expected_tokens
    acc = list(i["acceptance_per_position"])
    e = eagle_expected_tokens(acc)
    return e, [("eagle_no_bonus", e - 1), ("eagle_sum_not_product", 1 + sum(acc)),
               ("eagle_first_rate_for_all", eagle_expected_tokens([acc[0]] * len(acc)))]


def _q_eagle_tokens(i):
    """Tokens per verification: 1 + sum_i prod_(j <= i) a_j (serving.eagle_expected_tokens)."""
    expected, slips = _tables(i)
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


def _q_eagle_speedup(i):
    """Speed-up over plain decoding: E / (gamma c_d + c_v), E from the per-position acceptance."""
    e, slips = _tables(i)
    g, c, v = len(i["acceptance_per_position"]), i["cost_ratio"], i["verify_ratio"]
    expected = e / (g * c + v)
    out = [(k, x / (g * c + v)) for k, x in slips] + [("draft_cost_ignored", e)]
    if v != 1:
        out.append(("moe_verify_as_one_step", e / (g * c + 1)))
    return expected, [(k, x) for k, x in out if not close(x, expected, 1e-9)]


QUANTITIES = {"eagle_tokens": _q_eagle_tokens, "eagle_speedup": _q_eagle_speedup}
