"""kvlib.roofline: [kv-math] examples 4 and 5, exercise E, the ridge point and the regimes."""

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlib import get_gpu, load_model
from kvlib.roofline import (
    CACHE_DOMINATED,
    WEIGHT_DOMINATED,
    RooflineError,
    StepOp,
    compute_bound_batch,
    crossover_batch,
    crossover_context,
    decode_step,
    expected_experts_touched,
    matmul_ridge_batch,
    one_intensity_seconds,
    regime,
    step_ops,
    weight_bytes_read,
)

W_8B = 16.06e9  # [kv-math]: Llama-3-8B weights, 8.03e9 x 2 B


def test_seed_003_example_5_context_4096():
    s = decode_step("llama-3-8b", batch=32, context=4096, weight_bytes=W_8B, gpu="H100-SXM")
    kv = 131072 * 4096 * 32                               # 17.18 GB
    assert s.kv_bytes == kv and round(kv / 1e9, 2) == 17.18
    assert round(s.bytes_per_step / 1e9, 2) == 33.24      # seed: 16.06 + 17.18 = 33.24 GB
    assert s.step_s == pytest.approx((W_8B + kv) / 3.35e12)
    assert round(s.step_s * 1e3, 2) == 9.92               # seed: 33.24 / 3350 = 9.92 ms
    assert s.itl_s == s.step_s
    # 32 / 9.9223 ms = 3,225.04 tok/s. The seed prints 3,226: it divides by the step already rounded
    # to 9.92 ms (32 / 0.00992 = 3,225.8).
    assert round(s.tokens_per_s) == 3225
    assert s.regime == CACHE_DOMINATED and s.limit == "bandwidth"


def test_seed_003_example_5_context_32768():
    s = decode_step("llama-3-8b", batch=32, context=32768, weight_bytes=W_8B)
    assert round(s.kv_bytes / 1e9, 1) == 137.4            # seed: 137.4 GB of KV
    assert round(s.bytes_per_step / 1e9, 1) == 153.5      # seed: 153.5 GB
    assert round(s.step_s * 1e3, 1) == 45.8               # seed: 45.8 ms
    # 32 / 45.8206 ms = 698.4 tok/s. The seed prints 699 (32 / 0.0458 = 698.7, from the rounded step).
    assert round(s.tokens_per_s) == 698
    # seed: "4.6x worse throughput at 8x context"
    short = decode_step("llama-3-8b", batch=32, context=4096, weight_bytes=W_8B)
    assert round(short.tokens_per_s / s.tokens_per_s, 1) == 4.6


def test_seed_003_real_systems_reach_60_to_75_percent():
    # [kv-math]: "expect ~2,000-2,400 tok/s and ITL ~13-16 ms"; 3,225 x 0.6 = 1,935, x 0.75 = 2,419;
    # 9.92 / 0.75 = 13.2 ms, 9.92 / 0.6 = 16.5 ms
    lo = decode_step("llama-3-8b", batch=32, context=4096, weight_bytes=W_8B, efficiency=0.6)
    hi = decode_step("llama-3-8b", batch=32, context=4096, weight_bytes=W_8B, efficiency=0.75)
    assert (round(lo.tokens_per_s), round(hi.tokens_per_s)) == (1935, 2419)
    assert (round(hi.itl_s * 1e3, 1), round(lo.itl_s * 1e3, 1)) == (13.2, 16.5)


def test_seed_003_example_4_crossover():
    # 16.06e9 / 131,072 = 122,527.9 token-slots. The seed prints 122,543, an arithmetic slip of 15;
    # its contexts follow from the wrong figure only at batch 32 (3,830 where 122,528 / 32 = 3,829.0).
    assert round(crossover_context(W_8B, 131072, 1)) == 122528
    assert round(crossover_context(141.2e9, 327680, 1)) == 430908   # seed: 430,908 (Llama-3-70B)
    assert round(crossover_context(W_8B, 131072, 32)) == 3829
    assert round(crossover_context(W_8B, 131072, 64)) == 1915        # 1,914.50 rounds up; seed 1,915
    assert round(crossover_context(W_8B, 131072, 128)) == 957        # seed 957
    assert crossover_batch(W_8B, 131072, 4096) == pytest.approx(122527.9 / 4096, rel=1e-5)
    # seed: "At batch 128 and 4k context, KV reads are 4x the weight reads": 131,072 x 4,096 x 128 / 16.06e9 = 4.28
    s = decode_step("llama-3-8b", batch=128, context=4096, weight_bytes=W_8B)
    assert round(s.kv_bytes / s.weight_bytes, 2) == 4.28


