"""Disaggregated prefill and decode (kvlib.serving): the slips of the ``disagg_transfer`` drill.

The KV bytes a prefill instance hands to a decode instance per request, the time they take over
the network, and the prefill GPUs a decode GPU needs (the P:D ratio).
"""

from __future__ import annotations

from .engine import close, unit_slips

SLIP_WORDS = {
    "transfer_output_tokens_added": ("the decode instance writes the {output_tokens:,} output tokens' cache itself: "
                                     "only the prompt's {prompt_tokens:,} tokens move.",
                                     "only the prompt's cache moves; the decode side writes the rest."),
    "transfer_window_layers_full": ("a sliding-window (or chunked) layer keeps only its last window of tokens: its "
                                    "layers move at most that many, not the whole prompt.",
                                    "windowed layers keep only their window."),
    "link_bits_as_bytes": ("{link_gbit_per_s:g} Gb/s is gigabits: {link_gbit_per_s:g} / 8 = "
                           "{link_gbyte_per_s:g} GB/s a link.",
                           "a link's Gb/s are bits: divide by 8 for bytes."),
    "one_link_for_all": ("each of the {tp} prefill GPUs sends its share over its own NIC: the links add up, "
                         "{tp} x {link_gbit_per_s:g} Gb/s.",
                         "each GPU has its own NIC: the links add up."),
    "pd_ratio_inverted": ("the ratio is upside down: that is decode GPUs per prefill GPU.",
                          "the ratio is upside down."),
    "pd_tokens_only": ("the two phases run at different rates: each token count is divided by its own phase's "
                       "tokens per GPU-second ({prefill_tokens_per_gpu_s:,} and {decode_tokens_per_gpu_s:,}).",
                       "divide each phase's tokens by its own rate."),
    "pd_rates_only": ("a request has {prompt_tokens:,} prompt tokens and {output_tokens:,} output tokens: weigh "
                      "each rate by its phase's tokens.",
                      "weigh each rate by its phase's tokens."),
}


def figures(key, inputs):
    """A link's GB/s, for ``link_bits_as_bytes``'s words."""
    if key == "link_bits_as_bytes" and "link_gbit_per_s" in inputs:
        return {"link_gbyte_per_s": inputs["link_gbit_per_s"] / 8}
    return {}


def _q_transfer_bytes(i):
    """KV bytes moved per request: the prompt's cache, S(T_p) (serving.disagg_transfer_bytes)."""
    from kvlib.config import load_model
    from kvlib.serving import disagg_transfer_bytes
    spec = load_model(i["model"])
    t_p, t_o = i["prompt_tokens"], i["output_tokens"]
    expected = disagg_transfer_bytes(i["model"], t_p)
    slips = [("transfer_output_tokens_added", spec.kv_bytes_per_sequence(t_p + t_o)),
             ("transfer_window_layers_full", spec.kv_bytes_per_token() * t_p),
             ("missing_seq_len", spec.kv_bytes_per_sequence(1))]
    return expected, [(k, v) for k, v in slips if v != expected] + unit_slips(expected)


def _q_transfer_ms(i):
    """Transfer time [ms]: S / (t x link / 8) x 1000, each prefill GPU on its own NIC (serving.disagg_transfer_seconds)."""
    from kvlib.serving import disagg_transfer_seconds
    s, tp, gbit = i["transfer_bytes"], i["tp"], i["link_gbit_per_s"]

    def ms(link_bytes_per_s):
        return disagg_transfer_seconds(s, link_bytes_per_s) * 1e3

    expected = ms(tp * gbit * 1e9 / 8)
    slips = [("link_bits_as_bytes", ms(tp * gbit * 1e9)), ("one_link_for_all", ms(gbit * 1e9 / 8)),
             ("link_bits_as_bytes", ms(gbit * 1e9))]
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


def _q_pd_ratio(i):
    """Prefill GPUs per decode GPU: (T_p / r_p) / (T_o / r_d) (serving.pd_ratio)."""
    from kvlib.serving import pd_ratio
    t_p, t_o, r_p, r_d = (i["prompt_tokens"], i["output_tokens"], i["prefill_tokens_per_gpu_s"],
                          i["decode_tokens_per_gpu_s"])
    expected = pd_ratio(t_p, t_o, prefill_tokens_per_gpu_s=r_p, decode_tokens_per_gpu_s=r_d)
    slips = [("pd_ratio_inverted", 1 / expected), ("pd_tokens_only", t_p / t_o), ("pd_rates_only", r_d / r_p)]
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


QUANTITIES = {
    "disagg_transfer_bytes": _q_transfer_bytes,
    "disagg_transfer_ms": _q_transfer_ms,
    "pd_ratio": _q_pd_ratio,
}
