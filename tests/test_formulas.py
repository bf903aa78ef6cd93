"""kvlib.formulas against the seeds' worked figures and hand arithmetic.

Each expected value names its source. Where a seed slipped, the test holds
the correct value and the comment says what the seed printed.
"""

import math

import pytest
import sympy

import kvlib as kv
from kvlib.formulas import kv_pool_bytes, weight_bytes, weight_bytes_per_gpu
from kvlib.units import GB, GiB, KiB


def test_bytes_per_token_llama3_8b_seed000():
    # [chains] "Bytes per token, GQA": 2 x 32 x 8 x 128 x 2 B = 131,072 B = 128 KiB
    assert kv.kv_bytes_per_token(layers=32, kv_heads=8, head_dim=128, dtype_bytes=2) == 131_072
    assert 131_072 == 128 * KiB


def test_bytes_per_token_llama3_70b_seed000():
    # [chains]: 2 x 80 x 8 x 128 x 2 B = 327,680 B = 320 KiB
    assert kv.kv_bytes_per_token(layers=80, kv_heads=8, head_dim=128, dtype_bytes=2) == 327_680


def test_mha_penalty_seed003_example3():
    # [kv-math] example 3: MHA (K = 32) is 524,288 B = 512 KiB, 4x GQA-8
    assert kv.kv_bytes_per_token(32, 32, 128, 2) == 524_288
    assert kv.kv_bytes_per_token(32, 32, 128, 2) == 4 * kv.kv_bytes_per_token(32, 8, 128, 2)


def test_mla_deepseek_v3_seed000():
    # [chains] "Bytes per token, MLA": 61 x (512 + 64) x 2 B = 70,272 B
    assert kv.mla_bytes_per_token(layers=61, latent_dim=512, rope_dim=64, dtype_bytes=2) == 70_272
    # "Forgetting the 64-wide RoPE key understates the cache by 11%": 64/576 = 11.1%
    without_rope = kv.mla_bytes_per_token(61, 512, 0, 2)
    assert round(1 - without_rope / 70_272, 3) == 0.111


def test_sequence_one_gib_seed000():
    # [chains] sanity line: one 8,192-token 8B sequence = 1 GiB
    assert kv.kv_bytes_per_sequence(131_072, 8192) == GiB


def test_70b_batch_80_gib_seed001():
    # [build-up]: 320 KiB x 8192 = 2.5 GiB; thirty-two of them is 80 GiB
    assert kv.kv_bytes_per_sequence(327_680, 8192) == 2.5 * GiB
    assert kv.kv_bytes_total(327_680, 8192, 32) == 80 * GiB


def test_pool_tokens_seed000():
    # [chains] "The pool left for KV": 0.92 x 85.02 GB - 16.06 GB - 3.0 GB over 131,072 B.
    # The exact budget is 59.1584 GB -> 451,342 tokens; the seed prints 451,355
    # because it rounded 78.2184 GB to 78.22 GB before subtracting.
    assert kv.kv_pool_tokens(85.02e9, 0.92, 16.06e9, 3.0e9, 131_072) == math.floor(59.1584e9 / 131_072)
    assert kv.kv_pool_tokens(85.02e9, 0.92, 16.06e9, 3.0e9, 131_072) == 451_342
    # with the seed's rounded budget (and rounding, not flooring) the seed's figure comes back
    assert round(59.16e9 / 131_072) == 451_355


def test_fp8_pool_doubles_seed000():
    # [chains] "FP8 KV": 64 KiB per token; the pool's token count doubles (902,710 in the seed,
    # again from the rounded 59.16 GB budget; exact budget gives 902,685)
    fp8 = kv.kv_bytes_per_token(32, 8, 128, 1)
    assert fp8 == 64 * KiB
    assert kv.kv_pool_tokens(85.02e9, 0.92, 16.06e9, 3.0e9, fp8) == math.floor(59.1584e9 / 65_536)
    assert round(59.16e9 / 65_536) == 902_710


def test_concurrency_seed003_example1():
    # [kv-math] example 1: 59.9 GB / 1.074 GB = 55 sequences at 8k; 111 at 4k; 13 at 32k; 3 at 128k
    per_token = 131_072
    budget = 59.9e9
    assert kv.max_concurrency(budget, per_token * 8192) == 55
    assert kv.max_concurrency(budget, per_token * 4096) == 111
    assert kv.max_concurrency(budget, per_token * 32768) == 13
    assert kv.max_concurrency(budget, per_token * 131072) == 3


def test_concurrency_is_a_floor():
    assert kv.max_concurrency(10, 3) == 3
    assert kv.max_concurrency(9, 3) == 3


def test_block_waste_seed000():
    # [chains] "What block rounding wastes": 200 x 7.5 = 1,500 tokens; 256-token blocks 25,500
    assert kv.block_waste_tokens(num_seqs=200, block_size=16) == 1500
    assert kv.block_waste_tokens(num_seqs=200, block_size=256) == 25_500
    # 1,500 x 128 KiB = 196.6 MB (the seed's "197 MB")
    assert round(1500 * 131_072 / 1e6) == 197
    assert kv.block_waste_tokens(num_seqs=3, block_size=2) == 1.5