def test_seed_003_exercise_e_fp8_kv():
    # FP8 halves the KV bytes, not the weights: at 32K, (16.06 + 137.44) / (16.06 + 68.72) = 1.81x;
    # at 1,024, (16.06 + 4.29) / (16.06 + 2.15) = 1.12x -- the weights dominate a short context
    def speedup(context):
        bf16 = decode_step("llama-3-8b", batch=32, context=context, weight_bytes=W_8B)
        fp8 = decode_step("llama-3-8b", batch=32, context=context, weight_bytes=W_8B, kv_dtype_bytes=1)
        return fp8.tokens_per_s / bf16.tokens_per_s

    assert speedup(32768) == pytest.approx((W_8B + 131072 * 32768 * 32) / (W_8B + 65536 * 32768 * 32))
    assert round(speedup(32768), 2) == 1.81
    assert round(speedup(1024), 2) == 1.12


def test_ridge_point_and_intensity():
    # [build-up]: an H100's ridge point is 295 FLOP/byte (989e12 / 3.35e12 = 295.2)
    s = decode_step("llama-3-8b", batch=8, context=1)
    assert round(s.ridge_flop_per_byte) == 295 == round(get_gpu("H100-SXM").ridge_flop_per_byte)
    # [build-up]: decode intensity equals the batch while the weights dominate: 2 P B FLOPs over 2 P bytes
    assert s.arithmetic_intensity == pytest.approx(8, rel=0.01)
    assert s.regime == WEIGHT_DOMINATED


def test_compute_bound_when_the_batch_passes_the_ridge():
    s = decode_step("llama-3-8b", batch=1024, context=16)
    assert s.limit == "compute"
    assert s.one_intensity_s == s.compute_s > s.bandwidth_s
    # per operation: the matmuls 2 x 8,030,261,248 x 1,024 = 16,445,975,035,904 FLOP / 989e12 = 16.629 ms
    # (compute-bound: 16,060,522,496 B / 3.35e12 = 4.794 ms); attention reads 131,072 x 16 x 1,024
    # = 2,147,483,648 B / 3.35e12 = 0.641 ms for 2 x 32 x 32 x 256 x 16 x 1,024 = 8.59e9 FLOP (0.009 ms)
    matmuls, attention = s.ops
    assert (matmuls.name, matmuls.bound, attention.name, attention.bound) == (
        "matmuls", "compute", "attention", "bandwidth")
    assert matmuls.seconds == pytest.approx(16_445_975_035_904 / 989e12)
    assert attention.seconds == pytest.approx(2_147_483_648 / 3.35e12)
    assert s.step_s_bound == pytest.approx(16.629e-3 + 0.641e-3, abs=1e-6)


def test_tensor_parallel_reads_a_slice_per_gpu():
    one = decode_step("llama-3-70b", batch=16, context=8192)
    eight = decode_step("llama-3-70b", batch=16, context=8192, tp=8)
    assert eight.kv_bytes * 8 == one.kv_bytes
    assert eight.weight_bytes == -(-one.weight_bytes // 8)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 512), st.integers(1, 200_000))
def test_regime_flips_at_the_crossover(batch, context):
    s = decode_step("llama-3-8b", batch=batch, context=context, weight_bytes=W_8B)
    expected = CACHE_DOMINATED if 131072 * context * batch > W_8B else WEIGHT_DOMINATED
    assert s.regime == expected == regime(W_8B, 131072 * context * batch)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 256), st.integers(1, 65536), st.integers(1, 64), st.integers(1, 4096))
def test_step_time_grows_with_batch_and_context(batch, context, more_batch, more_context):
    base = decode_step("llama-3-8b", batch=batch, context=context)
    assert decode_step("llama-3-8b", batch=batch + more_batch, context=context).step_s > base.step_s
    assert decode_step("llama-3-8b", batch=batch, context=context + more_context).step_s > base.step_s


def test_sliding_window_caps_the_kv_read():
    # Mistral 7B v0.1 slides a 4,096 window on every layer: 32K context reads what 4K does
    long = decode_step("mistral-7b", batch=4, context=32768)
    assert long.kv_bytes == load_model("mistral-7b").kv_bytes_per_token() * 4096 * 4


@pytest.mark.parametrize("kwargs, name", [
    (dict(batch=0, context=10), "batch"),
    (dict(batch=1, context=0), "context"),
    (dict(batch=1, context=10, efficiency=1.5), "efficiency"),
    (dict(batch=1, context=10, weight_bytes=-1), "weight_bytes"),
    (dict(batch=1, context=10, tp=3), "tp"),
])
def test_bad_input_names_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        decode_step("llama-3-8b", **kwargs)


def test_bad_input_raises_the_module_error():
    with pytest.raises(RooflineError):
        decode_step("llama-3-8b", batch=1.5, context=10)


