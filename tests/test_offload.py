"""kvlib.offload: [chains]'s fetch-or-recompute chain, the FLOP convention, the rule, the break-even."""

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
    # [chains]: 8,192 x 131,072 B = 1.07 GB
    assert r.kv_bytes == 8192 * 131072 == 2**30
    assert round(r.kv_bytes / 1e9, 2) == 1.07
    # [chains]: 1.07 GB / 50 GB/s = 21.5 ms
    assert round(r.fetch_s * 1e3, 1) == 21.5
    # [chains]: 1.49e14 / (0.6 x 989e12) = 251 ms
    flops = 2 * 8.03e9 * 8192 + 2 * 32 * 32 * 128 * 8192 * 8193
    assert r.flops == pytest.approx(flops, rel=1e-12)
    assert round(r.recompute_s * 1e3) == 251
    assert r.winner == "fetch"
    assert r.speedup == pytest.approx((flops / (0.6 * 989e12)) / (2**30 / 50e9))


def test_the_attention_term_that_reproduces_seed_000():
    # [chains] quotes 1.49e14 FLOPs for 8,192 tokens, "linear plus attention"
    linear = 2 * 8.03e9 * 8192                        # 1.316e14
    causal = 2 * 32 * 32 * 128 * 8192 * (8192 + 1)    # 2 L H D T (T + 1): QK and AV over T (T + 1) / 2 pairs
    full = 4 * 32 * 32 * 128 * 8192**2                # no causal mask
    assert f"{linear + causal:.3g}" == "1.49e+14"
    assert f"{linear:.3g}" == "1.32e+14" and f"{linear + full:.3g}" == "1.67e+14"  # the two that do not
    got_linear, got_attention = prefill_flops(LLAMA_8B, 8192, num_params=8.03e9)
    assert got_linear == linear
    assert got_attention == causal


def test_seed_000_each_prefix_hit_skips_32_tflop():
    # [chains]: 2 x 8.03e9 x 2,000 = 32 TFLOP = 65 ms of prefill at 50% MFU of 989 TFLOP/s
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
    # fetch 5 ms + T x 131,072 / 50e9 s against recompute (2 x P_m x T + 2 x 32 x 4096 x T (T + 1)) / (0.6 x 989e12),
    # P_m = 8,030,261,248 - 128,256 x 4,096 = 7,504,924,672 (the embedding lookup does no matmul):
    # per token 2.62 us against 25.3 us, so T ~ 0.005 / 22.67e-6 ~ 220.5 (the attention term moves it a token)
    p = 8_030_261_248 - 128_256 * 4096

    def gap(t):
        return (2 * p * t + 2 * 32 * 4096 * t * (t + 1)) / (0.6 * 989e12) - (0.005 + t * 131072 / 50e9)

    expected = next(t for t in range(1, 10_000) if gap(t) >= 0)
    assert break_even_context(LLAMA_8B, fetch_overhead_s=0.005) == expected
    assert expected == 220


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


