"""The slip catalogue names each mistake by recomputing it, not from a ratio."""

import pytest

from kvlib.slips import QUANTITIES, diagnose, expected_value, matching

LLAMA8B = dict(layers=32, kv_heads=8, head_dim=128, dtype_bytes=2, num_heads=32, hidden_size=4096)
GEMMA = dict(layers=42, kv_heads=8, head_dim=256, dtype_bytes=2, num_heads=16, hidden_size=3584)


@pytest.mark.parametrize("answer,key,ratio_text", [
    (2 * 32 * 32 * 128 * 2, "query_heads", "4x too large"),     # seed 001: 4x on Llama-3-8B
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
    # seed 001: "8x on Llama-3-70B"
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
    # seed 000: forgetting the rope key understates by 11%
    assert d.slip.key == "missing_rope" and d.message.startswith("11.1% too small")


def test_concurrency_slips():
    case = dict(LLAMA8B, seq_len=8192, budget_bytes=59_900_000_000)
    assert diagnose("max_concurrency", 55, **case).correct  # seed 003 example 1
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
    assert diagnose("kv_bytes_per_token_per_gpu", 40 * 1024, **case).correct  # seed 003: 40 KiB
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


def units(x):
    """The four unit slips of a byte figure x: KiB, KB, GiB, GB (hand: x / 2^10, 10^3, 2^30, 10^9)."""
    return [("answer_in_kib", x / 1024), ("answer_in_kb", x / 1000), ("answer_in_gib", x / 2**30),
            ("answer_in_gb", x / 10**9)]


def scaled(slips, factor):
    return [(key, value * factor) for key, value in slips]


def assert_catalogue(quantity, inputs, expected, slips):
    """QUANTITIES[quantity] gives ``expected`` and exactly ``slips`` (keys in order, values and their type)."""
    got_expected, got = QUANTITIES[quantity](dict(inputs))
    assert got_expected == pytest.approx(expected, rel=1e-12) and type(got_expected) is type(expected)
    assert [key for key, _ in got] == [key for key, _ in slips]
    for (key, value), (_, want) in zip(got, slips):
        assert value == pytest.approx(want, rel=1e-12), key
        assert type(value) is type(want), key
    assert expected_value(quantity, **inputs) == pytest.approx(expected, rel=1e-12)
    assert diagnose(quantity, expected, **inputs).correct


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


def test_mla_bytes_per_token_catalogue():
    # L = 2, latent 8, rope 4, b = 2: L (r + rope) b = 2 x 12 x 2 = 48 B (no factor 2).
    # x2 -> 96; no rope: 2 x 8 x 2 = 32, and with the factor 2 as well 64; bits: 2 x 12 x 16 = 384;
    # one layer: 24; as MHA with H = 4 heads of 6: 2 x 2 x 4 x 6 x 2 = 192
    mla = dict(layers=2, latent_dim=8, rope_dim=4, dtype_bytes=2)
    base = [("extra_factor_2", 96), ("missing_rope", 32), ("missing_rope", 64), ("bits_not_bytes", 384),
            ("missing_layers", 24)]
    assert_catalogue("mla_bytes_per_token", mla, 48, base + units(48))
    assert_catalogue("mla_bytes_per_token", dict(mla, num_heads=4, qk_head_dim=6), 48,
                     base + [("mla_as_mha", 192)] + units(48))


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
    # 3 x 3 = 9; one sequence: 3 / 2 = 1.5
    assert_catalogue("block_waste_tokens", dict(num_seqs=3, block_size=4), 4.5,
                     [("block_size_not_minus_one", 6), ("worst_case_waste", 9), ("one_sequence_waste", 1.5)])


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
    assert_catalogue("nodes_for_memory", dict(case, pool_bytes_per_gpu=1000), 4, [
        ("total_not_per_gpu", 10), ("missing_kv_factor", 2), ("fp32_bytes", 10), ("wrong_16bit_vs_fp8", 2),
        ("hidden_over_heads", 10), ("missing_layers", 2), ("ignored_dtype_bytes", 2), ("ignored_dtype_bytes", 10),
        ("floor_nodes", 3), ("gb_for_gib", 5)])