# --- attention FLOPs: 2 x H x (d_qk + d_v) x T per layer, H the *query* heads ------------------------
def test_attention_flops_use_the_query_heads():
    # Llama 3.1 8B: L = 32, H = 32 query heads (8 KV heads), D = 128. Each cached token costs
    # 2 x 32 x (128 + 128) = 16,384 FLOPs per layer, x 32 layers = 524,288; 4,096 more tokens of context
    # add 524,288 x 4,096 = 2^31 FLOPs per sequence (the weight term 2 P B cancels in the difference).
    # With the 8 KV heads it would be 2^29.
    short = decode_step("llama-3.1-8b", batch=3, context=4096)
    long = decode_step("llama-3.1-8b", batch=3, context=8192)
    assert long.flops - short.flops == 3 * 2**31


def test_attention_flops_of_mla_use_the_unabsorbed_head_dims():
    # DeepSeek V3: L = 61, H = 128, d_qk = qk_nope 128 + rope 64 = 192, d_v = 128 (its config.json):
    # 2 x 128 x (192 + 128) x 61 = 4,997,120 FLOPs per cached token, here 1,000 more tokens, batch 1.
    a = decode_step("deepseek-v3", batch=1, context=1000)
    b = decode_step("deepseek-v3", batch=1, context=2000)
    assert b.flops - a.flops == 4_997_120 * 1000


def test_attention_flops_stop_growing_in_windowed_layers_and_split_over_tp():
    # gpt-oss-20b: 24 layers alternating sliding (window 128) and full, H = 64, D = 64. Past 128 tokens
    # only the 12 full layers grow: 2 x 64 x (64 + 64) x 12 = 196,608 FLOPs per token; over tp = 2 GPUs half.
    a = decode_step("gpt-oss-20b", batch=1, context=1000, tp=2)
    b = decode_step("gpt-oss-20b", batch=1, context=2000, tp=2)
    assert b.flops - a.flops == 196_608 * 1000 / 2


# --- every input's bound, with the exact one-line message -----------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    (dict(batch=0), "batch must be a positive integer, got 0"),
    (dict(batch=True), "batch must be a positive integer, got True"),      # a bool is not a batch
    (dict(batch=2.0), "batch must be a positive integer, got 2.0"),
    (dict(context=0), "context must be a positive integer, got 0"),
    (dict(context=10.0), "context must be a positive integer, got 10.0"),
    (dict(tp=2.0), "tp must be a positive integer, got 2.0"),
    (dict(efficiency=0), "efficiency must be a positive number, got 0"),
    (dict(efficiency="1"), "efficiency must be a positive number, got '1'"),
    (dict(efficiency=1.5), "efficiency must be at most 1, got 1.5"),
    (dict(tp=0), "tp must be a positive integer, got 0"),
    (dict(weight_bytes=-1), "weight_bytes must be a positive number, got -1"),
    (dict(num_params=0), "num_params must be a positive number, got 0"),
    (dict(bandwidth_bytes_per_s=0), "bandwidth_bytes_per_s must be a positive number, got 0"),
    (dict(peak_flop_per_s=-1.0), "peak_flop_per_s must be a positive number, got -1.0"),
])
def test_bad_input_exact_message(kwargs, message):
    args = dict(batch=1, context=10)
    args.update(kwargs)
    with pytest.raises(RooflineError) as info:
        decode_step("llama-3-8b", **args)
    assert str(info.value) == message


def test_every_figure_of_a_step_with_kvlibs_defaults():
    # Llama 3.1 8B, batch 2 at 1,000 tokens, no option given: an H100-SXM (3.35e12 B/s, 989e12 FLOP/s bf16
    # dense, its datasheet), tp 1, efficiency 1, bf16 weights of the counted 8,030,261,248 parameters.
    # Weights 2 x 8,030,261,248 = 16,060,522,496 B; KV 131,072 x 1,000 x 2 = 262,144,000 B; 16,322,666,496 B in all.
    # FLOPs: 2 x 8,030,261,248 x 2 = 32,121,044,992 linear + 2 x 32 heads x (128 + 128) x 32 layers
    # = 524,288 per cached token x 1,000 x 2 = 1,048,576,000 attention: 33,169,620,992.
    s = decode_step("llama-3.1-8b", batch=2, context=1000)
    assert (s.model, s.gpu, s.batch, s.context, s.tp, s.efficiency) == ("meta-llama/Llama-3.1-8B", "H100-SXM",
                                                                         2, 1000, 1, 1.0)
    assert (s.weight_bytes, s.kv_bytes, s.bytes_per_step) == (16_060_522_496, 262_144_000, 16_322_666_496)
    assert (s.bandwidth_bytes_per_s, s.peak_flop_per_s) == (3.35e12, 989e12)
    assert s.flops == 33_169_620_992
    # 16,322,666,496 / 3.35e12 = 4.8724 ms; 33,169,620,992 / 989e12 = 33.54 us; ridge 989 / 3.35 = 295.2
    assert s.bandwidth_s == pytest.approx(4.872437760e-3) and s.compute_s == pytest.approx(3.353854e-5)
    assert s.ridge_flop_per_byte == pytest.approx(295.2239)
    # 33,169,620,992 / 16,322,666,496 = 2.0321 FLOP/B; 2 / 4.8724 ms = 410.47 tok/s
    assert s.arithmetic_intensity == pytest.approx(2.032122, rel=1e-6)
    assert s.step_s_bound == s.bandwidth_s and round(s.tokens_per_s_bound, 2) == 410.47
    assert s.limit == "bandwidth" and s.regime == WEIGHT_DOMINATED


