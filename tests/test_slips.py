"""The slip catalogue names each mistake by recomputing it, not from a ratio."""

import pytest

from kvlib.slips import QUANTITIES, diagnose

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