def test_state_crossover_by_hand():
    # Qwen3-Next-80B-A3B: a Gated DeltaNet layer holds conv 3 x 8,192 x 2 B = 49,152 and recurrent
    # 32 x 128 x 128 x 2 B = 1,048,576, 1,097,728 B; an attention layer 2 x 2 KV heads x 256 x 2 B = 2,048 B a
    # token. 36 + 12 layers; the all-attention twin has 48 x 2,048 = 98,304 B a token.
    s, b_h, b_d = 36 * (3 * 8192 * 2 + 32 * 128 * 128 * 2), 12 * 2048, 48 * 2048
    assert s == 39_518_208 and kv.state_crossover_tokens(s, b_h, b_d) == 536 == 1_097_728 // 2048
    # against Llama 3.3 70B (2 x 80 x 8 x 128 x 2 = 327,680 B a token): 39,518,208 / 303,104 = 130.4 -> 131
    assert kv.state_crossover_tokens(s, b_h, 327_680) == 131
    # at T*, the hybrid holds no more; one token earlier it holds more
    assert s + b_h * 536 <= b_d * 536 and s + b_h * 535 > b_d * 535
    with pytest.raises(ValueError, match="dense_bytes_per_token"):
        kv.state_crossover_tokens(s, b_h, b_h)
    with pytest.raises(ValueError, match="state_bytes"):
        kv.state_crossover_tokens(1.5, b_h, b_d)


def test_crossover_seed003_example4():
    # [kv-math]: 16.06e9 / 131,072 -> the seed prints 122,543; the exact quotient is 122,528.3
    # (16.06e9 / 131072 = 122528.07...); 141.2e9 / 327,680 = 430,908 (seed agrees).
    assert kv.crossover_tokens(16.06e9, 131_072) == pytest.approx(16.06e9 / 131_072)
    assert round(kv.crossover_tokens(16.06e9, 131_072)) == 122_528
    assert round(kv.crossover_tokens(141.2e9, 327_680)) == 430_908
    # [build-up] uses 15.0 GB of weights: 114,441 tokens
    assert round(kv.crossover_tokens(15.0e9, 131_072)) == 114_441


def test_decode_step_seed003_example5():
    # [kv-math] example 5: 16.06 GB + 17.18 GB = 33.24 GB; / 3,350 GB/s = 9.92 ms
    t = kv.decode_step_seconds(16.06e9, 131_072, 4096, 32, 3.35e12)
    assert round((16.06e9 + 131_072 * 4096 * 32) / 1e9, 2) == 33.24
    assert round(t * 1e3, 2) == 9.92
    assert round(32 / t) == 3225  # the seed prints 3,226 from the rounded 9.92 ms
    t32k = kv.decode_step_seconds(16.06e9, 131_072, 32768, 32, 3.35e12)
    assert round(t32k * 1e3, 1) == 45.8
    # the seed prints 699 tok/s from the rounded 45.8 ms; exact is 698.4
    assert round(32 / 0.0458) == 699 and round(32 / t32k) == 698


def test_weight_bytes_seed003():
    # [kv-math]: 8.03e9 x 2 = 16.06 GB
    assert kv.weight_bytes(8_030_000_000, 2) == 16_060_000_000
    assert kv.weight_bytes(8_030_000_001, 0.5) == 4_015_000_001  # int4 rounds up to whole bytes


def test_symbolic_forms_match_numbers():
    L, K, D, b = sympy.symbols("L K D b", positive=True, integer=True)
    expr = kv.kv_bytes_per_token(L, K, D, b)
    assert sympy.simplify(expr - 2 * L * K * D * b) == 0
    assert expr.subs({L: 32, K: 8, D: 128, b: 2}) == 131_072
    mla = kv.mla_bytes_per_token(L, sympy.Symbol("c"), sympy.Symbol("r"), b)
    assert mla.subs({L: 61, "c": 512, "r": 64, b: 2}) == 70_272
    pool = kv.kv_pool_tokens(*sympy.symbols("M u W O p", positive=True))
    assert pool.func == sympy.floor


def test_integers_in_integers_out():
    for value in (kv.kv_bytes_per_token(32, 8, 128, 2), kv.mla_bytes_per_token(61, 512, 64, 2),
                  kv.kv_bytes_total(131072, 100, 3), kv.max_concurrency(10**10, 131072 * 8192),
                  kv.kv_pool_tokens(80 * GB, 0.9, 16 * GB, 0, 131072)):
        assert type(value) is int


# --- gaps the mutation run found (benchmarks/mutation.py) -------------------------------------------
def test_pool_budget_is_not_rounded_up_by_default():
    # [chains]'s H100 as CUDA reports it, 85,018,877,624 B x 0.92 = 78,217,367,414.08 B: V0 and V1 before 0.14
    # subtract from the float, floor -> ...414; vLLM V1 from 0.14 requests ceil(M x u) -> ...415
    assert kv_pool_bytes(85_018_877_624, 0.92, 0, 0) == 78_217_367_414
    assert kv_pool_bytes(85_018_877_624, 0.92, 0, 0, round_budget_up=True) == 78_217_367_415


def test_pool_with_symbols_rounds_like_the_numbers():
    m, w = sympy.symbols("M W", positive=True)
    assert kv_pool_bytes(m, 1, w, 0, round_budget_up=True) == sympy.floor(sympy.ceiling(m) - w)
    assert kv_pool_bytes(m, 1, w, 0) == sympy.floor(m - w)


def test_a_float_weight_figure_is_divided_as_it_is():
    # 7.5 GB over 2 GPUs is 3.75 GB each (no rounding of a figure in GB); 7 whole bytes over 2 is 4 (rounded up)
    assert weight_bytes_per_gpu(7.5, 2) == 3.75
    assert weight_bytes_per_gpu(141.11, 8) == pytest.approx(17.63875)
    assert weight_bytes_per_gpu(16, 4) == 4 and weight_bytes_per_gpu(17, 4) == 5


def test_weight_bytes_rounds_only_whole_parameter_counts():
    # 7 parameters at int4: 3.5 B -> 4 whole bytes; a float count (8.03e9, a figure) x 2 stays a float
    assert weight_bytes(7, 0.5) == 4
    assert weight_bytes(2.5, 1) == 2.5
    assert weight_bytes(8.03e9, 2) == 16.06e9