def test_efficiency_slows_the_step_not_the_bound():
    # at 50% of peak bandwidth the step takes twice the bound: 2 x 4.8724 ms, 205.24 tok/s against 410.47
    s = decode_step("llama-3.1-8b", batch=2, context=1000, efficiency=0.5)
    assert s.step_s == pytest.approx(2 * 4.872437760e-3) and s.itl_s == s.step_s
    assert round(s.tokens_per_s, 2) == 205.24 and round(s.tokens_per_s_bound, 2) == 410.47


def test_a_parameter_count_sets_the_weights_and_the_linear_flops():
    # 7e9 parameters: 14e9 B of bf16 weights, 2 x 7e9 = 14e9 linear FLOPs + 524,288 x 1,000 attention
    s = decode_step("llama-3.1-8b", batch=1, context=1000, num_params=7e9)
    assert s.weight_bytes == 14_000_000_000
    assert s.flops == 14e9 + 524_288_000


def test_moe_flops_use_the_active_parameters_and_reads_the_experts_touched():
    # Mixtral 8x7B (its config.json): d 4,096, 32 layers, 32 heads / 8 KV of 128, 8 experts of FFN 14,336,
    # top 2, vocabulary 32,000 untied. Per layer: attention 4,096 x 10,240 = 41,943,040, one expert
    # 3 x 4,096 x 14,336 = 176,160,768, router 4,096 x 8 = 32,768, norms 8,192. Active (2 experts):
    # 394,305,536 x 32 = 12,617,777,152 + embeddings 2 x 32,000 x 4,096 = 262,144,000 + 4,096
    # = 12,879,925,248 (the paper: 12.9B). All 8: 1,451,270,144 x 32 + 262,148,096 = 46,702,792,704.
    # One token is routed to 2 experts per layer: the step reads the active parameters, all of them
    s = decode_step("mixtral-8x7b", batch=1, context=1)
    assert s.weight_bytes == 2 * 12_879_925_248
    # 1,000 tokens touch all 8 experts of every layer (the share missed, 8 x 0.75^1000, is far below a byte)
    assert decode_step("mixtral-8x7b", batch=1000, context=1).weight_bytes == 2 * 46_702_792_704
    # one cached token: 2 x 32 x 256 x 32 layers = 524,288 attention FLOPs
    assert s.flops == 2 * 12_879_925_248 + 524_288


def test_bandwidth_and_peak_overrides():
    # 2e12 B/s and 100e12 FLOP/s: ridge 50 FLOP/B; 16,322,666,496 B / 2e12 = 8.161 ms
    s = decode_step("llama-3.1-8b", batch=2, context=1000, bandwidth_bytes_per_s=2e12, peak_flop_per_s=100e12)
    assert (s.bandwidth_bytes_per_s, s.peak_flop_per_s, s.ridge_flop_per_byte) == (2e12, 100e12, 50.0)
    assert s.bandwidth_s == pytest.approx(16_322_666_496 / 2e12)
    assert s.compute_s == pytest.approx(33_169_620_992 / 100e12)


def test_at_the_ridge_point_the_step_is_compute_bound():
    # A GPU whose peak equals this step's FLOPs per second and whose bandwidth equals its bytes per second:
    # both times are 1 s and the intensity equals the ridge -- the roofline's corner counts as compute-bound
    # ('bandwidth' only strictly below the ridge).
    flops, nbytes = 33_169_620_992, 16_322_666_496
    s = decode_step("llama-3.1-8b", batch=2, context=1000, bandwidth_bytes_per_s=nbytes, peak_flop_per_s=flops)
    assert s.bandwidth_s == s.compute_s == 1 and s.arithmetic_intensity == s.ridge_flop_per_byte
    assert s.limit == "compute"


def test_regime_at_equal_reads():
    # weights read = KV read: not yet cache-dominated (the KV must exceed the weights, [kv-math] example 4)
    assert regime(100, 100) == WEIGHT_DOMINATED and regime(100, 101) == CACHE_DOMINATED


def test_decode_flops_with_a_distinct_value_head_dim():
    # MLA-style heads: d_qk 192, d_v 128. 2 x 1e9 x 2 = 4e9 linear + 2 x 4 layers x 8 heads x (192 + 128)
    # x 100 tokens x 2 = 4,096,000; without d_v it defaults to d_qk: 2 x 4 x 8 x 384 x 100 x 2 = 4,915,200
    from kvlib.roofline import decode_flops
    assert decode_flops(1e9, 2, 4, 8, 192, 100, v_head_dim=128) == 4_004_096_000
    assert decode_flops(1e9, 2, 4, 8, 192, 100) == 4_004_915_200