# --- layer kinds and head dims, worked by hand on small configs ------------------------------------------------------
HYBRID = {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256,
          "vocab_size": 100, "intermediate_size": 512, "attention_chunk_size": 8, "sliding_window": 4,
          "layer_types": ["chunked_attention", "full_attention", "linear_attention", "sliding_attention"],
          # the linear-attention layer is a Gated DeltaNet (its widths let the parameter count read it)
          "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32,
          "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4}


def test_each_layer_kind_counts_its_own_pairs():
    # 10 tokens, head dim 256 / 4 = 64:
    #   chunked, C = 8: chunks of 8 and 2 tokens, each query sees its own chunk: 8 x 9 / 2 + 2 x 3 / 2 = 36 + 3 = 39
    #   full: 10 x 11 / 2 = 55;  linear attention: no KV, 0;  sliding, W = 4: 4 x 5 / 2 + 6 x 4 = 34
    # attention = 2 x 4 heads x (64 + 64) x (39 + 55 + 0 + 34) = 1,024 x 128 = 131,072
    _, attention = prefill_flops(HYBRID, 10)
    assert attention == 2 * 4 * (64 + 64) * (39 + 55 + 34) == 131_072


@given(st.integers(1, 3000), st.integers(1, 600))
def test_chunked_pairs_count_what_each_query_sees(tokens, chunk):
    # query i (0-based) sees the keys of its own chunk up to itself: i mod C + 1 of them
    assert attention_pairs(tokens, chunk=chunk) == sum(i % chunk + 1 for i in range(tokens))


def test_mla_head_dims_when_the_config_leaves_some_out():
    mla = {"model_type": "deepseek_v3", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 64,
           "vocab_size": 10, "intermediate_size": 64, "kv_lora_rank": 16, "qk_rope_head_dim": 8}
    # no qk_nope_head_dim: q/k head dim = 0 + 8 = 8; v_head_dim 4; 3 tokens: 3 x 4 / 2 = 6 pairs
    # 2 x 1 layer x 2 heads x (8 + 4) x 6 = 288
    assert prefill_flops(dict(mla, v_head_dim=4), 3)[1] == 2 * 2 * (8 + 4) * 6 == 288
    # no v_head_dim either: V takes the q/k head dim, 8: 2 x 2 x (8 + 8) x 6 = 384
    assert prefill_flops(mla, 3)[1] == 384


def test_linear_flops_default_to_the_active_parameters_less_the_lookup():
    # Llama 3.1 8B: 8,030,261,248 parameters (the model card's 8.03B) less the untied input table 128,256 x 4,096
    # = 525,336,576 (a lookup, no matmul): 7,504,924,672; the LM head stays
    linear, _ = prefill_flops("llama-3.1-8b", 10)
    assert linear == 2 * 7_504_924_672 * 10
    # a tied table is the LM head too: Qwen2.5-3B keeps every parameter
    tied = load_model("qwen2.5-3b")
    assert tied.tie_word_embeddings and prefill_flops(tied, 10)[0] == 2 * tied.num_params() * 10
    # a mixture of experts: its active parameters less the table (Mixtral: 12,879,925,248 - 32,000 x 4,096)
    assert prefill_flops("mixtral-8x7b", 10)[0] == 2 * (12_879_925_248 - 32_000 * 4096) * 10


# --- every field of the comparison ---------------------------------------------------------------------------------
def test_seed_000_fields_and_per_token_sides():
    r = fetch_or_recompute("llama-3.1-8b", 8192, num_params=8.03e9)
    assert (r.model, r.tokens, r.link_bytes_per_s, r.fetch_overhead_s) == ("meta-llama/Llama-3.1-8B", 8192, 50e9, 0.0)
    assert type(r.fetch_overhead_s) is float
    # H100 SXM dense bf16: 989 TFLOP/s; the default MFU 0.6 ([chains])
    assert (r.peak_flop_per_s, r.mfu) == (989e12, 0.6)
    # the rule's two sides: 131,072 B / 50e9 B/s = 2.62144 us of link per token; the FLOPs per token over 0.6 x 989e12
    assert r.bytes_per_token_over_link_s == pytest.approx(131072 / 50e9, rel=1e-12)
    flops = 2 * 8.03e9 * 8192 + 2 * 32 * 32 * 128 * 8192 * 8193
    assert r.flops_per_token_over_compute_s == pytest.approx(flops / 8192 / (0.6 * 989e12), rel=1e-12)
    assert r.linear_flops == 2 * 8.03e9 * 8192 and r.attention_flops == 2 * 32 * 32 * 128 * 8192 * 8193


def test_gpu_peak_dtype_and_overhead_are_used():
    # A100 80GB: 312 TFLOP/s dense bf16; fp8 KV halves 131,072 to 65,536 B per token: 1,000 tokens = 65,536,000 B
    r = fetch_or_recompute("llama-3.1-8b", 1000, gpu="A100-80GB", kv_dtype_bytes=1, mfu=0.5, num_params=8e9,
                           link_bytes_per_s=1e9, fetch_overhead_s=0.01)
    assert r.peak_flop_per_s == 312e12 and r.kv_bytes == 65_536_000
    # fetch: 0.01 s + 65,536,000 / 1e9 = 0.075536 s
    assert r.fetch_s == pytest.approx(0.075536, rel=1e-12)
    # recompute: (2 x 8e9 x 1,000 + 2 x 32 x 32 x 256 x 1,000 x 1,001 / 2) / (0.5 x 312e12)
    assert r.recompute_s == pytest.approx((1.6e13 + 262144 * 1000 * 1001) / 1.56e14, rel=1e-12)
    same = fetch_or_recompute("llama-3.1-8b", 1000, peak_flop_per_s=312e12, kv_dtype_bytes=1, mfu=0.5,
                              num_params=8e9, link_bytes_per_s=1e9, fetch_overhead_s=0.01)
    assert same.recompute_s == r.recompute_s and same.peak_flop_per_s == 312e12
    assert fetch_or_recompute("llama-3.1-8b", 1000, mfu=1).mfu == 1     # the whole peak is allowed


def test_tensor_parallel_divides_both_flop_terms():
    one = fetch_or_recompute("llama-3.3-70b", 4096)
    eight = fetch_or_recompute("llama-3.3-70b", 4096, tp=8)
    assert eight.linear_flops * 8 == pytest.approx(one.linear_flops)
    assert eight.attention_flops * 8 == pytest.approx(one.attention_flops)


def test_a_tie_goes_to_fetch():
    # 1 token: attention 2 x 32 x 32 x 256 x 1 pair = 524,288 FLOP; with 786,432 parameters the linear part is
    # 1,572,864: 2^21 FLOP in all, at a peak of 2^21 FLOP/s and MFU 1 -> 1 s; 131,072 B over 131,072 B/s -> 1 s
    r = fetch_or_recompute("llama-3.1-8b", 1, num_params=786_432, peak_flop_per_s=2**21, mfu=1,
                           link_bytes_per_s=131_072)
    assert r.fetch_s == r.recompute_s == 1.0
    assert r.winner == "fetch" and r.speedup == 1.0
    # [chains]'s rule is strict: the same tie is not a win
    assert fetch_wins_rule(131_072, 131_072, 2**21, 2**21) is False


def test_recompute_wins_over_a_slow_link():
    # 100 tokens over 1 MB/s: 13,107,200 B -> 13.1072 s; recompute (2 x 8e9 x 100 + 262,144 x 100 x 101) / (0.6 x 989e12)
    r = fetch_or_recompute("llama-3.1-8b", 100, num_params=8e9, link_bytes_per_s=1e6)
    recompute = (1.6e12 + 262144 * 100 * 101) / (0.6 * 989e12)
    assert r.winner == "recompute"
    assert r.speedup == pytest.approx(13.1072 / recompute, rel=1e-12)


def test_break_even_passes_every_setting_on():
    # A100 80GB at MFU 0.5: 1.56e14 FLOP/s achieved; fp8 KV (65,536 B per token) over 0.2 GB/s: 3.2768e-4 s per token;
    # 8e9 parameters. Fetch wins from the first T with 3.2768e-4 <= (1.6e10 + 262,144 (T + 1)) / 1.56e14, i.e.
    # T + 1 >= (1.56e14 x 3.2768e-4 - 1.6e10) / 262,144 = 3.511808e10 / 262,144 = 133,964.375:
    # T + 1 = 133,965, T = 133,964
    settings_ = dict(link_bytes_per_s=0.2e9, mfu=0.5, kv_dtype_bytes=1, num_params=8e9)
    assert break_even_context(LLAMA_8B, gpu="A100-80GB", **settings_) == 133_964
    assert break_even_context(LLAMA_8B, peak_flop_per_s=312e12, **settings_) == 133_964
    # the search stops at max_tokens: found when it is the break-even itself, None just below
    assert break_even_context(LLAMA_8B, gpu="A100-80GB", max_tokens=133_964, **settings_) == 133_964
    assert break_even_context(LLAMA_8B, gpu="A100-80GB", max_tokens=133_963, **settings_) is None


@pytest.mark.parametrize("call, message", [
    (lambda: fetch_or_recompute(LLAMA_8B, 0), "tokens must be positive, got 0"),
    (lambda: fetch_or_recompute(LLAMA_8B, 1.5), "tokens must be a positive integer, got 1.5"),
    (lambda: fetch_or_recompute(LLAMA_8B, True), "tokens must be a positive integer, got True"),
    (lambda: fetch_or_recompute(LLAMA_8B, 10, link_bytes_per_s="fast"),
     "link_bytes_per_s must be a positive number, got 'fast'"),
    (lambda: fetch_or_recompute(LLAMA_8B, 10, mfu=-0.5), "mfu must be positive, got -0.5"),
    (lambda: fetch_or_recompute(LLAMA_8B, 10, mfu=1.5), "mfu must be in (0, 1], got 1.5"),
    (lambda: fetch_or_recompute(LLAMA_8B, 10, fetch_overhead_s=-1), "fetch_overhead_s must be a number >= 0, got -1"),
    (lambda: fetch_or_recompute(LLAMA_8B, 10, fetch_overhead_s=True),
     "fetch_overhead_s must be a number >= 0, got True"),
    (lambda: fetch_or_recompute(LLAMA_8B, 10, fetch_overhead_s="1"),
     "fetch_overhead_s must be a number >= 0, got '1'"),
    (lambda: fetch_or_recompute(LLAMA_8B, 10, tp=2.0), "tp must be a positive integer, got 2.0"),
    (lambda: fetch_or_recompute(LLAMA_8B, 10, peak_flop_per_s=0), "peak_flop_per_s must be positive, got 0"),
    (lambda: prefill_flops(LLAMA_8B, 10, num_params=-1), "num_params must be positive, got -1"),
    (lambda: break_even_context(LLAMA_8B, max_tokens=0), "max_tokens must be positive, got 0"),
])
def test_bad_input_messages_in_full(call, message):
    with pytest.raises(OffloadError) as info:
        call()
    assert str(info.value) == message


def test_break_even_of_two_tokens():
    # 8e9 parameters at 0.6 x 989e12: 1.6e10 / 5.934e14 = 26.963 us of compute per token (the attention term adds
    # 2 x 32 x 32 x 256 x T (T + 1) / 2 FLOP, under a nanosecond here); a fetch costs 131,072 / 50e9 = 2.621 us per
    # token, so each token fetched saves 24.342 us. A fixed cost of 36.5 us is not repaid by 1 token (24.3 us) but
    # is by 2 (48.7 us): the break-even is 2 tokens
    assert break_even_context(LLAMA_8B, num_params=8e9, fetch_overhead_s=36.5e-6) == 2


@pytest.mark.parametrize("call, message", [
    (lambda: prefill_flops(LLAMA_8B, 1.5), "tokens must be a positive integer, got 1.5"),
    (lambda: break_even_context(LLAMA_8B, max_tokens=10.0), "max_tokens must be a positive integer, got 10.0"),
])
def test_token_counts_must_be_integers(call, message):
    with pytest.raises(OffloadError) as info:
        call()
    assert str(info.value) == message


def test_a_tie_at_one_token_is_a_break_even_of_one():
    # the tie above: at 1 token fetch and recompute both take 1 s, and a tie goes to fetch, so fetch wins from 1
    # (at 2 tokens recompute is 0.875 x 2 + 0.125 x 4 = 2.25 s against 2 s)
    assert break_even_context(LLAMA_8B, num_params=786_432, peak_flop_per_s=2**21, mfu=1,
                              link_bytes_per_s=131_072) == 1


def test_every_layer_of_a_sliding_model_is_windowed():
    # Mistral 7B: 32 layers, all with a 4,096-token window, 32 query heads of 128. At 5,000 tokens each head of
    # each layer has 4,096 x 4,097 / 2 + 904 x 4,096 = 8,390,656 + 3,702,784 = 12,093,440 pairs
    _, attention = prefill_flops("mistralai/Mistral-7B-v0.1", 5000)
    assert attention == 2 * 32 * 32 * (128 + 128) * 12_093_440


# --- a prefill reads the weights once: its time is at least W / BW ([corrections 05-09], ch06's roofline) ----------
def test_short_prefix_recompute_is_floored_by_the_weight_read():
    # Llama 3.1 8B: 16,060,522,496 B of bf16 weights less the unread embedding rows (128,256 - 128) x 4,096 x 2 B
    weights = 8_030_261_248 * 2 - (128_256 - 128) * 4096 * 2
    r = fetch_or_recompute(LLAMA_8B, 128, roofline=True)
    assert r.weight_bytes == weights
    assert abs(r.weight_read_s - weights / 3.35e12) < 1e-15            # 4.48 ms
    flops = 2 * 7_504_924_672 * 128 + 2 * 32 * 32 * 256 * 128 * 129 // 2
    assert abs(r.compute_s - flops / (0.6 * 989e12)) < 1e-12           # 3.25 ms
    assert r.recompute_s == r.weight_read_s > r.compute_s
    plain = fetch_or_recompute(LLAMA_8B, 128)                           # the default keeps the compute side alone
    assert plain.recompute_s == plain.compute_s == r.compute_s and not plain.roofline
    long = fetch_or_recompute(LLAMA_8B, 8192, roofline=True)            # compute-bound: the floor changes nothing
    assert long.recompute_s == long.compute_s


def test_break_even_with_the_floor():
    # 5 ms per fetch: the crossing at 220 tokens lies past the floor's end (about 0.6 x 295 = 177 tokens)
    assert break_even_context(LLAMA_8B, fetch_overhead_s=0.005, roofline=True) == 220
    # 2 GB/s: fetch wins under the floor (65.5 us a token, below 4.48 ms up to 68 tokens), loses, then wins from 91,091
    # ((65.536e-6 x 593.4e12 - 2 x 7,504,924,672) / 262,144 - 1 = 91,090.3)
    assert fetch_or_recompute(LLAMA_8B, 60, link_bytes_per_s=2e9, roofline=True).winner == "fetch"
    assert fetch_or_recompute(LLAMA_8B, 1000, link_bytes_per_s=2e9, roofline=True).winner == "recompute"
    assert break_even_context(LLAMA_8B, link_bytes_per_s=2e9, roofline=True) == 91_091


def test_recompute_of_a_short_moe_prefix_reads_only_the_experts_it_touches():
    # Qwen3-30B-A3B, 16 tokens on an H100: the linear FLOPs 2 x 3,041,867,776 x 16 (active parameters less the untied
    # input table) are 0.2 ms at any MFU here, while reading the weights the 16 tokens touch, 2 x 1,541,093,376 dense +
    # 2 x 48 x 128 (1 - (15/16)^16) x 4,718,592 expert bytes less 151,920 unread embedding rows of 2,048 x 2 B, is
    # 11.88 ms at 3.35 TB/s; every expert would be 18.04 ms
    r = fetch_or_recompute("qwen3-30b-a3b", 16, roofline=True)
    read = 2 * 1_541_093_376 + 2 * 48 * 128 * (1 - (15 / 16) ** 16) * 4_718_592 - (151_936 - 16) * 2048 * 2
    assert r.linear_flops == 2 * 3_041_867_776 * 16
    assert r.weight_bytes == pytest.approx(read, abs=1)
    assert r.recompute_s == pytest.approx(read / 3.35e12, rel=1e-9)
    assert round(r.recompute_s * 1e3, 2) == 11.88
    assert round((2 * (1_541_093_376 + 48 * 128 * 4_718_592) - (151_936 - 16) * 4096) / 3.35e12 * 1e3, 2) == 18.04
