"""The slip catalogue names each mistake by recomputing it, not from a ratio."""

import pytest

from kvcoach.slips import (GENERAL, QUANTITIES, SLIPS, Slip, base_key, diagnose, expected_value, general, matching,
                           message, ratio_text, ruled_out)
from kvlib.alloc_sim import allocator_waste
from kvlib.prefix_cache import agent_requests

LLAMA8B = dict(layers=32, kv_heads=8, head_dim=128, dtype_bytes=2, num_heads=32, hidden_size=4096)
GEMMA = dict(layers=42, kv_heads=8, head_dim=256, dtype_bytes=2, num_heads=16, hidden_size=3584)


@pytest.mark.parametrize("answer,key,ratio_text", [
    (2 * 32 * 32 * 128 * 2, "query_heads", "4x too large"),     # [build-up]: 4x on Llama-3-8B
    (32 * 8 * 128 * 2, "missing_kv_factor", "2x too small"),
    (2 * 32 * 8 * 128 * 16, "bits_not_bytes", "8x too large"),
    (131_072 / 1024, "answer_in_kib", "1024x too small"),
    (131_072 / 1000, "answer_in_kb", "1000x too small"),
    (2 * 8 * 128 * 2, "missing_layers", "32x too small"),
])
def test_bytes_per_token_slips(answer, key, ratio_text):
    d = diagnose("kv_bytes_per_token", answer, **LLAMA8B)
    assert not d.correct and d.slip.key == key
    assert d.message.startswith(ratio_text)


def test_fp8_answered_with_16_bit_bytes():
    fp8 = dict(LLAMA8B, dtype_bytes=1)
    d = diagnose("kv_bytes_per_token", 131_072, **fp8)
    assert d.slip.key == "wrong_16bit_vs_fp8" and d.message.startswith("2x too large")


def test_coinciding_slips_are_both_named():
    # at 2 bytes, dropping the K/V factor and using fp8's 1 byte give the same number
    d = diagnose("kv_bytes_per_token", 65_536, **LLAMA8B)
    assert d.slip.key == "missing_kv_factor"
    assert "K and V" in d.message and "fp8" in d.message


def test_query_heads_70b_is_8x():
    # [build-up]: "8x on Llama-3-70B"
    d = diagnose("kv_bytes_per_token", 2 * 80 * 64 * 128 * 2, layers=80, kv_heads=8, head_dim=128,
                 dtype_bytes=2, num_heads=64)
    assert d.slip.key == "query_heads" and d.message.startswith("8x too large")


def test_hidden_over_heads_gemma():
    # PROVENANCE.md gemma-2 trap: 301,056 with head_dim 3584/16 = 224
    d = diagnose("kv_bytes_per_token", 301_056, **GEMMA)
    assert d.slip.key == "hidden_over_heads" and "224" in d.message and "256" in d.message


def test_correct_and_unknown():
    assert diagnose("kv_bytes_per_token", 131_072, **LLAMA8B).correct
    d = diagnose("kv_bytes_per_token", 123_456, **LLAMA8B)
    assert not d.correct and d.slip is None and "no known slip" in d.message
    d = diagnose("kv_bytes_per_token", "131072", **LLAMA8B)
    assert not d.correct and "expected a number" in d.message


def test_mla_slips():
    v3 = dict(layers=61, latent_dim=512, rope_dim=64, dtype_bytes=2)
    assert diagnose("mla_bytes_per_token", 2 * 70_272, **v3).slip.key == "extra_factor_2"
    d = diagnose("mla_bytes_per_token", 61 * 512 * 2, **v3)
    # [chains]: forgetting the rope key understates by 11%
    assert d.slip.key == "missing_rope" and d.message.startswith("11.1% too small")


def test_concurrency_slips():
    case = dict(LLAMA8B, seq_len=8192, budget_bytes=59_900_000_000)
    assert diagnose("max_concurrency", 55, **case).correct  # [kv-math] example 1
    assert diagnose("max_concurrency", 56, **case).slip.key == "ceil_not_floor"
    assert diagnose("max_concurrency", 13, **case).slip.key == "query_heads"  # 55 // 4 ~ 13


