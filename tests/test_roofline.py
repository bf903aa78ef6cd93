"""kvlib.roofline: seed 003 examples 4 and 5, exercise E, the ridge point and the regimes."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlib import get_gpu, load_model
from kvlib.roofline import (
    CACHE_DOMINATED,
    WEIGHT_DOMINATED,
    RooflineError,
    crossover_batch,
    crossover_context,
    decode_step,
    regime,
)

W_8B = 16.06e9  # seed 003: Llama-3-8B weights, 8.03e9 x 2 B


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
    # seed 003: "expect ~2,000-2,400 tok/s and ITL ~13-16 ms"; 3,225 x 0.6 = 1,935, x 0.75 = 2,419;
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
    # seed 001: an H100's ridge point is 295 FLOP/byte (989e12 / 3.35e12 = 295.2)
    s = decode_step("llama-3-8b", batch=8, context=1)
    assert round(s.ridge_flop_per_byte) == 295 == round(get_gpu("H100-SXM").ridge_flop_per_byte)
    # seed 001: decode intensity equals the batch while the weights dominate: 2 P B FLOPs over 2 P bytes
    assert s.arithmetic_intensity == pytest.approx(8, rel=0.01)
    assert s.regime == WEIGHT_DOMINATED


def test_compute_bound_when_the_batch_passes_the_ridge():
    s = decode_step("llama-3-8b", batch=1024, context=16)
    assert s.limit == "compute"
    assert s.step_s_bound == s.compute_s > s.bandwidth_s


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
