"""FP8 and FP4 tensor peaks (kvlib.gpus.GPU.peak_flop_per_s): the slips of ``low_precision_compute``.

A prefill in fp8 or fp4 runs at that dtype's dense peak; a decode step turns compute-bound once the
batch's FLOPs per weight byte, 2 B / b, reach the peak over the bandwidth (serving.ridge_batch); a
mixture of experts prefills with its active parameters and its experts reach the ridge once the batch
covers them.
"""

from __future__ import annotations

import math

from .engine import close

SLIP_WORDS = {
    "peak_of_wrong_dtype": ("the matmuls run in {dtype}: take the dense {dtype} peak, not {other_dtype}'s.",
                            "take the peak of the dtype the matmuls run in."),
    "sparse_peak_used": ("the larger data-sheet figure assumes 2:4 structured sparsity; a dense model's matmuls reach "
                         "the dense peak, half of it.",
                         "use the dense peak, not the sparse one."),
    "fp4_half_byte_missed": ("an fp4 weight is half a byte: each byte read feeds 2 / 0.5 = 4 FLOPs per sequence, so "
                             "the batch is ridge x 0.5 / 2.",
                             "an fp4 weight is half a byte."),
}


def _q_low_precision_ttft_ms(i):
    """Prefill time at a dtype's dense peak [ms]: 2 P T_p / (eta F_dtype) x 1000 (serving.prefill_seconds)."""
    from kvlib.serving import prefill_seconds
    p, t, f, mfu, other = i["num_params"], i["prompt_tokens"], i["peak_flop_per_s"], i["mfu"], i["other_peak_flop_per_s"]

    def ms(peak=f, util=mfu, params=p):
        return prefill_seconds(params, t, peak, util) * 1e3

    expected = ms()
    slips = [("peak_of_wrong_dtype", ms(peak=other)), ("sparse_peak_used", ms(peak=2 * f)),
             ("ignored_mfu", ms(util=1)), ("prefill_missing_factor_2", expected / 2)]
    if "total_params" in i:                   # a mixture of experts: every token through every expert
        slips.append(("moe_total_params", ms(params=i["total_params"])))
    return expected, [(k, v) for k, v in slips if not close(v, expected, 1e-9)]


def _q_low_precision_ridge(i):
    """First batch at the ridge with weights and compute in one dtype: ceil(F_dtype / BW x b / 2) (serving.ridge_batch)."""
    from fractions import Fraction

    from kvlib.serving import ridge_batch
    f, bw, b = i["peak_flop_per_s"], i["bandwidth_bytes_per_s"], i["weight_dtype_bytes"]
    other = i["other_peak_flop_per_s"]
    # a mixture of experts: its experts reach the ridge once the batch covers them (E, k passed on)
    experts = (i["num_experts"], i["top_k"]) if i.get("num_experts") else ()
    expected = ridge_batch(f, bw, b, *experts)
    slips = [("peak_of_wrong_dtype", ridge_batch(other, bw, b, *experts)),
             ("sparse_peak_used", ridge_batch(2 * f, bw, b, *experts)),
             ("ridge_no_factor_2", ridge_batch(f, bw, 2 * b, *experts))]
    if experts:
        slips.append(("moe_coverage_forgotten", ridge_batch(f, bw, b)))
    else:
        slips.append(("batch_rounded_down", math.floor(Fraction(f) * Fraction(b) / (2 * Fraction(bw)))))
    if b == 0.5:
        slips.append(("fp4_half_byte_missed", ridge_batch(f, bw, 1, *experts)))
    return expected, [(k, v) for k, v in slips if v != expected]


QUANTITIES = {"low_precision_ttft_ms": _q_low_precision_ttft_ms, "low_precision_ridge": _q_low_precision_ridge}