# --- what a step reads of the input embedding ([corrections 05-09]): B rows, not the table ------------------
def test_weight_bytes_read_skips_the_unread_embedding_rows():
    from kvlib.roofline import weight_bytes_read
    # Llama 3.1 8B: 8,030,261,248 parameters in bf16; untied 128,256 x 4,096 table, 1,050,673,152 B (6.5%)
    whole, table = 8_030_261_248 * 2, 128_256 * 4096 * 2
    assert table == 1_050_673_152 and round(100 * table / whole, 1) == 6.5
    assert weight_bytes_read("llama-3.1-8b", 1) == whole - table + 4096 * 2
    assert weight_bytes_read("llama-3.1-8b", 32) == whole - table + 32 * 4096 * 2 == 15_010_111_488
    # fp8 weights and TP 4: a quarter of the same count at one byte a number
    assert weight_bytes_read("llama-3.1-8b", 32, dtype_bytes=1, tp=4) == (whole - table + 32 * 4096 * 2) // 2 // 4
    # GPT-2 large ties its table to the head (read whole there) but looks up rows of its 1,024 learned positions
    assert weight_bytes_read("gpt2-large", 8) == 774_030_080 * 2 - (1024 - 8) * 1280 * 2


def test_decode_step_with_embedding_rows_reads_and_computes_less():
    plain = decode_step("llama-3.1-8b", batch=32, context=4096)
    rows = decode_step("llama-3.1-8b", batch=32, context=4096, embedding_rows=True)
    assert rows.weight_bytes == 15_010_111_488 and rows.kv_bytes == plain.kv_bytes == 131_072 * 4096 * 32
    # the lookup does no multiply: linear FLOPs 2 (P - V d) B; attention 2 L H (2 D) T B as before
    attention = 2 * 32 * 32 * 256 * 4096 * 32
    assert rows.flops == 2 * (8_030_261_248 - 128_256 * 4096) * 32 + attention
    assert abs(rows.bandwidth_s - (15_010_111_488 + 131_072 * 4096 * 32) / 3.35e12) < 1e-15
    with pytest.raises(RooflineError, match="embedding_rows counts the model's own weights"):
        decode_step("llama-3.1-8b", batch=1, context=1, embedding_rows=True, weight_bytes=10**9)


def test_compute_bound_batch_by_hand():
    from kvlib.roofline import compute_bound_batch
    # weights alone (T = 1): I(B) = f B / (W + m B) with f = 2P + 2 L H (2D), m = b_tok, W = 2P
    p, f, m = 8_030_261_248, 2 * 8_030_261_248 + 2 * 32 * 32 * 256, 131_072
    ridge = 989e12 / 3.35e12
    expected = math.ceil(ridge * 2 * p / (f - ridge * m))
    assert expected == 296 == compute_bound_batch("llama-3.1-8b", context=1)
    assert decode_step("llama-3.1-8b", batch=295, context=1).limit == "bandwidth"
    assert decode_step("llama-3.1-8b", batch=296, context=1).limit == "compute"
    # at 1,024 tokens f / m = (2P + 2 L H 2D T) / (b_tok T) = 119.7 + 8 < 295: no batch is compute-bound
    assert (2 * p + 2 * 32 * 32 * 256 * 1024) / (131_072 * 1024) < ridge
    assert compute_bound_batch("llama-3.1-8b", context=1024) is None


def test_compute_bound_batch_with_embedding_rows_by_hand():
    # what ch06 shows: the step reads W_r = W - (V - B) d b and the lookup does no arithmetic. At one token of
    # context a step of B does f B FLOPs, f = 2 (P - V d) + 2 L H (2 D), and reads W - V d b + (d b + b_tok) B
    # bytes; compute-bound from the first B with f B >= ridge x bytes. Llama 3.1 8B: V = 128,256, d = 4,096.
    from kvlib.roofline import compute_bound_batch
    p, vd = 8_030_261_248, 128_256 * 4096
    f = 2 * (p - vd) + 2 * 32 * 32 * 256
    base, per_seq = 2 * p - 2 * vd, 4096 * 2 + 131_072
    ridge = 989e12 / 3.35e12
    expected = math.ceil(ridge * base / (f - ridge * per_seq))
    assert expected == 297 == compute_bound_batch("llama-3.1-8b", context=1, embedding_rows=True)
    assert decode_step("llama-3.1-8b", batch=296, context=1, embedding_rows=True).limit == "bandwidth"
    # at 512 tokens f / m = (2 (P - V d) + 2 L H 2D T) / (b_tok T + d b) = 228 < 295: none
    f512 = 2 * (p - vd) + 2 * 32 * 32 * 256 * 512
    assert 227 < f512 / (131_072 * 512 + 4096 * 2) < 229
    assert compute_bound_batch("llama-3.1-8b", context=512, embedding_rows=True) is None