def test_gib_gb_and_label():
    d = diagnose("bytes_to_gib", 2**30 / 1e9, n_bytes=2**30)
    assert d.slip.key == "gb_for_gib" and "7.4%" in d.message
    pool = dict(gpu_bytes=85_020_000_000, label_bytes=80_000_000_000, utilization=0.92,
                weight_bytes=16_060_000_000, other_bytes=3_000_000_000, bytes_per_token=131_072)
    wrong = int((80e9 * 0.92 - 16.06e9 - 3e9) // 131_072)
    assert diagnose("kv_pool_tokens", wrong, **pool).slip.key == "label_memory"


def test_tp_slips():
    case = dict(layers=80, kv_heads=8, head_dim=128, dtype_bytes=2, tp=8)
    assert diagnose("kv_bytes_per_token_per_gpu", 40 * 1024, **case).correct  # [kv-math]: 40 KiB
    assert diagnose("kv_bytes_per_token_per_gpu", 327_680, **case).slip.key == "total_not_per_gpu"
    rep = dict(case, tp=16)
    assert diagnose("kv_bytes_per_token_per_gpu", 327_680 / 16, **rep).slip.key == "split_replicated"
    mla = dict(layers=61, latent_dim=512, rope_dim=64, dtype_bytes=2, kv_heads=1, tp=8)
    assert diagnose("kv_bytes_per_token_per_gpu", 70_272 / 8, **mla).slip.key == "mla_split_by_tp"


def test_every_quantity_has_a_correct_path():
    cases = {
        "kv_bytes_per_token": (LLAMA8B, 131_072),
        "kv_bytes_per_sequence": (dict(LLAMA8B, seq_len=8192), 2**30),
        "kv_bytes_total": (dict(LLAMA8B, seq_len=8192, batch_size=3), 3 * 2**30),
        "max_concurrency": (dict(LLAMA8B, seq_len=8192, budget_bytes=10 * 2**30), 10),
        "mla_bytes_per_token": (dict(layers=61, latent_dim=512, rope_dim=64, dtype_bytes=2), 70_272),
        "kv_bytes_per_token_per_gpu": (dict(LLAMA8B, tp=2), 65_536),
        "bytes_to_gib": (dict(n_bytes=2**31), 2.0),
        "bytes_to_gb": (dict(n_bytes=2 * 10**9), 2.0),
        "kv_pool_tokens": (dict(gpu_bytes=2**34, utilization=1.0, weight_bytes=0, other_bytes=0,
                                bytes_per_token=2**17), 2**17),
    }
    assert set(cases) <= set(QUANTITIES)
    for quantity, (inputs, answer) in cases.items():
        assert diagnose(quantity, answer, **inputs).correct, quantity


# --- the catalogue's recomputed slips, against hand-worked values ---------------------------------------
# mutmut cannot mutate what a slip *is* (the catalogue's tables), only the arithmetic that recomputes it:
# every case below states its inputs and works each slipped figure by hand in the comments, and the whole
# list (keys in catalogue order, values, int or float) must come out exactly so.

# A small GQA geometry whose figures are easy by hand: L = 2 layers, K = 2 KV heads, D = 4, b = 2 bytes,
# H = 8 query heads, hidden 48 (hidden / H = 6, not D: the head_dim slip is visible).
# Right figure: 2 x L x K x D x b = 2 x 2 x 2 x 4 x 2 = 64 B per token.
G = dict(layers=2, kv_heads=2, head_dim=4, dtype_bytes=2, num_heads=8, hidden_size=48)
G_TOKEN_SLIPS = [
    ("query_heads", 256),                    # H instead of K: 2 x 2 x 8 x 4 x 2 = 256 = (H / K = 4) x 64
    ("missing_kv_factor", 32),               # no factor 2: 64 / 2
    ("bits_not_bytes", 512),                 # 16 bits for 2 bytes: 2 x 2 x 2 x 4 x 16
    ("fp32_bytes", 128),                     # 4 bytes: 2 x 2 x 2 x 4 x 4
    ("wrong_16bit_vs_fp8", 32),              # fp8's 1 byte: 2 x 2 x 2 x 4 x 1
    ("hidden_over_heads", 96),               # D = 48 / 8 = 6: 2 x 2 x 2 x 6 x 2
    ("missing_layers", 32),                  # one layer: 2 x 1 x 2 x 4 x 2
    ("ignored_dtype_bytes", 32),             # 1 byte
    ("ignored_dtype_bytes", 128),            # 4 bytes
    ("query_heads+missing_kv_factor", 128),  # 256 / 2
]


ISSUE_38_SLIPS = {"tp_floor_missing", "query_heads@split", "qk_head_dim_added", "wrong_16bit_vs_fp8@mla",
                  "weights_not_split@clamped", "reserve_times_tp", "reserve_times_tp@unclamped", "mtp_layer_counted",
                  "window_not_capped", "paged_floor_not_ceil", "paged_floor_not_ceil@clamped", "oracle_extra_slot",
                  "ignored_utilization@pool", "target_ms_as_seconds", "weights_not_subtracted",
                  "partial_block_rounded_up", "history_block_rounded_up",
                  # the edges of [diagnosis §6] (test_edge_slips_by_hand)
                  "budget_rounded_down", "spike_float_noise", "ceil_as_floor_plus_one"}


def units(x):
    """The four unit slips of a byte figure x: KiB, KB, GiB, GB (hand: x / 2^10, 10^3, 2^30, 10^9)."""
    return [("answer_in_kib", x / 1024), ("answer_in_kb", x / 1000), ("answer_in_gib", x / 2**30),
            ("answer_in_gb", x / 10**9)]


def scaled(slips, factor):
    return [(key, value * factor) for key, value in slips]


def assert_catalogue(quantity, inputs, expected, slips):
    """QUANTITIES[quantity] gives ``expected`` and exactly ``slips`` (keys in order, values and their type)."""
    got_expected, got = QUANTITIES[quantity](dict(inputs))
    # the slips [diagnosis] added are checked by their own tests (test_topic_slips_*), by hand
    got = [(base_key(key), value) for key, value in got if key not in ISSUE_38_SLIPS]
    assert got_expected == pytest.approx(expected, rel=1e-12) and type(got_expected) is type(expected)
    assert [key for key, _ in got] == [key for key, _ in slips]
    for (key, value), (_, want) in zip(got, slips):
        assert value == pytest.approx(want, rel=1e-12), key
        assert type(value) is type(want), key
        if type(want) is tuple:
            assert [type(x) for x in value] == [type(x) for x in want], key
    assert expected_value(quantity, **inputs) == pytest.approx(expected, rel=1e-12)
    assert diagnose(quantity, expected, **inputs).correct
    for key, _ in slips:   # the words a learner reads for each slip: every figure filled in
        words = message(key, **inputs)
        assert "{" not in words and "}" not in words and not words.endswith(".."), (key, words)


def test_query_heads_slip_is_h_over_k_times_the_right_figure():
    # Llama 3 8B: H = 32, K = 8, so counting the query heads gives H / K = 4 times 131,072 B = 524,288 B
    d = diagnose("kv_bytes_per_token", 4 * 131_072, **LLAMA8B)
    assert d.slip.key == "query_heads" and d.expected == 131_072
    assert d.message == ("4x too large: you multiplied by the query heads (num_attention_heads = 32) instead of "
                         "the KV heads (num_key_value_heads = 8).")
    # the small geometry: H / K = 8 / 2 = 4 again, 4 x 64 = 256
    assert matching("kv_bytes_per_token", 256, **G) == ("query_heads",)


def test_kv_bytes_per_token_catalogue():
    assert_catalogue("kv_bytes_per_token", G, 64, G_TOKEN_SLIPS + units(64))


def test_kv_bytes_per_token_catalogue_without_query_heads_or_hidden():
    # no num_heads / hidden_size: the query-head and head_dim slips cannot be recomputed, so none is offered
    g = dict(layers=2, kv_heads=2, head_dim=4, dtype_bytes=2)
    slips = [s for s in G_TOKEN_SLIPS if not s[0].startswith(("query_heads", "hidden_over_heads"))]
    assert_catalogue("kv_bytes_per_token", g, 64, slips + units(64))
    # H = K (MHA): counting the query heads changes nothing, so it is no slip; hidden / H = 8 / 2 and
    # 32 / 8 are 4 = D (the head_dim slip gives the right figure), and 50 / 8 is no whole width: none offered
    for extra in (dict(num_heads=2, hidden_size=8), dict(num_heads=8, hidden_size=32),
                  dict(num_heads=8, hidden_size=50)):
        got = [key for key, _ in QUANTITIES["kv_bytes_per_token"](dict(g, **extra))[1]]
        assert "hidden_over_heads" not in got
        assert ("query_heads" in got) == (extra["num_heads"] != 2)


def test_kv_bytes_per_token_catalogue_fp8_and_fp32():
    # fp8 (b = 1): 2 x 2 x 2 x 4 x 1 = 32 B; bits: 8 bytes -> 256; the 16-bit slip uses 2 bytes -> 64;
    # no fp32 slip (that one is for a 16-bit cache); other sizes 2 -> 64 and 4 -> 128
    g = dict(layers=2, kv_heads=2, head_dim=4, dtype_bytes=1)
    assert_catalogue("kv_bytes_per_token", g, 32, [
        ("missing_kv_factor", 16), ("bits_not_bytes", 256), ("wrong_16bit_vs_fp8", 64), ("missing_layers", 16),
        ("ignored_dtype_bytes", 64), ("ignored_dtype_bytes", 128)] + units(32))
    # fp32 (b = 4): 128 B; bits: 32 bytes -> 1,024; neither fp32 nor the 16-bit/fp8 slip; others 1 -> 32, 2 -> 64
    g = dict(g, dtype_bytes=4)
    assert_catalogue("kv_bytes_per_token", g, 128, [
        ("missing_kv_factor", 64), ("bits_not_bytes", 1024), ("missing_layers", 64),
        ("ignored_dtype_bytes", 32), ("ignored_dtype_bytes", 64)] + units(128))


def test_kv_bytes_per_sequence_and_total_catalogue():
    # seq_len 10: 640 B; every token slip x 10; the sequence length left out gives the per-token 64
    assert_catalogue("kv_bytes_per_sequence", dict(G, seq_len=10), 640,
                     scaled(G_TOKEN_SLIPS, 10) + [("missing_seq_len", 64)] + units(640))
    # batch 3: 1,920 B; token slips x 30; no batch -> 640; no seq_len -> 64 x 3 = 192
    assert_catalogue("kv_bytes_total", dict(G, seq_len=10, batch_size=3), 1920,
                     scaled(G_TOKEN_SLIPS, 30) + [("missing_batch", 640), ("missing_seq_len", 192)] + units(1920))


def test_max_concurrency_catalogue():
    # budget 7,000 B, 640 B per sequence: floor(10.9375) = 10 sequences.
    # token slips: floor(7000 / (v x 10)): 2560 -> 2, 320 -> 21, 5120 -> 1, 1280 -> 5, 960 -> 7
    # ceil and round of 10.9375: 11, 11; GB read as GiB: floor(7000 x 2^30 / 10^9 / 640) = floor(11.744) = 11,
    # the other way floor(7000 x 10^9 / 2^30 / 640) = floor(10.19) = 10 = the right count (dropped);
    # unfloored: 10.9375 x 1.073741824 = 11.7440...; tokens: floor(7000 / 64) = 109
    assert_catalogue("max_concurrency", dict(G, seq_len=10, budget_bytes=7000), 10, [
        ("query_heads", 2), ("missing_kv_factor", 21), ("bits_not_bytes", 1), ("fp32_bytes", 5),
        ("wrong_16bit_vs_fp8", 21), ("hidden_over_heads", 7), ("missing_layers", 21), ("ignored_dtype_bytes", 21),
        ("ignored_dtype_bytes", 5), ("query_heads+missing_kv_factor", 5), ("ceil_not_floor", 11),
        ("ceil_not_floor", 11), ("gb_for_gib", 11), ("gb_for_gib", 10.9375 * 1.073741824),
        ("tokens_not_sequences", 109)])
    # budget 6,500: floor(10.16) = 10; GB read the other way: 6500 / 1.073741824 = 6053.6 / 640 -> 9
    got = QUANTITIES["max_concurrency"](dict(G, seq_len=10, budget_bytes=6500))
    assert got[0] == 10 and 9 in [v for k, v in got[1] if base_key(k) == "gb_for_gib"]


def test_mla_bytes_per_token_catalogue():
    # L = 2, latent 8, rope 4, b = 2: L (r + rope) b = 2 x 12 x 2 = 48 B (no factor 2).
    # x2 -> 96; no rope: 2 x 8 x 2 = 32, and with the factor 2 as well 64 (both slips at once); bits:
    # 2 x 12 x 16 = 384; one layer: 24; as MHA with H = 4 heads of 6: 2 x 2 x 4 x 6 x 2 = 192
    mla = dict(layers=2, latent_dim=8, rope_dim=4, dtype_bytes=2)
    base = [("extra_factor_2", 96), ("missing_rope", 32), ("missing_rope+extra_factor_2", 64),
            ("bits_not_bytes", 384), ("missing_layers", 24)]
    assert_catalogue("mla_bytes_per_token", mla, 48, base + units(48))
    assert_catalogue("mla_bytes_per_token", dict(mla, num_heads=4, qk_head_dim=6), 48,
                     base + [("mla_as_mha", 192)] + units(48))
    # the heads without their width (or the width alone): no ordinary-attention figure
    assert_catalogue("mla_bytes_per_token", dict(mla, num_heads=4), 48, base + units(48))
    assert_catalogue("mla_bytes_per_token", dict(mla, qk_head_dim=6), 48, base + units(48))



def test_the_doubled_figure_without_the_rope_key_has_one_name_in_the_drill_and_in_ch03():
    """One MLA slip list for the drill's question and ch03's config: DeepSeek-V3 (61 layers, latent 512, RoPE
    key 64, bf16) without the RoPE key and with the factor 2 is 2 x 61 x 512 x 2 = 124,928 B, named as both
    slips at once in either quantity."""
    v3 = dict(layers=61, latent_dim=512, rope_dim=64, dtype_bytes=2, num_heads=128)
    for quantity, extra in (("mla_bytes_per_token", dict(qk_head_dim=192)),
                            ("mla_config_bytes_per_token", dict(qk_nope_head_dim=128, kv_heads=128))):
        d = diagnose(quantity, 124_928, unit="bytes", **v3, **extra)
        assert d.slip.key == "missing_rope+extra_factor_2", quantity
        assert d.message == ("1.78x too large: two slips at once: the 64-wide decoupled RoPE key is missing: MLA "
                             "caches latent (512) + rope (64) per layer. And that is twice the right figure: an MLA "
                             "layer caches one latent per token and rebuilds every head's key and value from it, so "
                             "nothing is stored twice."), quantity
        assert diagnose(quantity, 61 * 512 * 2, unit="bytes", **v3, **extra).slip.key == "missing_rope"

def test_kv_bytes_per_token_per_gpu_catalogue():
    # MLA, tp 4: the latent stays whole, 48 B on every rank; split by tp it would be 12
    mla = dict(layers=2, latent_dim=8, rope_dim=4, dtype_bytes=2, kv_heads=1, tp=4)
    assert_catalogue("kv_bytes_per_token_per_gpu", mla, 48, [("mla_split_by_tp", 12.0)] + units(48))
    # GQA, tp 2: K / tp = 1 head per GPU: 2 x 2 x 1 x 4 x 2 = 32 B; the whole model's 64 is the slip;
    # the per-GPU token slips (K = 1, H = 8 / 2 = 4, hidden 48 / 4 = 12 wide -> 2 x 2 x 1 x 12 x 2 = 96),
    # the query-head ones left out
    per_gpu = [("missing_kv_factor", 16), ("bits_not_bytes", 256), ("fp32_bytes", 64), ("wrong_16bit_vs_fp8", 16)]
    tail = [("missing_layers", 16), ("ignored_dtype_bytes", 16), ("ignored_dtype_bytes", 64)]
    assert_catalogue("kv_bytes_per_token_per_gpu", dict(G, tp=2), 32,
                     [("total_not_per_gpu", 64)] + per_gpu + [("hidden_over_heads", 96)] + tail + units(32))
    # tp 4 > K = 2: one head per GPU, replicated (32 B); splitting would give 64 / 4 = 16.0; H per GPU
    # 8 / 4 = 2, hidden 48 / 2 = 24 wide -> 2 x 2 x 1 x 24 x 2 = 192
    assert_catalogue("kv_bytes_per_token_per_gpu", dict(G, tp=4), 32,
                     [("total_not_per_gpu", 64), ("split_replicated", 16.0)] + per_gpu
                     + [("hidden_over_heads", 192)] + tail + units(32))
    # no query heads or hidden size given: the slips that need them are not offered
    bare = dict(layers=2, kv_heads=2, head_dim=4, dtype_bytes=2, tp=2)
    assert_catalogue("kv_bytes_per_token_per_gpu", bare, 32,
                     [("total_not_per_gpu", 64)] + per_gpu + tail + units(32))
    # tp 1: the whole 64 B; no TP slip and no query-head slip, the rest as for one GPU
    one = [s for s in G_TOKEN_SLIPS if not s[0].startswith("query_heads")]
    assert_catalogue("kv_bytes_per_token_per_gpu", dict(G, tp=1), 64, one + units(64))
    # H = 2 query heads on tp 4: each GPU keeps them whole (2 // min(4, 2) = 1 head... of K = 1): the
    # query-head count never drops below one per GPU, and the hidden width is 48 / 1 = 48 -> 384
    got = dict(QUANTITIES["kv_bytes_per_token_per_gpu"](dict(G, tp=4, num_heads=2))[1])
    assert got["hidden_over_heads"] == 2 * 2 * 1 * 48 * 2


def test_unit_conversion_catalogue():
    # 2^31 B = 2 GiB; read with 10^9 it is 2.147483648 "GiB"
    assert_catalogue("bytes_to_gib", dict(n_bytes=2**31), 2.0, [("gb_for_gib", 2.147483648)])
    # 2 x 10^9 B = 2 GB; read with 2^30: 2e9 / 1,073,741,824 = 1.862645149230957
    assert_catalogue("bytes_to_gb", dict(n_bytes=2 * 10**9), 2.0, [("gb_for_gib", 1.862645149230957)])


def test_kv_pool_tokens_catalogue():
    # M = 10,000 B reported, u = 0.5, W = 1,000, O = 550, 100 B per token:
    # floor(5000 - 1550) = 3450 B -> 34 tokens. Label 12,000: 6000 - 1550 = 4450 -> 44.
    # M read as GiB of a GB figure: 10,000 x 10^9 / 2^30 = 9313.2257 x 0.5 = 4656.61 - 1550 -> 3106 B -> 31.
    # ceil(3450 / 100) = 35.
    pool = dict(gpu_bytes=10_000, utilization=0.5, weight_bytes=1000, other_bytes=550, bytes_per_token=100)
    assert_catalogue("kv_pool_tokens", dict(pool, label_bytes=12_000), 34,
                     [("label_memory", 44), ("gb_for_gib", 31), ("ceil_not_floor", 35)])
    assert_catalogue("kv_pool_tokens", pool, 34, [("gb_for_gib", 31), ("ceil_not_floor", 35)])
    # a pool that divides evenly: ceil gives the right count and is dropped (5000 - 1500 = 3500 -> 35)
    assert_catalogue("kv_pool_tokens", dict(pool, other_bytes=500), 35, [("gb_for_gib", 31)])


def test_block_waste_catalogue():
    # 3 sequences, blocks of 4: 3 x (4 - 1) / 2 = 4.5 slots; bs / 2 each: 3 x 4 / 2 = 6; worst case
    # 3 x 3 = 9; one sequence: 3 / 2 = 1.5; floor division per sequence 3 x (3 // 2) = 3, on the total 9 // 2 = 4
    assert_catalogue("block_waste_tokens", dict(num_seqs=3, block_size=4), 4.5,
                     [("block_size_not_minus_one", 6), ("worst_case_waste", 9), ("one_sequence_waste", 1.5),
                      ("half_floored", 3), ("half_floored", 4)])


def test_pool_tokens_catalogue():
    # 1,000 B at 64 B per token: floor(15.625) = 15; each token slip floor(1000 / v):
    # 256 -> 3, 32 -> 31, 512 -> 1, 128 -> 7, 96 -> 10; ceil/round 16, 16;
    # GB as GiB: floor(1000 x 1.073741824 / 64) = floor(16.78) = 16, the other way floor(931.32 / 64) = 14
    assert_catalogue("pool_tokens", dict(G, budget_bytes=1000), 15, [
        ("query_heads", 3), ("missing_kv_factor", 31), ("bits_not_bytes", 1), ("fp32_bytes", 7),
        ("wrong_16bit_vs_fp8", 31), ("hidden_over_heads", 10), ("missing_layers", 31), ("ignored_dtype_bytes", 31),
        ("ignored_dtype_bytes", 7), ("query_heads+missing_kv_factor", 7), ("ceil_not_floor", 16),
        ("ceil_not_floor", 16), ("gb_for_gib", 16), ("gb_for_gib", 14)])


def test_crossover_context_catalogue():
    # W = 6,400 B, batch 2, 64 B per token: 6400 / 64 / 2 = 50 tokens of context.
    # token slips 6400 / v / 2: 256 -> 12.5, 32 -> 100, 512 -> 6.25, 128 -> 25, 96 -> 33.33;
    # not divided by the batch: 100; GB/GiB: 50 x 1.073741824 and 50 / 1.073741824
    assert_catalogue("crossover_context", dict(G, weight_bytes=6400, batch_size=2), 50.0, [
        ("query_heads", 12.5), ("missing_kv_factor", 100.0), ("bits_not_bytes", 6.25), ("fp32_bytes", 25.0),
        ("wrong_16bit_vs_fp8", 100.0), ("hidden_over_heads", 6400 / 96 / 2), ("missing_layers", 100.0),
        ("ignored_dtype_bytes", 100.0), ("ignored_dtype_bytes", 25.0), ("query_heads+missing_kv_factor", 25.0),
        ("crossover_not_divided", 100.0), ("gb_for_gib", 53.6870912), ("gb_for_gib", 50 / 1.073741824)])


def test_decode_step_ms_catalogue():
    # W = 6,400 B, T = 10, B = 2, BW = 1,000 B/s, 64 B per token: (6400 + 64 x 10 x 2) / 1000 s = 7,680 ms.
    # token slips: 6400 + 20 v ms: 256 -> 11,520, 32 -> 7,040, 512 -> 16,640, 128 -> 8,960, 96 -> 8,320;
    # KV only: 1,280 ms; weights only: 6,400 ms; no batch: 6400 + 640 = 7,040; no seq_len: 6400 + 128 = 6,528;
    # seconds: 7.68
    assert_catalogue("decode_step_ms", dict(G, weight_bytes=6400, seq_len=10, batch_size=2,
                                            bandwidth_bytes_per_s=1000), 7680.0, [
        ("query_heads", 11520.0), ("missing_kv_factor", 7040.0), ("bits_not_bytes", 16640.0), ("fp32_bytes", 8960.0),
        ("wrong_16bit_vs_fp8", 7040.0), ("hidden_over_heads", 8320.0), ("missing_layers", 7040.0),
        ("ignored_dtype_bytes", 7040.0), ("ignored_dtype_bytes", 8960.0), ("query_heads+missing_kv_factor", 8960.0),
        ("kv_only_step", 1280.0), ("weights_only_step", 6400.0), ("missing_batch", 7040.0),
        ("missing_seq_len", 6528.0), ("seconds_for_ms", 7.68)])


def test_nodes_for_memory_catalogue():
    # tp 2: one KV head per GPU, 32 B per token per GPU, 320 B per 10-token sequence; 10 users.
    # pool 1,250 B per GPU: floor(1250 / 320) = 3 per node -> ceil(10 / 3) = 4 nodes.
    # whole-model 64 B: floor(1250 / 640) = 1 -> 10 nodes. Per-GPU token slips (K = 1, H = 8 / 2 = 4, hidden
    # 48 / 4 = 12 wide): 16 B -> floor(1250 / 160) = 7 -> 2 nodes; 256 B -> 0 per node (dropped: no count);
    # 64 B -> 10; 96 B -> floor(1250 / 960) = 1 -> 10. Floor of the nodes: 10 // 3 = 3; one ceil of the
    # whole: ceil(10 x 320 / 1250) = ceil(2.56) = 3; GB as GiB: floor(1342.18 / 320) = 4 -> 3 nodes,
    # the other way floor(1164.15 / 320) = 3 -> 4 = right (dropped)
    case = dict(G, tp=2, users=10, seq_len=10, pool_bytes_per_gpu=1250)
    assert_catalogue("nodes_for_memory", case, 4, [
        ("total_not_per_gpu", 10), ("missing_kv_factor", 2), ("fp32_bytes", 10), ("wrong_16bit_vs_fp8", 2),
        ("hidden_over_heads", 10), ("missing_layers", 2), ("ignored_dtype_bytes", 2), ("ignored_dtype_bytes", 10),
        ("floor_nodes", 3), ("ceil_not_floor", 3), ("gb_for_gib", 3)])
    # pool 1,000 B: still 3 per node, 4 nodes; 1000 / 160 = 6 -> 2; 1000 / 960 = 1 -> 10; ceil(3200 / 1000) = 4
    # (right, dropped); GB as GiB floor(1073.7 / 320) = 3 -> 4 (dropped); the other way floor(931.3 / 320) = 2
    # -> 5 nodes
    # tp 16 > H = 8: one query head per GPU all the same (8 // 16 = 0 -> 1), so the head_dim slip reads
    # hidden 48 / 1 = 48 wide: 2 x 2 x 1 x 48 x 2 = 384 B, 3,840 per sequence; pool 5,000: floor(5000 / 320)
    # = 15 per node -> 1 node right, floor(5000 / 3840) = 1 -> 10 nodes with the slip
    wide = QUANTITIES["nodes_for_memory"](dict(case, tp=16, pool_bytes_per_gpu=5000))
    assert wide[0] == 1 and dict(wide[1])["hidden_over_heads"] == 10
    # H = 10 over tp 4: 10 // 4 = 2 whole query heads a GPU, so hidden 48 / 2 = 24 wide: 2 x 2 x 1 x 24 x 2 =
    # 192 B, 1,920 per sequence -> floor(5000 / 1920) = 2 per node -> 5 nodes
    odd = QUANTITIES["nodes_for_memory"](dict(case, num_heads=10, tp=4, pool_bytes_per_gpu=5000))
    assert odd[0] == 1 and dict(odd[1])["hidden_over_heads"] == 5
    # no query heads given: no head_dim slip (it needs them), the rest as in the first case
    bare = {k: v for k, v in case.items() if k != "num_heads"}
    got = QUANTITIES["nodes_for_memory"](bare)
    assert got[0] == 4 and "hidden_over_heads" not in dict(got[1]) and dict(got[1])["missing_kv_factor"] == 2
    assert_catalogue("nodes_for_memory", dict(case, pool_bytes_per_gpu=1000), 4, [
        ("total_not_per_gpu", 10), ("missing_kv_factor", 2), ("fp32_bytes", 10), ("wrong_16bit_vs_fp8", 2),
        ("hidden_over_heads", 10), ("missing_layers", 2), ("ignored_dtype_bytes", 2), ("ignored_dtype_bytes", 10),
        ("floor_nodes", 3), ("gb_for_gib", 5)])


def test_max_concurrency_per_gpu_catalogue():
    # tp 2, M = 2,260 B as CUDA reports it, W = 600 B (300 per GPU), reserve 100, 10-token sequences.
    # budget 2260 - 300 - 100 = 1,860 B; one KV head per GPU: 32 B per token, 320 B per sequence -> 5.
    # whole W: 2260 - 600 - 100 = 1,560 -> 4; whole-model 64 B per token: floor(1860 / 640) = 2, both: 2;
    # query heads split: 8 / 2 = 4 per GPU, 2 x 2 x 4 x 4 x 2 = 128 B -> floor(1860 / 1280) = 1;
    # per-GPU token slips: 16 B -> 11, 256 B -> 0, 64 B -> 2; ceil/round of 5.8125: 6, 6;
    # tokens: floor(1860 / 32) = 58; GB as GiB: floor(1997.16 / 320) = 6, the other way floor(1732.3 / 320) = 5
    # (right, dropped)
    case = dict(G, tp=2, seq_len=10, cuda_memory_bytes=2260, weight_bytes=600, reserve_bytes=100)
    assert_catalogue("max_concurrency_per_gpu", case, 5, [
        ("weights_not_split", 4), ("total_not_per_gpu", 2), ("weights_not_split+total_not_per_gpu", 2),
        ("query_heads", 1), ("missing_kv_factor", 11), ("bits_not_bytes", 0), ("fp32_bytes", 2),
        ("wrong_16bit_vs_fp8", 11), ("missing_layers", 11), ("ignored_dtype_bytes", 11), ("ignored_dtype_bytes", 2),
        ("ceil_not_floor", 6), ("ceil_not_floor", 6), ("tokens_not_sequences", 58), ("gb_for_gib", 6)])
    # M = 2,100: budget 1,700 -> 5; GB read the other way: 1700 / 1.0737 = 1583.3 / 320 -> 4 (the first way
    # 1825.4 / 320 -> 5, right, dropped)
    got = QUANTITIES["max_concurrency_per_gpu"](dict(case, cuda_memory_bytes=2100))
    assert got[0] == 5 and [v for k, v in got[1] if base_key(k) == "gb_for_gib"] == [4]
    # M = 2,500: budget 2,100 -> 6; whole W and the whole model's KV: (2500 - 600 - 100) / 640 = 2.8 -> 2
    got = QUANTITIES["max_concurrency_per_gpu"](dict(case, cuda_memory_bytes=2500))
    assert got[0] == 6 and dict(got[1])["weights_not_split+total_not_per_gpu"] == 2
    # tp 4 > K = 2: W / 4 = 150, budget 2260 - 150 - 100 = 2,010; splitting the replicated heads:
    # 64 / 4 = 16 B per token -> floor(2010 / 160) = 12
    got = dict(QUANTITIES["max_concurrency_per_gpu"](dict(case, tp=4))[1])
    assert got["split_replicated"] == 12
    # no query heads given, or as many as KV heads: no query-head slip
    for heads in (dict(num_heads=None), dict(num_heads=2)):
        got = [key for key, _ in QUANTITIES["max_concurrency_per_gpu"](dict(case, **heads))[1]]
        assert "query_heads" not in got and "weights_not_split" in got
    # tp 1: no TP slips at all
    got = [key for key, _ in QUANTITIES["max_concurrency_per_gpu"](dict(case, tp=1))[1]]
    assert not {"weights_not_split", "total_not_per_gpu", "split_replicated"} & set(got)


# An MLA geometry: L = 2, latent r = 8, rope 4, b = 2: L (r + rope) b = 2 x 12 x 2 = 48 B per token.
MLA = dict(layers=2, latent_dim=8, rope_dim=4, dtype_bytes=2)
MLA_BASE = [("extra_factor_2", 96),                  # 2 x 48
            ("missing_rope", 32),                    # 2 x 8 x 2
            ("missing_rope+extra_factor_2", 64),     # 2 x 32
            ("bits_not_bytes", 384),                 # 2 x 12 x 16
            ("missing_layers", 24)]                  # 1 x 12 x 2
MLA_DTYPES = [("ignored_dtype_bytes", 24), ("ignored_dtype_bytes", 96)]   # 2 x 12 x 1, 2 x 12 x 4


def test_mla_config_catalogue():
    # a config with every field: nope 6 (not the rope 4): 2 x (8 + 6) x 2 = 56; q_lora_rank 12:
    # 2 x (12 + 4) x 2 = 64; as ordinary attention 2 x 2 x h x w x 2 = 8 h w for h in {K = 1, H = 4} and
    # w in {rope 4, v_head_dim 6, hidden / H = 32 / 4 = 8, nope + rope 10, head_dim 16}
    full = dict(MLA, qk_nope_head_dim=6, q_lora_rank=12, kv_heads=1, num_heads=4, v_head_dim=6, hidden_size=32,
                head_dim_field=16)
    mha = [("mla_as_mha", 8 * h * w) for h in (1, 4) for w in (4, 6, 8, 10, 16)]
    assert_catalogue("mla_config_bytes_per_token", full, 48,
                     MLA_BASE + [("nope_for_rope", 56), ("query_latent", 64)] + mha + MLA_DTYPES + units(48))
    # only H = 4: the one width is the rope key's 4 (no nope: 0 + 4) -> 8 x 4 x 4 = 128
    assert_catalogue("mla_config_bytes_per_token", dict(MLA, num_heads=4), 48,
                     MLA_BASE + [("mla_as_mha", 128)] + MLA_DTYPES + units(48))
    # nope = rope and q_lora_rank = kv_lora_rank: neither slip changes the figure, so none is offered;
    # no heads: no ordinary-attention figure
    assert_catalogue("mla_config_bytes_per_token", dict(MLA, qk_nope_head_dim=4, q_lora_rank=8), 48,
                     MLA_BASE + MLA_DTYPES + units(48))
    # a hidden size without a head count gives no width: K = 1 head of the rope's 4 -> 8 x 1 x 4 = 32
    assert_catalogue("mla_config_bytes_per_token", dict(MLA, kv_heads=1, hidden_size=32), 48,
                     MLA_BASE + [("mla_as_mha", 32)] + MLA_DTYPES + units(48))
    # hidden 30 is no whole multiple of 4 heads: no width from it (only the rope's 4)
    assert_catalogue("mla_config_bytes_per_token", dict(MLA, num_heads=4, hidden_size=30), 48,
                     MLA_BASE + [("mla_as_mha", 128)] + MLA_DTYPES + units(48))


def test_config_kv_bytes_per_token_per_gpu_catalogue():
    # no latent: the GQA rule (as kv_bytes_per_token_per_gpu, tp 2: 32 B)
    assert QUANTITIES["config_kv_bytes_per_token_per_gpu"](dict(G, tp=2)) == \
        QUANTITIES["kv_bytes_per_token_per_gpu"](dict(G, tp=2))
    assert expected_value("config_kv_bytes_per_token_per_gpu", **G, tp=2) == 32
    # MLA on tp 2: 48 B on every rank; split 48 / 2 = 24.0; the config slips but ordinary attention;
    # ordinary attention (H = 4, width 4: 128) split over the ranks 64.0, or not 128; the two slips
    # that can also be split: 96 / 2 = 48.0 and 32 / 2 = 16.0
    assert_catalogue("config_kv_bytes_per_token_per_gpu", dict(MLA, num_heads=4, tp=2), 48,
                     [("mla_split_by_tp", 24.0)] + MLA_BASE + MLA_DTYPES
                     + [("mla_as_mha", 64.0), ("mla_as_mha", 128),
                        ("extra_factor_2+mla_split_by_tp", 48.0), ("missing_rope+mla_split_by_tp", 16.0)] + units(48))
    # tp 1: nothing to split
    assert_catalogue("config_kv_bytes_per_token_per_gpu", dict(MLA, num_heads=4, tp=1), 48,
                     MLA_BASE + MLA_DTYPES + [("mla_as_mha", 128.0), ("mla_as_mha", 128)] + units(48))


def test_pool_tokens_reported_catalogue():
    # as test_kv_pool_tokens_catalogue: 3,450 B -> 34 tokens; label 44; 10^9 / 2^30 -> 31; the other way
    # 10,000 x 1.073741824 x 0.5 = 5368.7 - 1550 -> 3818 B -> 38; no utilization: 10000 - 1550 = 8450 -> 84;
    # nothing else subtracted: 5000 - 1000 = 4000 -> 40; u after the weights: (10000 - 1000 - 550) x 0.5 = 4225
    # -> 42, (10000 - 1000) x 0.5 - 550 = 3950 -> 39; ceil(34.5) = 35
    pool = dict(gpu_bytes=10_000, utilization=0.5, weight_bytes=1000, other_bytes=550, bytes_per_token=100)
    tail = [("gb_for_gib", 31), ("gb_for_gib", 38), ("ignored_utilization", 84), ("ignored_other_bytes", 40),
            ("utilization_after_weights", 42), ("utilization_after_weights", 39), ("ceil_not_floor", 35)]
    assert_catalogue("pool_tokens_reported", dict(pool, label_bytes=12_000), 34, [("label_memory", 44)] + tail)
    assert_catalogue("pool_tokens_reported", pool, 34, tail)
    # round(34.5) = 34 (to even) is the floor itself, so it is dropped above; O = 520: 3,480 / 100 = 34.8, which
    # round() and the ceiling both make 35
    got = dict(QUANTITIES["pool_tokens_reported"](dict(pool, other_bytes=520))[1])
    assert got["round_for_floor"] == got["ceil_not_floor"] == 35


def test_hybrid_kv_bytes_per_sequence_catalogue():
    # 1 full + 3 sliding layers, K = 2, D = 4, b = 2: 32 B per layer and token; 100 tokens, window 10:
    # 32 x (1 x 100 + 3 x 10) = 4,160 B. Windowed at full length: 32 x 400 = 12,800; sliding dropped:
    # 32 x 100 = 3,200; all windowed: 32 x 40 = 1,280; no factor 2: 2,080; H = 8: 128 x 130 = 16,640;
    # 1 byte: 16 x 130 = 2,080; 4 bytes: 64 x 130 = 8,320; the window taken as w - 1 = 9: 32 x (100 + 27) = 4,064
    case = dict(full_layers=1, sliding_layers=3, kv_heads=2, head_dim=4, dtype_bytes=2, seq_len=100,
                sliding_window=10, num_heads=8)
    assert_catalogue("hybrid_kv_bytes_per_sequence", case, 4160, [
        ("windowed_as_full", 12800), ("window_minus_one", 4064), ("sliding_layers_dropped", 3200), ("all_layers_windowed", 1280),
        ("missing_kv_factor", 2080), ("query_heads", 16640), ("ignored_dtype_bytes", 2080),
        ("ignored_dtype_bytes", 8320)] + units(4160))
    # a sequence shorter than the window (5 tokens, H = K): every layer holds all 5, 32 x 4 x 5 = 640; counting
    # the window layers at full length or capping every layer gives the same 640 (no slip); dropping the
    # sliding layers: 32 x 5 = 160
    short = dict(case, seq_len=5, num_heads=2)
    no_h = {k: v for k, v in case.items() if k != "num_heads"}
    assert "query_heads" not in dict(QUANTITIES["hybrid_kv_bytes_per_sequence"](no_h)[1])
    assert_catalogue("hybrid_kv_bytes_per_sequence", short, 640, [
        ("sliding_layers_dropped", 160), ("missing_kv_factor", 320), ("ignored_dtype_bytes", 320),
        ("ignored_dtype_bytes", 1280)] + units(640))


def test_fp8_pool_tokens_catalogue():
    # fp8, L = 2, K = 2, D = 4: 32 B per token, blocks of 4 tokens: 128 B; 1,080 B: 8 blocks -> 32 tokens.
    # 2 bytes: 256 B blocks -> 4 -> 16; tokens not blocks: floor(1080 / 32) = 33; blocks: 8;
    # no factor 2: 64 B blocks -> 16 -> 64; one layer: the same 64; GB as GiB: 1080 / 1.0737 = 1005.8 B ->
    # 7 blocks -> 28, 1080 x 1.0737 = 1159.6 B -> 9 -> 36; H = 8: 512 B blocks -> 2 -> 8
    case = dict(available_bytes=1080, block_size=4, layers=2, kv_heads=2, head_dim=4, num_heads=8)
    assert_catalogue("fp8_pool_tokens", case, 32, [
        ("wrong_16bit_vs_fp8", 16), ("tokens_not_blocks", 33), ("answer_in_blocks", 8), ("missing_kv_factor", 64),
        ("missing_layers", 64), ("gb_for_gib", 28), ("gb_for_gib", 36), ("query_heads", 8)])
    # no query heads given (or as many as KV heads): no query-head slip
    for heads in (dict(num_heads=None), dict(num_heads=2)):
        got = QUANTITIES["fp8_pool_tokens"](dict(case, **heads))
        assert got[0] == 32 and "query_heads" not in dict(got[1])


def test_allocator_waste_catalogue():
    # requests (11 prompt, 6 out) and (5, 3), blocks of 4, max_seq_len 20; at admission they hold 12 and 6.
    reqs = [(11, 6), (5, 3)]
    # max reservation: (20 - 12) + (20 - 6) = 22; tokens held 18; allocated 22 + 18 = 40; prompt alone:
    # (20 - 11) + (20 - 5) = 24, and the same slip made on the prompt (prompt - 1 everywhere) gives
    # (20 - 10 - 1) + (20 - 4 - 1) = 24 too; reservation not counted: (20 - 17) + (20 - 8) = 15
    assert_catalogue("allocator_waste", dict(requests=reqs, policy="max_reservation", block_size=4, max_seq_len=20),
                     22, [("tokens_not_waste", 18), ("allocated_not_waste", 40), ("prompt_without_first_token", 24),
                          ("prompt_without_first_token", 24), ("reservation_ignored", 15)])
    # oracle: (17 - 12) + (8 - 6) = 7; allocated 25; prompt alone (17 - 11) + (8 - 5) = 9; no reservation: 0;
    # prompt - 1 everywhere: (16 - 11) + (7 - 5) = 7, the right waste (so it is not listed)
    assert_catalogue("allocator_waste", dict(requests=reqs, policy="oracle", block_size=4, max_seq_len=20),
                     7, [("tokens_not_waste", 18), ("allocated_not_waste", 25), ("prompt_without_first_token", 9),
                         ("reservation_ignored", 0)])
    # paged: 12 is 3 whole blocks (0 empty), 6 needs 2 blocks (2 empty): 2; allocated 20; prompt alone:
    # 11 -> 1 empty, 5 -> 3 empty: 4 (and 4 again, prompt - 1 everywhere); a whole empty block for the full one:
    # 4 + 2 = 6
    assert_catalogue("allocator_waste", dict(requests=reqs, policy="paged", block_size=4, max_seq_len=20),
                     2, [("tokens_not_waste", 18), ("allocated_not_waste", 20), ("prompt_without_first_token", 4),
                         ("prompt_without_first_token", 4), ("paged_whole_last_block", 6)])
    assert allocator_waste(reqs, "paged", 4, 20, held_extra=0) == 4
    assert allocator_waste(reqs, "max_reservation", 4, 20, count_reservation=False) == 15


def test_crossover_context_tokens_catalogue():
    # W = 6,400 B, batch 3, 64 B per token: 6400 / 192 = 33.3 -> the first whole context is 34.
    # token slips ceil(6400 / (3 v)): 256 -> 8.3 -> 9, 32 -> 66.7 -> 67, 512 -> 4.2 -> 5, 128 -> 16.7 -> 17,
    # 96 -> 22.2 -> 23; floor and round of 33.3: 33, 33; not divided: 100.0; multiplied: 300.0
    assert_catalogue("crossover_context_tokens", dict(G, weight_bytes=6400, batch_size=3), 34, [
        ("query_heads", 9), ("missing_kv_factor", 67), ("bits_not_bytes", 5), ("fp32_bytes", 17),
        ("wrong_16bit_vs_fp8", 67), ("hidden_over_heads", 23), ("missing_layers", 67), ("ignored_dtype_bytes", 67),
        ("ignored_dtype_bytes", 17), ("query_heads+missing_kv_factor", 17), ("crossover_rounded_down", 33),
        ("crossover_rounded_down", 33), ("crossover_not_divided", 100.0), ("batch_multiplied", 300.0)])


def test_decode_tokens_per_s_catalogue():
    # the decode step of test_decode_step_ms_catalogue (7.68 s), efficiency 0.5, batch 2:
    # 2 x 0.5 / 7.68 tokens/s; token slips 1 / ((6400 + 20 v) / 1000); no efficiency 2 / 7.68;
    # inverted 2 / (7.68 x 0.5); one sequence 0.5 / 7.68; KV only 1 / 1.28; weights only 1 / 6.4;
    # no seq_len 1 / 6.528
    case = dict(G, weight_bytes=6400, seq_len=10, batch_size=2, bandwidth_bytes_per_s=1000, efficiency=0.5)
    assert_catalogue("decode_tokens_per_s", case, 1 / 7.68, [
        ("query_heads", 1 / 11.52), ("missing_kv_factor", 1 / 7.04), ("bits_not_bytes", 1 / 16.64),
        ("fp32_bytes", 1 / 8.96), ("wrong_16bit_vs_fp8", 1 / 7.04), ("hidden_over_heads", 1 / 8.32),
        ("missing_layers", 1 / 7.04), ("ignored_dtype_bytes", 1 / 7.04), ("ignored_dtype_bytes", 1 / 8.96),
        ("query_heads+missing_kv_factor", 1 / 8.96), ("ignored_efficiency", 2 / 7.68),
        ("efficiency_inverted", 2 / 3.84),
        ("per_sequence_rate", 0.5 / 7.68), ("kv_only_step", 1 / 1.28), ("weights_only_step", 1 / 6.4),
        ("missing_seq_len", 1 / 6.528)])


def test_kv_bytes_per_sequence_per_gpu_catalogue():
    # tp 2, 10 tokens: 32 B per token per GPU -> 320 B; the per-token slips of tp 2 x 10 (units left out),
    # no seq_len -> 32, then the units of 320
    per_token = [("total_not_per_gpu", 64), ("missing_kv_factor", 16), ("bits_not_bytes", 256), ("fp32_bytes", 64),
                 ("wrong_16bit_vs_fp8", 16), ("hidden_over_heads", 96), ("missing_layers", 16),
                 ("ignored_dtype_bytes", 16), ("ignored_dtype_bytes", 64)]
    assert_catalogue("kv_bytes_per_sequence_per_gpu", dict(G, tp=2, seq_len=10), 320,
                     scaled(per_token, 10) + [("missing_seq_len", 32)] + units(320))


def test_sequences_per_gpu_by_memory_catalogue():
    # M = 10,001 B, u = 0.5: ceil(5000.5) = 5,001; W = 1,001 over tp 2: ceil(500.5) = 501; O = 500;
    # 300 B per sequence per GPU: (5001 - 501 - 500) / 300 = 13.3 -> 13.
    # whole W: 3500 / 300 -> 11; u = 1: 9000 / 300 = 30; no O: 4500 / 300 = 15; ceil 14 (round 13: dropped);
    # M x 10^9 / 2^30 = 9314.16 x 0.5 -> 4658 - 1001 = 3657 -> 12; M x 2^30 / 10^9 = 10738.49 x 0.5 -> 5370
    # - 1001 = 4369 -> 14; the label 12,000: 6000 - 1001 = 4999 -> 16; the whole model's KV (x tp = 2 for
    # K = 2 split over 2): 4000 / 600 -> 6
    case = dict(gpu_bytes=10_001, utilization=0.5, weight_bytes=1001, other_bytes=500, tp=2,
                kv_bytes_per_sequence_per_gpu=300, kv_heads=2)
    assert_catalogue("sequences_per_gpu_by_memory", dict(case, label_bytes=12_000), 13, [
        ("weights_not_split", 11), ("no_utilization", 30), ("missing_overhead", 15), ("ceil_not_floor", 14),
        ("gb_for_gib", 12), ("gb_for_gib", 14), ("label_memory", 16), ("total_not_per_gpu", 6)])
    # the ceiling of a pool that is one byte past 13 sequences: M = 9,803 B, ceil(4901.5) = 4,902 - 501 - 500
    # = 3,901 B = 13 x 300 + 1 -> 13 fit, ceil 14 (round 13: dropped); had the budget been floored
    # (4,901 B: 3,900 = 13 x 300) the ceiling would be the right 13
    got = QUANTITIES["sequences_per_gpu_by_memory"](dict(case, gpu_bytes=9803))
    assert got[0] == 13 and [v for k, v in got[1] if base_key(k) == "ceil_not_floor"] == [14]
    # O = 350: 4,150 / 300 = 13.83 -> 13; ceil and round both 14
    got = QUANTITIES["sequences_per_gpu_by_memory"](dict(case, other_bytes=350))
    assert got[0] == 13 and [v for k, v in got[1] if base_key(k) == "ceil_not_floor"] == [14, 14]
    # tp 4 > K = 2: each GPU holds one of the 2 heads, so the model's KV is 2 (not 4) x the GPU's:
    # W / 4 = ceil(250.25) = 251: (5001 - 251 - 500) / 600 = 7.08 -> 7
    got = dict(QUANTITIES["sequences_per_gpu_by_memory"](dict(case, tp=4))[1])
    assert got["total_not_per_gpu"] == 7
    # no kv_heads given: the split is tp itself: 4250 / (300 x 4) = 3.5 -> 3
    no_k = {k: v for k, v in case.items() if k != "kv_heads"}
    assert dict(QUANTITIES["sequences_per_gpu_by_memory"](dict(no_k, tp=4))[1])["total_not_per_gpu"] == 3
    # an uneven split (9 KV heads over tp 2: 4 a GPU as kv_heads_per_gpu counts them): the whole model's cache is
    # 9 / 4 of one GPU's: 400 B x 2.25 = 900 B -> 4000 / 900 = 4.4 -> 4 (4000 / 400 = 10 right)
    got = QUANTITIES["sequences_per_gpu_by_memory"](dict(case, kv_heads=9, kv_bytes_per_sequence_per_gpu=400))
    assert got[0] == 10 and dict(got[1])["total_not_per_gpu"] == 4
    # tp 1: whole W is the right W (dropped), no TP slip
    got = [key for key, _ in QUANTITIES["sequences_per_gpu_by_memory"](dict(case, tp=1))[1]]
    assert "weights_not_split" not in got and "total_not_per_gpu" not in got


ITL = dict(weight_bytes=1000, tp=2, tp_overhead=0.25, efficiency=0.5, kv_bytes_per_sequence_per_gpu=100,
           bandwidth_bytes_per_s=1000)


def test_itl_ms_catalogue():
    # W / tp = 500 B, 3 sequences of 100 B, BW 1,000 B/s, slowdown (1 + 0.25) / 0.5 = 2.5:
    # (500 + 300) / 1000 x 2.5 x 1000 = 2,000 ms. Whole W: 1300 x 2.5 = 3,250; bound only: 800;
    # no efficiency (x 1.25): 1,000; efficiency multiplied (x 0.625): 500; model's KV (K = tp = 2 by default):
    # (500 + 600) x 2.5 = 2,750; no TP overhead (x 2): 1,600; KV only 300 x 2.5 = 750; weights only 1,250;
    # seconds 2.0
    assert_catalogue("itl_ms", dict(ITL, sequences=3), 2000.0, [
        ("weights_not_split", 3250.0), ("bound_only", 800.0), ("no_efficiency", 1000.0),
        ("efficiency_multiplied", 500.0), ("total_not_per_gpu", 2750.0), ("no_tp_overhead", 1600.0),
        ("kv_only_step", 750.0), ("weights_only_step", 1250.0), ("seconds_for_ms", 2.0)])
    # W = 1,001 B over tp 2: the busier GPU holds ceil(500.5) = 501: (501 + 300) x 2.5 = 2,002.5 ms
    assert expected_value("itl_ms", **dict(ITL, weight_bytes=1001, sequences=3)) == pytest.approx(2002.5)
    # tp 1: W = 1000, slowdown 1 / 0.5 = 2: 2,600 ms; whole W is the same 2,600; the overhead added at tp 1
    # (x 2.5): 3,250; KV only 600; weights only 2,000
    assert_catalogue("itl_ms", dict(ITL, sequences=3, tp=1), 2600.0, [
        ("weights_not_split", 2600.0), ("bound_only", 1300.0), ("no_efficiency", 1300.0),
        ("efficiency_multiplied", 650.0), ("tp_overhead_at_tp1", 3250.0),
        ("kv_only_step", 600.0), ("weights_only_step", 2000.0), ("seconds_for_ms", 2.6)])


def test_sequences_by_itl_catalogue():
    # target 2.2 s at slowdown 2.5: 2.2 / 2.5 x 1000 = 880 B a step; less W / tp = 500: 380 / 100 -> 3.
    # whole W: (880 - 1000) / 100 = -1.2 -> -2; bound only: (2200 - 500) / 100 = 17; no efficiency
    # (slowdown 1.25): (1760 - 500) / 100 = 12.6 -> 12; multiplied (0.625): (3520 - 500) / 100 = 30.2 -> 30;
    # model's KV (200 B): 380 / 200 -> 1; no overhead (slowdown 2): (1100 - 500) / 100 = 6; ceil/round of 3.8: 4, 4
    assert_catalogue("sequences_by_itl", dict(ITL, itl_target_ms=2200), 3, [
        ("weights_not_split", -2), ("bound_only", 17), ("no_efficiency", 12), ("efficiency_multiplied", 30),
        ("total_not_per_gpu", 1), ("no_tp_overhead", 6), ("ceil_not_floor", 4), ("ceil_not_floor", 4)])


def test_requests_in_flight_catalogue():
    # 0.5 requests/s, each staying 2,500 ms + 1,200 x 35 ms = 44,500 ms = 44.5 s: 0.5 x 44.5 = 22.25 in flight
    inputs = dict(rate_per_s=0.5, ttft_ms=2500.0, output_tokens=1200, itl_ms=35.0)
    assert_catalogue("requests_in_flight", inputs, 22.25, [
        ("littles_law_inverted", 0.5 / 44.5),                      # rate / time
        ("littles_law_inverted", 89.0),                            # time / rate: 44.5 / 0.5
        ("time_in_system_in_ms", 22_250.0),                        # 0.5 x 44,500
        ("decode_time_left_out", 1.25),                            # 0.5 x 2.5 s
        ("ttft_left_out", 21.0),                                   # 0.5 x 42 s
        ("itl_ms_as_seconds", 21_001.25),                          # 0.5 x (2.5 + 1,200 x 35)
        ("one_token_not_output", 1.2675),                          # 0.5 x (2.5 + 0.035)
        ("littles_law_inverted+time_in_system_in_ms", 0.5 / 44_500),
        ("littles_law_inverted+time_in_system_in_ms", 89_000.0),   # 44,500 / 0.5
        ("mean_rounded", 22.0), ("mean_rounded", 22.0), ("mean_rounded", 23.0),   # round, floor, ceil
    ])


def test_nodes_with_headroom_catalogue():
    # 100 users, nodes of 8 GPUs at tp 2 = 4 replicas, min(5 by memory, 3 by ITL) = 3 per replica:
    # 12 per node -> ceil(100 / 12) = 9 nodes; spike 1.25: ceil(11.25) = 12, + 4 spares = 16.
    # the larger limit 5: 20 per node -> 5 -> ceil(6.25) + 4 = 11; no headroom: 9; floor: 100 // 12 = 8 ->
    # 10 + 4 = 14; spike rounded / floored: 11 + 4 = 15, 15; spares scaled: ceil(13 x 1.25 = 16.25) = 17;
    # GPUs: 16 x 8 = 128; one replica a node: 3 per node -> 34 -> ceil(42.5) + 4 = 47; each GPU a replica:
    # 24 per node -> 5 -> ceil(6.25) + 4 = 11; the spike before rounding: ceil(100 x 1.25 / 12 = 10.42) + 4 = 15
    case = dict(users=100, gpus_per_node=8, tp=2, sequences_by_memory=5, sequences_by_itl=3, spike_factor=1.25,
                redundancy_nodes=4)
    assert_catalogue("nodes_with_headroom", case, 16, [
        ("non_binding_constraint", 11), ("no_headroom", 9), ("floor_nodes", 14), ("spike_not_rounded_up", 15),
        ("spike_not_rounded_up", 15), ("spares_scaled", 17), ("gpus_not_nodes", 128), ("missing_replicas", 47),
        ("gpu_as_replica", 11), ("spike_before_rounding", 15), ("spike_before_rounding", 15)])
    # float noise: 600 users -> 50 nodes; 50 x 1.1 is 55.00000000000001 in binary floating point, and the
    # spike must still give 55 nodes (no spares). The larger limit: 30 nodes -> 33; GPUs 440;
    # one replica a node: 200 nodes x 1.1 (220.00000000000003) -> 220; each GPU a replica: 25 nodes x 1.1 ->
    # 28; the spike before rounding: 600 x 1.1 is 660.0 in floating point, / 12 = 55: the right count (dropped)
    noisy = dict(case, users=600, spike_factor=1.1, redundancy_nodes=0)
    assert_catalogue("nodes_with_headroom", noisy, 55, [
        ("non_binding_constraint", 33), ("no_headroom", 50), ("gpus_not_nodes", 440), ("missing_replicas", 220),
        ("gpu_as_replica", 28)])
    # 6,200 users at 124 a node: 6,200 x 1.1 / 124 = 55.00000000000001, which math.ceil alone makes 56 (+ 1 spare:
    # 57); rounded to 9 decimals first, 55 + 1 = 56, the right count
    edge = dict(users=6200, gpus_per_node=8, tp=8, sequences_by_memory=124, sequences_by_itl=148, spike_factor=1.1,
                redundancy_nodes=1)
    assert [v for k, v in QUANTITIES["nodes_with_headroom"](edge)[1] if base_key(k) == "spike_before_rounding"] == [57]
    # the guard against float noise rounds nodes x spike to 9 decimals: a spike of 1 + 1e-9 on 1 node is
    # real and asks for a second node, 1 + 1e-10 is noise (1 node). 12 users fill one node of 4 x 3.
    tiny = dict(case, users=12, redundancy_nodes=0)
    assert expected_value("nodes_with_headroom", **dict(tiny, spike_factor=1.000000001)) == 2
    assert expected_value("nodes_with_headroom", **dict(tiny, spike_factor=1.0000000001)) == 1
    # one replica per node (tp = gpus_per_node): no replica slip
    got = [key for key, _ in QUANTITIES["nodes_with_headroom"](dict(case, tp=8))[1]]
    assert "missing_replicas" not in got
    # two replicas a node (4 GPUs at tp 2): 6 per node -> 17 nodes -> ceil(21.25) + 4 = 26; one replica:
    # 3 per node -> 34 -> 47
    two = QUANTITIES["nodes_with_headroom"](dict(case, gpus_per_node=4))
    assert two[0] == 26 and dict(two[1])["missing_replicas"] == 47


def test_prefix_sharing_catalogue():
    # a 10-token prompt shared by 3 requests, blocks of 4: 2 full blocks (8 tokens) shared, 2 recomputed.
    # saved: 3 x 10 - (10 + 2 x 2) = 16 = (3 - 1) x 8. Partial block shared too: 2 x 10 = 20; every copy
    # saved: 3 x 8 = 24; both: 30; blocks: 2 x 2 = 4
    case = dict(prompt_tokens=10, num_requests=3, block_size=4)
    saved = [("partial_block_shared", 20), ("every_copy_saved", 24), ("partial_block_shared+every_copy_saved", 30),
             ("blocks_not_tokens", 4)]
    assert_catalogue("prefill_tokens_saved", case, 16, saved)
    # bytes at 100 B per token: 1,600; each slip x 100; the token count 16; units of 1,600
    assert_catalogue("prefix_bytes_saved", dict(case, bytes_per_token=100), 1600,
                     scaled(saved, 100) + [("tokens_not_bytes", 16)] + units(1600))
    # a 12-token prompt (3 whole blocks of 4), 3 requests: saved 2 x 12 = 24 (a partial block: none); every copy
    # 3 x 12 = 36, with the partial block too the same 36; blocks 2 x 3 = 6; the hit capped before the last
    # token: 2 x floor(11 / 4) x 4 = 16
    assert_catalogue("prefill_tokens_saved", dict(prompt_tokens=12, num_requests=3, block_size=4), 24,
                     [("every_copy_saved", 36), ("partial_block_shared+every_copy_saved", 36), ("blocks_not_tokens", 6),
                      ("last_token_cap", 16)])


def test_agent_prefill_catalogue():
    # system 4, observation 3, action 2, 3 steps: prompts of 7, 12 and 17 tokens; blocks of 4.
    # with the cache (actions cached too): 7, then 8 of 12 hit -> 4, then 12 of 17 hit -> 5: 16 tokens.
    # no cache: 7 + 12 + 17 = 36; actions not cached: 7, 4 hit -> 8, 12 hit -> 5 = 20; block size 1 (partial
    # blocks shared): 7, 9 hit -> 3, 14 hit -> 3 = 13; both: 7, 7 hit -> 5, 12 hit -> 5 = 17
    assert [len(r.prompt) for r in agent_requests(4, 3, 2, 3)] == [7, 12, 17]
    case = dict(system_tokens=4, observation_tokens=3, action_tokens=2, steps=3, block_size=4)
    assert_catalogue("agent_prefill_with_cache", case, 16, [
        ("no_cache", 36), ("output_not_cached", 20), ("partial_block_shared", 13),
        ("output_not_cached+partial_block_shared", 17)])


def test_log_figure_catalogue():
    # the figure as printed is right; each wrong figure that differs is its slip
    assert_catalogue("log_figure", dict(printed=7191, wrong={"largest_rank": 7300, "weights_figure": 7191}), 7191,
                     [("largest_rank", 7300)])
    assert_catalogue("log_figure", dict(printed=7191), 7191, [])
    # the wrong figure is named in the message
    d = diagnose("log_figure", 7300, printed=7191, wrong={"largest_rank": 7300})
    assert "(7300)" in d.message and d.slip.key == "largest_rank"


def test_block_range_catalogue():
    # "1.00" GiB: whole bytes [ceil(0.995 x 2^30), ceil(1.005 x 2^30) - 1] = [1,068,373,115, 1,079,110,533];
    # L = 1, K = 2, D = 64, b = 2, blocks of 16: 2 x 2 x 64 x 2 x 16 = 8,192 B a block (2^30 / 8192 = 131,072
    # blocks a GiB): 130416.6 -> 130,416, 131727.4 -> 131,727 (no tp given: one GPU holds both heads).
    # one point: 131,072 (twice, both ways); +/-0.01: 0.99 x 131072 = 129761.3, 1.01 x 131072 = 132382.7;
    # GB: 0.995e9 / 8192 = 121459.96, 1.005e9 / 8192 = 122680.7; tokens: x 16; half blocks (4,096 B):
    # 260833.3, 263454.7
    case = dict(available_gib="1.00", layers=1, kv_heads=2, head_dim=64, dtype_bytes=2, block_size=16)
    assert_catalogue("block_range", case, (130416, 131727), [
        ("point_not_range", (131072, 131072)), ("point_not_range", (131072, 131072)),
        ("window_full_unit", (129761, 132382)), ("gb_for_gib", (121459, 122680)),
        ("tokens_for_blocks", (130416 * 16, 131727 * 16)), ("missing_kv_factor", (260833, 263454))])
    # K = 4 over tp 2: two heads a rank, the same 8,192 B and the same slips; counted whole (16,384 B):
    # 65208.3, 65863.7
    assert_catalogue("block_range", dict(case, kv_heads=4, tp=2), (130416, 131727), [
        ("point_not_range", (131072, 131072)), ("point_not_range", (131072, 131072)),
        ("window_full_unit", (129761, 132382)), ("gb_for_gib", (121459, 122680)),
        ("tokens_for_blocks", (130416 * 16, 131727 * 16)), ("total_not_per_gpu", (65208, 65863)),
        ("missing_kv_factor", (260833, 263454))])


def test_sequences_on_gpu_catalogue():
    # M = 10,000 B, u = 0.5, 500 parameters x 2 B = 1,000 B of weights, O = 550, 10 B per token x 10 tokens:
    # floor(5000 - 1000 - 550) = 3,450 B -> 34 sequences.
    # label 12,000: 6000 - 1550 = 4450 -> 44; label read as GiB: 12,000 x 1.073741824 x 0.5 = 6442.45 - 1550
    # -> 48; M x 10^9 / 2^30 x 0.5 = 4656.6 - 1550 -> 31; u = 1: 8450 -> 84; utilization after the weights:
    # floor((10000 - 1550) x 0.5) = 4225 -> 42; no O: 4000 -> 40; no weights: 4450 -> 44; 1 B per parameter:
    # 3950 -> 39; 4 B: 2450 -> 24; tokens: 3450 / 10 = 345; ceil(34.5) = 35 (round(34.5) = 34: dropped);
    # O taken off after the share, (10000 - 1000) x 0.5 - 550 = 3950 -> 39
    case = dict(gpu_bytes=10_000, utilization=0.5, other_bytes=550, bytes_per_token=10, seq_len=10,
                num_params=500, weight_dtype_bytes=2)
    assert_catalogue("sequences_on_gpu", dict(case, label_bytes=12_000), 34, [
        ("label_memory", 44), ("label_memory+gb_for_gib", 48), ("gb_for_gib", 31), ("ignored_utilization", 84),
        ("utilization_after_weights", 42), ("utilization_after_weights", 39), ("ignored_other_bytes", 40),
        ("weights_missing", 44), ("weight_dtype_ignored", 39), ("weight_dtype_ignored", 24), ("tokens_not_sequences", 345),
        ("ceil_not_floor", 35)])
    # 3,000 parameters (6,000 B): 5000 - 6550 = -1,550 B: floor(-15.5) = -16, so 0 fit. Only the slips that
    # leave room remain: u = 1: 3450 -> 34; after the weights: (10000 - 6550) x 0.5 = 1725 -> 17; no weights
    # 44; 1 B per parameter: 5000 - 3550 = 1450 -> 14; and the negative count -16 itself; O after the share:
    # (10000 - 6000) x 0.5 - 550 = 1450 -> 14
    # O = 500: 5000 - 1000 - 500 = 3,500 -> 35; no weights: 4,500 B -> 45 (a byte less would give 44)
    assert dict(QUANTITIES["sequences_on_gpu"](dict(case, other_bytes=500))[1])["weights_missing"] == 45
    # O = 520: 3,480 / 100 = 34.8 -> 34; ceil and round both 35
    got = QUANTITIES["sequences_on_gpu"](dict(case, other_bytes=520))
    assert got[0] == 34 and [v for k, v in got[1] if base_key(k) == "ceil_not_floor"] == [35, 35]
    # 6,000 parameters (12,000 B) weigh more than the whole GPU: even the utilization applied after them leaves
    # nothing, (10000 - 12550) x 0.5 < 0: no count, so no slip
    assert "utilization_after_weights" not in dict(QUANTITIES["sequences_on_gpu"](dict(case, num_params=6000))[1])
    assert_catalogue("sequences_on_gpu", dict(case, num_params=3000), 0, [
        ("ignored_utilization", 34), ("utilization_after_weights", 17), ("utilization_after_weights", 14),
        ("weights_missing", 44),
        ("weight_dtype_ignored", 14), ("negative_count", -16)])


def test_kv_head_sharing_catalogue():
    # L = 2, H = 8, K = 2, D = 4, b = 2: H / K = 4 query heads per KV head; counting H: 256 B, K: 64 B,
    # the slip adds 192. Inverted: 2 / 8 = 0.25 (or 2 // 8 = 0); the field read as MQA: 256 - 32 = 224 with
    # ratio 8; the inflated 256 or the real 64 as the second figure; each token slip made in both counts:
    # no factor 2 (128 - 32 = 96), bits (2048 - 512 = 1536), fp32 (512 - 128 = 384), fp8 (96), one layer (96),
    # 1 byte (96), 4 bytes (384)
    case = dict(layers=2, num_heads=8, kv_heads=2, head_dim=4, dtype_bytes=2)
    both = [("missing_kv_factor", (4, 96)), ("bits_not_bytes", (4, 1536)), ("fp32_bytes", (4, 384)),
            ("wrong_16bit_vs_fp8", (4, 96)), ("missing_layers", (4, 96)), ("ignored_dtype_bytes", (4, 96)),
            ("ignored_dtype_bytes", (4, 384))]
    assert_catalogue("kv_head_sharing", dict(case, kv_field_absent=True), (4, 192), [
        ("inverted_ratio", (0.25, 192)), ("inverted_ratio", (0, 192)), ("absent_as_mqa", (8, 224)),
        ("inflated_not_extra", (4, 256)), ("real_not_extra", (4, 64))] + both)
    assert_catalogue("kv_head_sharing", case, (4, 192), [
        ("inverted_ratio", (0.25, 192)), ("inverted_ratio", (0, 192)),
        ("inflated_not_extra", (4, 256)), ("real_not_extra", (4, 64))] + both)


# --- how an answer is compared and the slip put into words ----------------------------------------------
@pytest.mark.parametrize("answer,expected,text", [
    (4, 1, "4x too large"), (1, 4, "4x too small"),
    (2.005, 1, "2x too large"),                 # within 0.01 of a whole ratio: said as one
    (2.02, 1, "2.02x too large"),               # not within 0.01
    (1.074, 1, "7.4% too large"),               # under 1.5x: a percentage (GB read as GiB)
    (1, 1.074, "6.9% too small"),               # 1.074 / 1 = 1.074, |1/1.074 - 1| = 6.9%
    (1.004, 1, "0.4% too large"),               # rounds to 1: a percentage, never "1x"
    (1.49, 1, "49.0% too large"), (1.5, 1, "1.50x too large"), (2.5, 1, "2.50x too large"),
    (0, 5, "wrong sign or zero"), (-1, 5, "wrong sign or zero"), (5, 0, "wrong"), ("5", 1, "wrong"),
    # a range is judged by the last element that differs: 40 / 20, then 30 / 10 is not used
    ((30, 40), (10, 20), "2x too large"), ((30, 20), (10, 20), "3x too large"),
    # lengths differ: the last elements, 5 / 20
    ((10, 40, 5), (10, 20), "4x too small"),
    # a range against a number (or the other way): no ratio
    ((1, 2), 2, "wrong"), (2, (1, 2), "wrong"),
    # equal figures (never asked for: an equal answer is correct) read as no change, "too small"
    (5, 5, "0.0% too small"),
])
def test_ratio_text(answer, expected, text):
    assert ratio_text(answer, expected) == text


def test_integers_compare_exactly_floats_within_the_tolerance():
    # 3 x 2^30 x 1000 B is 3.2e12: one byte more is within a relative 1e-6, but a whole-byte answer is exact
    case = dict(LLAMA8B, seq_len=8192, batch_size=3000)
    right = 131_072 * 8192 * 3000
    assert diagnose("kv_bytes_total", right, **case).correct
    assert not diagnose("kv_bytes_total", right + 1, **case).correct
    assert diagnose("kv_bytes_total", float(right + 1), **case).correct      # a float within 1e-6
    assert not diagnose("kv_bytes_total", right * 1.01, **case).correct
    assert diagnose("kv_bytes_total", right * 1.005, rel_tol=0.01, **case).correct
    # zero is compared with an absolute 1e-12: 1e-13 is zero, 1e-11 is not
    none_fit = dict(gpu_bytes=10_000, utilization=0.5, other_bytes=550, bytes_per_token=10, seq_len=10,
                    num_params=3000, weight_dtype_bytes=2)
    assert diagnose("sequences_on_gpu", 1e-13, **none_fit).correct
    assert not diagnose("sequences_on_gpu", 1e-11, **none_fit).correct
    # ranges compare element by element, and only with ranges of the same length
    block = dict(available_gib="1.00", layers=1, kv_heads=1, head_dim=128, dtype_bytes=2, block_size=16)
    assert diagnose("block_range", (130416, 131727), **block).correct
    assert diagnose("block_range", (130416.0, 131727.0), **block).correct
    assert not diagnose("block_range", (130416, 131727, 5), **block).correct
    d = diagnose("block_range", (130416,), **block)        # a range of one: still a range, of the wrong length
    assert not d.correct and not d.message.startswith("expected a number")
    # a range where a single number is expected: compared, no slip, no ratio
    d = diagnose("kv_bytes_per_token", (131_072, 131_072), **LLAMA8B)
    assert (d.correct, d.message) == (False, "wrong, and it matches no known slip: recheck each factor.")
    assert not diagnose("block_range", (130416, 131728), **block).correct
    assert not diagnose("block_range", 130416, **block).correct
    assert diagnose("block_range", (), **block).message == "expected a number, got tuple ()."
    assert not diagnose("block_range", (130416, "131727"), **block).correct
    assert not diagnose("block_range", [130416, 131727], **block).correct   # a list is not a range
    # a range answer is matched against the slips' ranges: one point (131,072 twice) is the point slip
    assert matching("block_range", (131072, 131072), **block) == ("point_not_range",)


def test_int_answer_matches_a_slip_it_truncates():
    # 3 x 2^30 B = 3,221,225,472 B: read in GB it is 3.221225472; int() of it, 3 (or ceil 4), is that slip.
    # In GiB it is exactly 3.0, so 3 is that slip as well
    case = dict(LLAMA8B, seq_len=8192, batch_size=3)
    assert matching("kv_bytes_total", 3, **case) == ("answer_in_gib", "answer_in_gb")
    assert matching("kv_bytes_total", 4, **case) == ("answer_in_gb",)
    assert matching("kv_bytes_total", 2, **case) == ()
    assert matching("kv_bytes_total", 4.0, **case) == ()          # a float answer must be the value itself
    # a slipped value under 1 is never matched by truncation: 640 B in KB is 0.64, in KiB 0.625
    assert matching("kv_bytes_per_sequence", 0, **G, seq_len=10) == ()
    assert matching("kv_bytes_per_sequence", 1, **G, seq_len=10) == ()
    assert matching("kv_bytes_per_sequence", 0.64, **G, seq_len=10) == ("answer_in_kb",)
    # a whole-number slip is matched only by that number: the GiB figure 3.0, not 2
    assert "answer_in_gib" not in matching("kv_bytes_total", 2, **case)
    # between 1 and 2: 1,920 B is 1.875 KiB and 1.92 KB; 1 and 2 are both slips
    assert matching("kv_bytes_total", 1, **G, seq_len=10, batch_size=3) == ("answer_in_kib", "answer_in_kb")
    assert matching("kv_bytes_total", 2, **G, seq_len=10, batch_size=3) == ("answer_in_kib", "answer_in_kb")
    # a truncated slip that is also the right figure is no slip: 3 x 10^9 B is 3.0 GB (right) and
    # 2.79 GiB (the slip): int 2 is the slip, 3 (its ceiling) is the right answer
    assert matching("bytes_to_gb", 2, n_bytes=3 * 10**9) == ("gb_for_gib",)
    assert matching("bytes_to_gb", 3, n_bytes=3 * 10**9) == ()


def test_a_slip_that_gives_the_right_figure_is_never_named():
    # at tp 1, "weights not split" is the right figure (2,600 ms, test_itl_ms_catalogue)
    assert matching("itl_ms", 2600.0, **dict(ITL, sequences=3, tp=1)) == ()
    assert diagnose("itl_ms", 2600.0, **dict(ITL, sequences=3, tp=1)).correct


def test_matching_lists_each_slip_once_in_catalogue_order():
    # test_max_concurrency_catalogue: ceil and round both give 11, and so does GB read as GiB
    case = dict(G, seq_len=10, budget_bytes=7000)
    assert matching("max_concurrency", 11, **case) == ("ceil_not_floor", "gb_for_gib")
    # 21: four slips at once, in catalogue order
    assert matching("max_concurrency", 21, **case) == ("missing_kv_factor", "wrong_16bit_vs_fp8", "missing_layers",
                                                       "ignored_dtype_bytes")
    assert matching("max_concurrency", 21, rel_tol=1e-6, **case)[0] == "missing_kv_factor"
    # 256 x 1.005 is the query-head slip only within a 1% tolerance
    assert matching("kv_bytes_per_token", 256 * 1.005, **G) == ()
    assert matching("kv_bytes_per_token", 256 * 1.005, rel_tol=0.01, **G) == ("query_heads",)
    # not a number: nothing matches
    assert matching("kv_bytes_per_token", True, **G) == ()
    assert matching("kv_bytes_per_token", "256", **G) == ()
    assert matching("kv_bytes_per_token", None, **G) == ()


def test_unknown_quantity_is_a_key_error_naming_it():
    for call in (lambda: diagnose("no_such", 1), lambda: matching("no_such", 1), lambda: expected_value("no_such")):
        with pytest.raises(KeyError, match="unknown quantity 'no_such' \\(known: kv_bytes_per_token, "):
            call()


def test_diagnose_names_the_lead_slip_first_and_the_next_one_after():
    # 65,536 B on Llama 3 8B: half of 131,072 -- no factor 2, fp8's 1 byte, or another element size (1 B)
    d = diagnose("kv_bytes_per_token", 65_536, **LLAMA8B)
    assert d.slip == Slip("missing_kv_factor", "the factor 2 for K and V is missing: every token stores a key and "
                                               "a value.")
    assert d.message == ("2x too small: the factor 2 for K and V is missing: every token stores a key and a value. "
                         "Or: the element size is off: fp8 is 1 byte, fp16/bf16 are 2 bytes (you used 1).")
    d = diagnose("kv_bytes_per_token", 65_536, lead="ignored_dtype_bytes", **LLAMA8B)
    assert d.slip.key == "ignored_dtype_bytes"
    assert d.message.startswith("2x too small: the answer does not follow the argument dtype_bytes (2 B per "
                                "element)")
    assert d.message.endswith(" Or: the factor 2 for K and V is missing: every token stores a key and a value.")
    # a lead that is not among the matches changes nothing
    assert diagnose("kv_bytes_per_token", 65_536, lead="query_heads", **LLAMA8B).slip.key == "missing_kv_factor"
    # one match: no "Or:"
    d = diagnose("kv_bytes_per_token", 4 * 131_072, **LLAMA8B)
    assert " Or: " not in d.message
    assert (d.quantity, d.correct, d.expected, d.answer) == ("kv_bytes_per_token", False, 131_072, 4 * 131_072)
    assert d.inputs == LLAMA8B


def test_diagnose_without_a_match_or_a_number():
    # 123,456 / 131,072 = 0.9419: 5.8% too small
    d = diagnose("kv_bytes_per_token", 123_456, **LLAMA8B)
    assert (d.quantity, d.correct, d.slip, d.expected, d.answer, d.inputs) == \
        ("kv_bytes_per_token", False, None, 131_072, 123_456, LLAMA8B)
    assert d.message == "5.8% too small, and it matches no known slip: recheck each factor."
    d = diagnose("kv_bytes_per_token", True, **LLAMA8B)
    assert (d.quantity, d.correct, d.slip, d.expected, d.answer, d.inputs) == \
        ("kv_bytes_per_token", False, None, 131_072, True, LLAMA8B)
    assert d.message == "expected a number, got bool True."
    assert diagnose("kv_bytes_per_token", None, **LLAMA8B).message == "expected a number, got NoneType None."
    d = diagnose("kv_bytes_per_token", 131_072, **LLAMA8B)
    assert (d.quantity, d.correct, d.expected, d.answer, d.message, d.slip, d.inputs) == \
        ("kv_bytes_per_token", True, 131_072, 131_072, "correct.", None, LLAMA8B)


def test_diagnose_with_two_matches_and_a_tolerance():
    # Llama 3 8B without its head counts: 262,144 B = 2 x 131,072 is fp32's 4 bytes, and "another element size"
    # (4 bytes): exactly two slips, both named
    d = diagnose("kv_bytes_per_token", 262_144, layers=32, kv_heads=8, head_dim=128, dtype_bytes=2)
    assert d.message == ("2x too large: you used 4 bytes per element (fp32); the cache is stored in 16 bits (2 bytes). "
                         "Or: the answer does not follow the argument dtype_bytes (2 B per element): it uses "
                         "another element size (a fixed one, or one read from the config).")
    # the tolerance applies to the slips too: 256 x 1.005 is the query-head slip within 1% (test geometry G)
    assert diagnose("kv_bytes_per_token", 256 * 1.005, **G).slip is None
    assert diagnose("kv_bytes_per_token", 256 * 1.005, rel_tol=0.01, **G).slip.key == "query_heads"


@pytest.mark.parametrize("key,inputs,text", [
    # the figures of the case go into the words
    ("bits_not_bytes", dict(dtype_bytes=1), "you used bits per element (8) instead of bytes (1)."),
    ("bits_not_bytes", dict(dtype_bytes=2), "you used bits per element (16) instead of bytes (2)."),
    # fp8 case: 2 bytes used; a 16-bit case (or none given: 16-bit assumed): 1 byte used
    ("wrong_16bit_vs_fp8", dict(dtype_bytes=1),
     "the element size is off: fp8 is 1 byte, fp16/bf16 are 2 bytes (you used 2)."),
    ("wrong_16bit_vs_fp8", {}, "the element size is off: fp8 is 1 byte, fp16/bf16 are 2 bytes (you used 1)."),
    # Gemma 2 9B: hidden 3584 / 16 heads = 224, the config's head_dim is 256
    ("hidden_over_heads", dict(hidden_size=3584, num_heads=16, head_dim=256),
     "you derived head_dim as hidden_size / num_attention_heads = 224; this config gives head_dim = 256 explicitly."),
    # the label 80 GB, CUDA 85.02 GB, two decimals
    ("label_memory", dict(label_bytes=80_000_000_000, gpu_bytes=85_020_000_000),
     "you started from the memory on the label (80.00 GB) instead of what CUDA reports (85.02 GB)."),
    # the rope width is DeepSeek's 64 unless given
    ("missing_rope", dict(latent_dim=512),
     "the 64-wide decoupled RoPE key is missing: MLA caches latent (512) + rope (64) per layer."),
    ("missing_rope", dict(latent_dim=512, rope_dim=32),
     "the 32-wide decoupled RoPE key is missing: MLA caches latent (512) + rope (32) per layer."),
    # a log figure: the wrong figure the learner took
    ("largest_rank", dict(wrong={"largest_rank": 7300}),
     "several ranks printed their own figure and you took a larger one (7300); vLLM sizes the pool from the "
     "smallest rank."),
    # a figure the words need is missing: the words up to the first parenthesis
    ("largest_rank", dict(wrong={"weights_figure": 7300}),
     "several ranks printed their own figure and you took a larger one."),
    ("largest_rank", dict(wrong=7300), "several ranks printed their own figure and you took a larger one."),
    ("query_heads", {}, "you multiplied by the query heads."),
    ("label_memory", dict(gpu_bytes=85_020_000_000), "you started from the memory on the label."),
    # no num_heads: no derived width to show, and that figure is outside any parenthesis: the general words
    ("hidden_over_heads", dict(hidden_size=3584, head_dim=256),
     "you derived head_dim as hidden_size / num_attention_heads where the config gives head_dim explicitly."),
    # words the catalogue fills in from the case: num_requests - 1 = 3 - 1 = 2; 8 GPUs / tp 2 = 4 replicas
    ("every_copy_saved", dict(num_requests=3),
     "one copy of the shared blocks is still computed and held: the saving is over num_requests - 1 = 2 requests, "
     "not all 3."),
    ("missing_replicas", dict(gpus_per_node=8, tp=2),
     "a node of 8 GPUs runs 4 replicas of tp = 2: multiply the sequences per replica by them."),
    ("missing_replicas", dict(gpus_per_node=8), "a node may run several replicas: multiply by them."),
    ("every_copy_saved", {}, "one copy is still computed and held: the saving is over num_requests - 1 requests."),
    # two slips at once
    ("query_heads+missing_kv_factor", dict(num_heads=32, kv_heads=8),
     "two slips at once: you multiplied by the query heads (num_attention_heads = 32) instead of the KV heads "
     "(num_key_value_heads = 8). And the factor 2 for K and V is missing: every token stores a key and a value."),
])
def test_message_fills_in_the_case(key, inputs, text):
    assert message(key, **inputs) == text


def test_general_words_carry_no_figures():
    assert general("query_heads") == "you multiplied by the query heads (num_attention_heads) instead of the KV heads."
    assert general("missing_layers+bits_not_bytes") == ("two slips at once: the number of layers is missing. And you "
                                                        "used bits per element instead of bytes.")
    assert general("no_such_slip") == "a known slip."
    # every slip of the catalogue has general words (hidden cases never fall back to the vague default)
    assert all(key in GENERAL for key in SLIPS)


# --- [diagnosis]: alternatives fit every case; generic slips ---------------------------------------------
def test_the_alternatives_check_has_teeth(monkeypatch):
    """With passing cases ignored (nothing ruled out), chapter 07's check offers alternatives a case
    contradicts, and the shared test finds them: e.g. 'the element size is off (you used 1)' beside the
    missing factor 2, though the fp8 case (GPT-2 large, 1-byte cache) passed."""
    from chapter_checks import offered_slips_contradicting_a_case
    from autograder.checks import ch07
    from kvcoach import slips as slips_module
    monkeypatch.setattr(slips_module, "ruled_out", lambda *a, **k: set())
    bad = offered_slips_contradicting_a_case(ch07.EXERCISES)
    assert bad and all(gid.startswith("ch07_") for gid, *_ in bad)
    assert any(alternative.startswith("ignored_dtype_bytes") for _, alternative, *_ in bad)


def test_off_by_one_is_an_absolute_count():
    # 131,071 for 131,072: "1 byte too small" (by hand), never "0.0% too small"
    d = diagnose("kv_bytes_per_token", 131_071, unit="bytes", **LLAMA8B)
    assert d.slip.key == "off_by_one" and d.message.startswith("1 byte too small: ")
    d = diagnose("kv_bytes_per_token", 131_075, unit="bytes", **LLAMA8B)
    assert d.message.startswith("3 bytes too large") and d.slip is None
    assert ratio_text(62, 66, "sequences") == "4 sequences too small"
    assert ratio_text(4, 1, "tokens") == "4x too large"          # a large gap stays a ratio


def test_seconds_and_milliseconds_from_the_unit():
    # any quantity: 10 sequences of 16-token blocks waste 10 x 15 / 2 = 75 (by hand); as if in ms or s
    waste = dict(num_seqs=10, block_size=16)
    assert "seconds_for_ms" in matching("block_waste_tokens", 0.075, unit="ms", **waste)
    assert "ms_for_seconds" in matching("block_waste_tokens", 75_000.0, unit="s", **waste)
    assert matching("block_waste_tokens", 0.075, unit="token slots", **waste) == ()


@pytest.mark.parametrize("answer, unit, key", [
    (131_072 * 10**9 / 2**30, "bytes", "gb_for_gib"),        # 122,070.3 -> its floor and ceiling are named too
    (round(131_072 * 2**40 / 10**12), "bytes", "tb_for_tib"),
    (round(131_072 * 10**3 / 2**10), "bytes", "kb_for_kib"),  # 128,000
    (131_072 / 2**40, "bytes", "answer_in_tib"),
])
def test_generic_slips_from_the_expected_value(answer, unit, key):
    assert key in matching("kv_bytes_per_token", answer, unit=unit, **LLAMA8B)


def test_generic_slips_need_their_factor():
    # per GPU / per node only where the exercise has a GPU count; blocks only with a block size
    assert "per_node_not_per_gpu" in matching("kv_bytes_per_token", 131_072 * 3, unit="bytes",
                                              **dict(LLAMA8B, gpus_per_node=3))
    assert "per_gpu_not_per_node" in matching("kv_bytes_per_token", 131_072 / 3, unit="bytes",
                                              **dict(LLAMA8B, gpus_per_node=3))
    assert "per_node_not_per_gpu" not in matching("kv_bytes_per_token", 131_072 * 3, unit="bytes", **LLAMA8B)
    tokens = dict(budget_bytes=10 * 131_072 * 16, **LLAMA8B)      # 160 tokens, 10 blocks of 16
    assert "blocks_for_tokens" in matching("pool_tokens", 10, unit="tokens", **dict(tokens, block_size=16))
    assert "blocks_for_tokens" not in matching("pool_tokens", 10, unit="tokens", **tokens)


def test_a_right_answer_rules_a_slip_out_only_where_the_slip_changes_it():
    # dtype_bytes = 2 fixed in the code: right on a 2-byte case, so the way "@2" is not ruled out there,
    # while "@1" and "@4" (other fixed sizes) are
    right = 131_072
    out = ruled_out("kv_bytes_per_token", right, unit="bytes", **LLAMA8B)
    assert {"ignored_dtype_bytes@1", "ignored_dtype_bytes@4", "missing_kv_factor"} <= out
    assert "ignored_dtype_bytes@2" not in out and not any(k.startswith("off_by_one") for k in out)


# --- [diagnosis §2]: floor for ceil, ceil for floor, round for either (from the unrounded figure) -----------
def test_rounding_slips_from_the_unrounded_figure():
    from fractions import Fraction
    from kvcoach.slips import rounding_slips
    # 10/3 = 3.33: a ceiling of 4, its floor and its rounding 3; a floor of 3, its ceiling 4 (by hand)
    assert rounding_slips(4, Fraction(10, 3)) == [("floor_for_ceil", 3), ("round_for_ceil", 3)]
    assert rounding_slips(3, Fraction(10, 3)) == [("ceil_for_floor", 4)]            # round(3.33) is right
    assert rounding_slips(3, Fraction(11, 3), "floor") == [("ceil_for_floor", 4), ("round_for_floor", 4)]
    assert rounding_slips(4, Fraction(11, 3), "round") == [("floor_for_round", 3)]
    assert rounding_slips(3, 3) == [] and rounding_slips(5, Fraction(10, 3)) == []   # whole, or not a rounding


def test_a_new_quantity_gets_the_rounding_slips_from_its_unrounded_figure(monkeypatch):
    """A quantity that returns (expected, slips, unrounded) and has no rounding slip of its own gets them:
    ceil(1000 / 64) = 16 blocks (by hand); the floor 15 is "1 block too small", never "6.2% too small"."""
    from kvcoach import slips as slips_module

    def blocks(i):
        return -(-i["tokens"] // i["block_size"]), [], i["tokens"] / i["block_size"]
    monkeypatch.setitem(slips_module.QUANTITIES, "test_blocks", blocks)
    slips_module._VARIANTS.clear()
    d = diagnose("test_blocks", 15, unit="blocks", tokens=1000, block_size=64)
    assert d.slip.key == "floor_for_ceil" and d.message.startswith("1 block too small: the count is rounded up")
    assert "Or:" not in d.message                    # round(15.6) = 16 is right here: not offered
    assert diagnose("test_blocks", 17, unit="blocks", tokens=1000, block_size=64).slip.key == "off_by_one"
    slips_module._VARIANTS.clear()


def test_rounding_slips_of_the_chapters_quantities():
    # a pool of 10,000,000 B at 131,072 B per token holds 76.29 tokens: 76 (floor, by hand); 77 rounds it
    pool = dict(gpu_bytes=10**7, utilization=1.0, weight_bytes=0, other_bytes=0, bytes_per_token=131_072)
    d = diagnose("pool_tokens_reported", 77, unit="tokens", **pool)
    assert d.message.startswith("1 token too large: ") and d.slip.key == "ceil_not_floor"
    # 3 nodes where 1,000 users at 400 per node need ceil(2.5) = 3: 2 nodes is the floor, "1 node too small"
    per_seq = 2 * 32 * 8 * 128 * 2 * 1000                   # Llama 3.1 8B at TP 1, 1,000 tokens: 131,072,000 B
    nodes = dict(LLAMA8B, tp=1, users=1000, seq_len=1000, pool_bytes_per_gpu=400 * per_seq)
    d = diagnose("nodes_for_memory", 2, unit="nodes", **nodes)
    assert d.expected == 3 and d.message.startswith("1 node too small: ") and d.slip.key == "floor_nodes"


def test_edge_slips_by_hand():
    """The slips of the edges ch07 decides ([diagnosis §6]), each recomputed by hand."""
    from kvcoach.slips import QUANTITIES
    # a budget of 1,001 B x 0.5 = 500.5 B, rounded up to 501; less 100 B of weights and 1 B: 400 B = 4 sequences
    # of 100 B exactly. Rounded down (500) it holds 399 B: 3 sequences
    pool = dict(gpu_bytes=1001, utilization=0.5, weight_bytes=100, other_bytes=1, tp=1, kv_heads=1,
                kv_bytes_per_sequence_per_gpu=100)
    expected, got = QUANTITIES["sequences_per_gpu_by_memory"](pool)
    assert expected == 4 and dict(got)["budget_rounded_down"] == 3
    # 6,200 users at 124 a node (one replica of 124): 50 nodes; x 1.1 = 55 exactly (55.00000000000001 in floating
    # point: math.ceil alone gives 56), + 1 spare = 56. math.ceil alone: 57. 6,200 // 124 + 1 = 51 nodes: 56.1 -> 57,
    # + 1 = 58
    nodes = dict(users=6200, gpus_per_node=8, tp=8, sequences_by_memory=124, sequences_by_itl=148, spike_factor=1.1,
                 redundancy_nodes=1)
    assert 50 * 1.1 > 55
    expected, got = QUANTITIES["nodes_with_headroom"](nodes)
    assert expected == 56 and dict(got)["spike_float_noise"] == 57 and dict(got)["ceil_as_floor_plus_one"] == 58
    # off the edge the two slips give the right count, so they are not listed
    expected, got = QUANTITIES["nodes_with_headroom"](dict(nodes, users=6201, spike_factor=1.3))
    assert "spike_float_noise" not in dict(got) and "ceil_as_floor_plus_one" not in dict(got)


def test_the_contradiction_check_holds_the_lead_to_the_passing_cases(monkeypatch):
    """With the old fallback back (no slip fits every case: name one that fits the failing cases only), the shared
    test finds leads that a passing case contradicts: a learner making a slip on one case only, visible and hidden
    (chapter 06's Exercise 1: the query heads on one case, the other cases passing)."""
    from chapter_checks import offered_slips_contradicting_a_case
    from autograder.checks import ch06, diagnosis

    fitting = diagnosis.fitting_slips

    def old_fallback(ex, cases, results, records, earlier=None, *, failing_only=False, some=False):
        found = fitting(ex, cases, results, records, earlier, failing_only=failing_only, some=some)
        if not found and not failing_only:
            return fitting(ex, cases, results, records, earlier, failing_only=True)[:1]
        return found
    monkeypatch.setattr(diagnosis, "fitting_slips", old_fallback)
    bad = offered_slips_contradicting_a_case(ch06.EXERCISES, hidden_seed=0)
    assert any(key == "query_heads (on one case only)" and slip == "query_heads" and where == "visible"
               for _, key, slip, _, _, where in bad)
    assert any(where == "hidden" for *_, where in bad)


def test_split_query_heads_names_the_per_gpu_counts():
    from kvcoach import slips
    # Qwen2.5-7B-like: 28 query heads, 4 KV heads at TP 2 -> 14 query heads per GPU against 2 KV heads per GPU
    text = slips.message("query_heads@split", layers=28, num_heads=28, kv_heads=4, head_dim=128, dtype_bytes=2, tp=2)
    assert "28 / 2 = 14 per GPU" in text and "max(1, 4 / 2) = 2 per GPU" in text, text
    # past the KV heads the KV side is floored at one head per GPU: 8 KV heads at TP 16 -> 1
    text = slips.message("query_heads@split", layers=80, num_heads=64, kv_heads=8, head_dim=128, dtype_bytes=2, tp=16)
    assert "64 / 16 = 4 per GPU" in text and "= 1 per GPU" in text, text
    # the plain slip keeps its whole-model words
    assert "num_attention_heads = 28" in slips.message("query_heads", layers=28, num_heads=28, kv_heads=4,
                                                       head_dim=128, dtype_bytes=2)


# --- the catalogue's layout: one engine, one module per topic, each key declared once ----------------------
def test_every_topic_joins_the_catalogue_once_and_a_key_declared_twice_is_refused():
    import types

    from kvcoach import slips as catalogue
    from kvcoach.slips import engine
    declared = [key for topic in catalogue.TOPICS for key in getattr(topic, "SLIP_WORDS", {})]
    assert len(declared) == len(set(declared)) == len(SLIPS)
    quantities = [q for topic in catalogue.TOPICS for q in getattr(topic, "QUANTITIES", {})]
    assert sorted(quantities) == sorted(QUANTITIES)
    # a second home for ch01's query-head slip, or for bytes per token: refused, naming the module and the key
    for clash in ({"SLIP_WORDS": {"query_heads": ("twice", "twice")}}, {"QUANTITIES": {"kv_bytes_per_token": len}}):
        topic = types.ModuleType("kvcoach.slips.clash")
        vars(topic).update(clash)
        with pytest.raises(ValueError, match=r"^kvcoach\.slips\.clash: '(query_heads|kv_bytes_per_token)' is "
                                             r"declared twice in the slip catalogue$"):
            engine.register(topic)
    assert SLIPS["query_heads"].startswith("you multiplied by the query heads")


def test_each_slip_has_its_words_and_its_general_words():
    from kvcoach import slips as catalogue
    for topic in catalogue.TOPICS:
        for key, (words, general_words) in getattr(topic, "SLIP_WORDS", {}).items():
            assert words.endswith(".") and general_words.endswith("."), (topic.__name__, key)
            assert "{" not in general_words, (topic.__name__, key)    # general words name no figure of a case


def test_kv_heads_and_group_catalogue():
    # H = 32, K = 8: (K, H // K) = (8, 4); the ratio upside down: K // H = 0, K / H = 0.25
    assert_catalogue("kv_heads_and_group", dict(num_heads=32, kv_heads=8), (8, 4),
                     [("inverted_ratio", (8, 0)), ("inverted_ratio", (8, 0.25))])
    # num_key_value_heads absent: K = H = 32, a group of 1; read as one KV head in all (MQA): (1, 32 // 1 = 32);
    # upside down gives 32 // 32 = 1, the right group, so it is dropped
    assert_catalogue("kv_heads_and_group", dict(num_heads=32, kv_heads=32, kv_field_absent=True), (32, 1),
                     [("absent_as_mqa", (1, 32))])



def test_mla_slip_name_catalogue():
    # L = 2, d_c = 4, d_R = 2, b = 2: right 2 x 6 x 2 = 24 B, doubled 48, the latent alone 2 x 4 x 2 = 16.
    # Figures without b: 12, 24, 8 -- so the right figure 24 reads as 'extra_factor_2'; the latent alone doubled:
    # 2 x (8 + 2) x 2 = 40, so 48 reads as 'other' and 40 as 'extra_factor_2'
    geometry = dict(layers=2, latent_dim=4, rope_dim=2, dtype_bytes=2)

    def table(answer_bytes, **changed):
        return QUANTITIES["mla_slip_name"](dict(geometry, answer_bytes=answer_bytes, **changed))
    assert table(24) == ("correct", [("reference_without_dtype", "extra_factor_2")])
    assert table(48) == ("extra_factor_2", [("reference_without_dtype", "other"), ("doubled_latent_only", "other")])
    assert table(40) == ("other", [("doubled_latent_only", "extra_factor_2")])
    # 1 byte per number: right 12, the latent alone 8; without b the same figures, and 8 is no doubled figure
    assert table(8, dtype_bytes=1) == ("missing_rope", [])
    named = diagnose("mla_slip_name", "extra_factor_2", **dict(geometry, answer_bytes=24))
    assert named.slip.key == "reference_without_dtype" and "dtype_bytes = 2" in named.message
