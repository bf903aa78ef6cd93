"""kvlib.offload: seed 000's fetch-or-recompute chain, the FLOP convention, the rule, the break-even."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlib import load_model
from kvlib.offload import (
    OffloadError,
    attention_pairs,
    break_even_context,
    fetch_or_recompute,
    fetch_wins_rule,
    prefill_attention_flops,
    prefill_flops,
    prefill_linear_flops,
)

LLAMA_8B = load_model("llama-3.1-8b")


def test_seed_000_fetch_or_recompute():
    r = fetch_or_recompute(LLAMA_8B, 8192, num_params=8.03e9, link_bytes_per_s=50e9, gpu="H100-SXM", mfu=0.6)
    # seed 000: 8,192 x 131,072 B = 1.07 GB
    assert r.kv_bytes == 8192 * 131072 == 2**30
    assert round(r.kv_bytes / 1e9, 2) == 1.07
    # seed 000: 1.07 GB / 50 GB/s = 21.5 ms
    assert round(r.fetch_s * 1e3, 1) == 21.5
    # seed 000: 1.49e14 / (0.6 x 989e12) = 251 ms
    flops = 2 * 8.03e9 * 8192 + 2 * 32 * 32 * 128 * 8192 * 8193
    assert r.flops == pytest.approx(flops, rel=1e-12)
    assert round(r.recompute_s * 1e3) == 251
    assert r.winner == "fetch"
    assert r.speedup == pytest.approx((flops / (0.6 * 989e12)) / (2**30 / 50e9))


def test_the_attention_term_that_reproduces_seed_000():
    # seed 000 quotes 1.49e14 FLOPs for 8,192 tokens, "linear plus attention"
    linear = 2 * 8.03e9 * 8192                        # 1.316e14
    causal = 2 * 32 * 32 * 128 * 8192 * (8192 + 1)    # 2 L H D T (T + 1): QK and AV over T (T + 1) / 2 pairs
    full = 4 * 32 * 32 * 128 * 8192**2                # no causal mask
    assert f"{linear + causal:.3g}" == "1.49e+14"
    assert f"{linear:.3g}" == "1.32e+14" and f"{linear + full:.3g}" == "1.67e+14"  # the two that do not
    got_linear, got_attention = prefill_flops(LLAMA_8B, 8192, num_params=8.03e9)
    assert got_linear == linear
    assert got_attention == causal


def test_seed_000_each_prefix_hit_skips_32_tflop():
    # seed 000: 2 x 8.03e9 x 2,000 = 32 TFLOP = 65 ms of prefill at 50% MFU of 989 TFLOP/s
    flops = prefill_linear_flops(8.03e9, 2000)
    assert flops == 2 * 8.03e9 * 2000
    assert round(flops / 1e12) == 32
    assert round(flops / (0.5 * 989e12) * 1e3) == 65


@given(st.integers(1, 3000), st.one_of(st.none(), st.integers(1, 600)))
def test_attention_pairs_counts_what_each_query_sees(tokens, window):
    # query i (1-based) sees min(i, W) keys
    assert attention_pairs(tokens, window) == sum(min(i, window or i) for i in range(1, tokens + 1))


def test_mla_attention_uses_its_own_head_dims():
    # DeepSeek V3: 128 heads, q/k head dim 128 + 64 = 192, v head dim 128, 61 layers
    _, attention = prefill_flops("deepseek-v3", 100)
    assert attention == 2 * 61 * 128 * (192 + 128) * (100 * 101 // 2)
    assert attention == prefill_attention_flops(61, 128, 192, 100, v_head_dim=128)


def test_sliding_layers_cap_the_attention_term():
    # gpt-oss-20b: 12 full and 12 window-128 layers, 64 query heads of 64
    spec = load_model("gpt-oss-20b")
    _, attention = prefill_flops(spec, 1000)
    pairs_full, pairs_window = 1000 * 1001 // 2, 128 * 129 // 2 + (1000 - 128) * 128
    assert attention == 2 * 64 * 128 * (12 * pairs_full + 12 * pairs_window)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200_000), st.floats(1e9, 400e9), st.floats(0.1, 1.0))
def test_the_rule_agrees_with_the_times(tokens, link, mfu):
    r = fetch_or_recompute(LLAMA_8B, tokens, link_bytes_per_s=link, mfu=mfu)
    rule = fetch_wins_rule(r.kv_bytes / tokens, link, r.flops / tokens, mfu * 989e12)
    assert rule == (r.fetch_s < r.recompute_s)


@settings(max_examples=25, deadline=None)
@given(st.floats(0, 0.05), st.floats(1e9, 100e9))
def test_break_even_is_the_first_length_where_fetch_wins(overhead, link):
    t = break_even_context(LLAMA_8B, link_bytes_per_s=link, fetch_overhead_s=overhead)
    assert t is not None

    def faster(n):
        r = fetch_or_recompute(LLAMA_8B, n, link_bytes_per_s=link, fetch_overhead_s=overhead)
        return r.fetch_s <= r.recompute_s

    assert faster(t) and faster(2 * t) and faster(10 * t)
    assert t == 1 or not faster(t - 1)


def test_break_even_with_a_fixed_fetch_cost():
    # fetch 5 ms + T x 131,072 / 50e9 s against recompute (2 x P x T + 2 x 32 x 4096 x T (T + 1)) / (0.6 x 989e12):
    # per token 2.62 us against 27.1 us, so T ~ 0.005 / 24.4e-6 ~ 205 (the attention term moves it a token)
    p = LLAMA_8B.num_params()

    def gap(t):
        return (2 * p * t + 2 * 32 * 4096 * t * (t + 1)) / (0.6 * 989e12) - (0.005 + t * 131072 / 50e9)

    expected = next(t for t in range(1, 10_000) if gap(t) >= 0)
    assert break_even_context(LLAMA_8B, fetch_overhead_s=0.005) == expected
    assert 195 < expected < 215


def test_tensor_parallel_splits_both_sides():
    one = fetch_or_recompute("llama-3.3-70b", 4096)
    eight = fetch_or_recompute("llama-3.3-70b", 4096, tp=8)
    assert eight.kv_bytes * 8 == one.kv_bytes
    assert eight.recompute_s * 8 == pytest.approx(one.recompute_s)


@pytest.mark.parametrize("kwargs, name", [
    (dict(tokens=0), "tokens"),
    (dict(tokens=10, mfu=1.5), "mfu"),
    (dict(tokens=10, link_bytes_per_s=0), "link_bytes_per_s"),
    (dict(tokens=10, fetch_overhead_s=-1), "fetch_overhead_s"),
    (dict(tokens=10, tp=0), "tp"),
])
def test_bad_input_names_the_parameter(kwargs, name):
    with pytest.raises(OffloadError, match=name):
        fetch_or_recompute(LLAMA_8B, **kwargs)


def test_unknown_gpu_is_a_value_error():
    with pytest.raises(ValueError, match="unknown GPU"):
        fetch_or_recompute(LLAMA_8B, 10, gpu="Z80")