# --- mixtures of experts read only the experts their tokens touch --------------------------------------------
# Expert sizes from each config.json: a routed expert is a gated MLP of 3 d ff parameters (+ 2 ff + d biases for
# gpt-oss). Mixtral 8x7B: 3 x 4,096 x 14,336 = 176,160,768, 32 MoE layers, E 8, k 2. Qwen3-30B-A3B:
# 3 x 2,048 x 768 = 4,718,592, 48 layers, E 128, k 8. DeepSeek-V3: 3 x 7,168 x 2,048 = 44,040,192, 58 MoE
# layers (61 less 3 dense), E 256, k 8. gpt-oss-120b: 3 x 2,880 x 2,880 + 8,640 = 24,891,840, 36 layers, E 128, k 4.



def test_experts_touched_uniform_routing_by_hand():
    assert expected_experts_touched(8, 2, 1) == 2                     # one token: exactly its k
    assert expected_experts_touched(8, 2, 6) == pytest.approx(8 * (1 - 0.75 ** 6))   # 6.576171875
    assert expected_experts_touched(8, 2, 6) == pytest.approx(6.576171875)
    # Qwen3-30B-A3B, 16 tokens: 128 (1 - 0.9375^16) = 128 x (1 - 0.356094) = 82.42
    assert expected_experts_touched(128, 8, 16) == pytest.approx(82.42, abs=0.01)
    # gpt-oss-120b, 32 tokens: 128 (1 - 0.96875^32) = 128 x (1 - 0.362019) = 81.66
    assert expected_experts_touched(128, 4, 32) == pytest.approx(81.66, abs=0.01)
    assert expected_experts_touched(256, 8, 10_000) == pytest.approx(256)
    assert expected_experts_touched(4, 4, 3) == 4                     # every expert chosen by every token


@pytest.mark.parametrize("args, field", [((0, 2, 1), "num_experts"), ((8, 9, 1), "top_k"), ((8, 2, 0), "tokens"),
                                         ((8, 2, 1.5), "tokens")])
def test_experts_touched_rejects_bad_input(args, field):
    with pytest.raises(RooflineError, match=field):
        expected_experts_touched(*args)


def test_qwen3_moe_weights_read_by_hand():
    # Qwen3-30B-A3B's dense part, per layer: q 2,048 x 4,096 + k, v 2 x 2,048 x 512 + o 4,096 x 2,048 + q/k norms
    # 2 x 128 = 18,874,624; router 2,048 x 128 = 262,144; norms 4,096: 19,140,864 x 48 = 918,761,472; embedding and
    # untied head 2 x 151,936 x 2,048 = 622,329,856; final norm 2,048: 1,541,093,376 parameters.
    dense = 918_761_472 + 622_329_856 + 2048
    assert weight_bytes_read("qwen3-30b-a3b", 1, embedding_rows=False) == 2 * (dense + 48 * 8 * 4_718_592)
    touched_16 = 128 - Fraction(120 ** 16, 128 ** 15)                 # 82.42 experts
    expected = 2 * dense + math.ceil(2 * 48 * 4_718_592 * touched_16)
    assert weight_bytes_read("qwen3-30b-a3b", 16, embedding_rows=False) == expected
    # the untied input table: 16 rows read, 151,920 skipped
    assert weight_bytes_read("qwen3-30b-a3b", 16) == expected - (151_936 - 16) * 2048 * 2


def test_mixtral_speculative_verify_reads_most_experts():
    # a 6-token verify at batch 1 touches 6.58 of 8 experts in each of 32 layers: 32 x 6.576 x 176,160,768 x 2 B
    verify = weight_bytes_read("mixtral-8x7b", 6, embedding_rows=False)
    one = weight_bytes_read("mixtral-8x7b", 1, embedding_rows=False)
    assert verify - one == pytest.approx(2 * 32 * 176_160_768 * (6.576171875 - 2), abs=1)
    assert round(verify / one, 2) == round((1_605_636_096 + 32 * 6.576171875 * 176_160_768)
                                           / (1_605_636_096 + 32 * 2 * 176_160_768), 2) == 3.0


def test_expert_parallelism_splits_the_experts_touched():
    # DeepSeek-V3 at EP 8: 32 experts per GPU; at batch 1 the 8 touched per layer average 1 per GPU
    dense_whole = 671_026_404_352 - 58 * 256 * 44_040_192
    one = weight_bytes_read("deepseek-v3", 1, embedding_rows=False, ep=8)
    assert one == 2 * dense_whole + 2 * 58 * 8 * 44_040_192 // 8
    with pytest.raises(RooflineError, match="ep"):
        weight_bytes_read("deepseek-v3", 1, ep=3)
    with pytest.raises(RooflineError, match="ep"):
        weight_bytes_read("llama-3.1-8b", 1, ep=2)


def test_gpt_oss_batch_one_reads_the_active_parameters():
    # gpt-oss-120b, one token: 4 of 128 experts, the 5.71 B active parameters kvlib counts (OpenAI's model card: 5.1 B
    # active without the embedding and head)
    w = weight_bytes_read("gpt-oss-120b", 1, embedding_rows=False)
    routed = 36 * 128 * 24_891_840
    assert w == 2 * (116_829_156_672 - routed + 36 * 4 * 24_891_840)
    assert w == 2 * load_model("gpt-oss-120b").num_params_active()


def test_step_ops_sum_to_the_step_and_the_old_rule_is_kept():
    # Llama 3.1 8B, 512 sequences of 512 tokens, H100. Weights read: 16,060,522,496 - (128,256 - 512) x 4,096 x 2
    # = 15,014,043,648 B; matmul FLOPs 2 x (8,030,261,248 - 525,336,576) x 512 = 7,685,042,864,128 (7.77 ms at
    # 989e12, above 15.01 GB / 3.35e12 = 4.48 ms: compute-bound). Attention: 131,072 x 512 x 512 = 34,359,738,368 B
    # (10.26 ms) for 2 x 32 x 32 x 256 x 512 x 512 = 137,438,953,472 FLOP (0.14 ms): bandwidth-bound.
    ops = step_ops("llama-3.1-8b", batch=512, context=512, embedding_rows=True)
    assert [op.name for op in ops] == ["matmuls", "attention"] and all(isinstance(op, StepOp) for op in ops)
    matmuls, attention = ops
    assert matmuls.bytes == 15_014_043_648 and matmuls.flops == 7_685_042_864_128 and matmuls.bound == "compute"
    assert attention.bytes == 34_359_738_368 and attention.flops == 137_438_953_472
    assert attention.bound == "bandwidth"
    assert matmuls.seconds == pytest.approx(7.7705e-3, rel=1e-4)
    assert attention.seconds == pytest.approx(10.2566e-3, rel=1e-4)
    step = decode_step("llama-3.1-8b", batch=512, context=512, embedding_rows=True)
    assert step.step_s_bound == pytest.approx(18.03e-3, abs=0.01e-3)
    # one intensity: (15.01 + 34.36) GB / 3.35e12 = 14.74 ms, the 3.3 ms the per-operation sum shows up
    old = one_intensity_seconds(ops, bandwidth_bytes_per_s=3.35e12, peak_flop_per_s=989e12)
    assert old == pytest.approx((15_014_043_648 + 34_359_738_368) / 3.35e12) == step.one_intensity_s
    assert round(old * 1e3, 1) == 14.7 and round(step.step_s_bound * 1e3, 1) == 18.0


def test_moe_step_has_an_experts_operation():
    # Mixtral at batch 1: every operation bandwidth-bound, so the sum is (W + KV) / BW
    s = decode_step("mixtral-8x7b", batch=1, context=1024)
    assert [op.name for op in s.ops] == ["matmuls", "experts", "attention"]
    assert all(op.bound == "bandwidth" for op in s.ops)
    assert s.ops[1].bytes == 2 * 32 * 2 * 176_160_768
    assert s.step_s_bound == pytest.approx((2 * 12_879_925_248 + 131_072 * 1024) / 3.35e12)


@pytest.mark.parametrize("model, gpu, expected", [
    # the experts turn compute-bound once all E are read and 2 k B / (E b) reaches the ridge F / BW:
    # B = F / BW x b E / (2 k), in bf16 (b = 2): E / k times the ridge
    ("deepseek-v3", "H200", 6594),       # 989 / 4.8 = 206.042 x 32 = 6,593.3
    ("mixtral-8x7b", "H100-SXM", 1181),  # 989 / 3.35 = 295.224 x 4 = 1,180.9
    ("qwen3-30b-a3b", "H100-SXM", 4724),  # 295.224 x 16 = 4,723.6
    ("gpt-oss-120b", "H100-SXM", 9448),  # 295.224 x 32 = 9,447.2
    ("llama-3.1-8b", "H100-SXM", 296),   # dense: 295.2, the embedding rows not enough to move it
])
def test_matmul_ridge_batch_counts_expert_coverage(model, gpu, expected):
    assert matmul_ridge_batch(model, gpu=gpu) == expected


def test_compute_bound_batch_moe_is_later_than_dense():
    # at one token of context the whole step crosses about where its weights' matmuls do; for Mixtral that is
    # past the ridge of the dense part (~296) as the experts are read whole only from ~20 tokens on and do
    # k / E of the work per byte
    b = compute_bound_batch("mixtral-8x7b", context=1)
    assert 296 < b <= 1181
    s = decode_step("mixtral-8x7b", batch=b, context=1)
    assert s.limit == "compute" and decode_step("mixtral-8x7b", batch=b - 1, context=1).limit == "bandwidth"


# --- a decode step's time reads the experts its batch touches: one hand-worked figure per MoE of 2026 ----------------
# Every part below is bandwidth-bound (batch far under the ridge), so the step is (W_read + KV) / BW.
def test_qwen3_moe_step_time_by_hand():
    # Qwen3-30B-A3B, 16 sequences of 4,096 tokens on an H100 (3.35 TB/s). 16 tokens touch 128 - 120^16 / 128^15 = 82.42
    # of 128 experts in each of 48 layers: 2 x 1,541,093,376 dense + ceil(2 x 48 x 4,718,592 x 82.42) = 40,418,334,188 B
    # (every expert: 61.06 GB); cache 2 x 48 layers x 4 KV heads x 128 x 2 B = 98,304 B a token x 4,096 x 16
    w = 2 * 1_541_093_376 + math.ceil(2 * 48 * 4_718_592 * (128 - Fraction(120 ** 16, 128 ** 15)))
    kv = 2 * 48 * 4 * 128 * 2 * 4096 * 16
    s = decode_step("qwen3-30b-a3b", batch=16, context=4096)
    assert (s.weight_bytes, s.kv_bytes) == (w, kv) == (40_418_334_188, 6_442_450_944)
    assert s.step_s == pytest.approx((w + kv) / 3.35e12, rel=1e-12)
    assert round(s.step_s * 1e3, 2) == 13.99                 # reading every expert: (61.06 + 6.44) GB -> 20.15 ms


def test_deepseek_v3_step_time_by_hand():
    # DeepSeek-V3 at batch 1, 4,096 tokens, on an H200 (4.8 TB/s), bf16: 17,117,633,536 dense parameters (671,026,404,352
    # less 58 MoE layers x 256 experts x 44,040,192) + 58 x 8 x 44,040,192 routed = 37.55 B active, 2 B each; MLA cache
    # (512 + 64) x 61 layers x 2 B = 70,272 B a token: (75,104,565,248 + 287,834,112) / 4.8e12 = 15.71 ms, not the
    # 1,342 GB / 4.8e12 = 279.7 ms of reading all 671 B parameters
    w = 2 * (671_026_404_352 - 58 * 256 * 44_040_192 + 58 * 8 * 44_040_192)
    kv = (512 + 64) * 61 * 2 * 4096
    s = decode_step("deepseek-v3", batch=1, context=4096, gpu="H200")
    assert (s.weight_bytes, s.kv_bytes) == (w, kv) == (75_104_565_248, 287_834_112)
    assert round(s.step_s * 1e3, 2) == round((w + kv) / 4.8e12 * 1e3, 2) == 15.71


def test_gpt_oss_step_time_by_hand():
    # gpt-oss-120b, 32 sequences of 128 tokens (every layer, sliding or full, holds all 128) on an H100, bf16: 32 tokens
    # touch 128 - 124^32 / 128^31 = 81.66 of 128 experts in 36 layers; dense 116,829,156,672 - 36 x 128 x 24,891,840 =
    # 2,127,557,952; cache 36 layers x 2 x 8 KV heads x 64 x 2 B = 73,728 B a token x 128 x 32
    w = 2 * 2_127_557_952 + math.ceil(2 * 36 * 24_891_840 * (128 - Fraction(124 ** 32, 128 ** 31)))
    kv = 36 * 2 * 8 * 64 * 2 * 128 * 32
    s = decode_step("gpt-oss-120b", batch=32, context=128)
    assert (s.weight_bytes, s.kv_bytes) == (w, kv) == (150_601_672_339, 301_989_888)
    assert round(s.step_s * 1e3, 2) == round((w + kv) / 3.35e12 * 1e3, 2) == 45.05   # all experts: 69.8 ms


def test_mixtral_compute_bound_batch_by_hand():
    # one token of context on an H100: bytes 2 (1,605,636,096 + 32 E_B 176,160,768) + 131,072 B, FLOPs
    # 2 x 12,879,925,248 B + 2 x 32 x 32 x 256 B (active parameters, one cached token); the first B whose intensity
    # reaches 989 / 3.35 = 295.2 FLOP/B, E_B = 8 (1 - 0.75^B): 1,073
    def intensity(b):
        e_b = 8 * (1 - 0.75 ** b)
        return (2 * 12_879_925_248 * b + 2 * 32 * 32 * 256 * b) / (2 * (1_605_636_096 + 32 * e_b * 176_160_768)
                                                                  + 131_072 * b)
    assert intensity(1072) < 989 / 3.35 <= intensity(1073)
    assert compute_bound_batch("mixtral-8x7b", context=1) == 1073
