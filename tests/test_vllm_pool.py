"""kvlib.vllm.pool.predict_pool: the forward recipe, one rule per test.

Recipe (notes/vllm-kv-accounting.md, end): R = ceil(T x u) from V1 0.14 (the
float T x u before, and in V0); A = floor(R - W - P - O - G); N = A // B.
Every expected figure below is worked by hand in the comments from these
facts, none is read back from kvlib:

- Llama 3.1 8B (config.json): 32 layers, 8 KV heads of 128 dims, so one
  16-token block holds 2 (K, V) x 32 x 8 x 128 x 2 B x 16 = 2,097,152 B
  (2 MiB) on one rank; 65,536 B per layer; 1 MiB at tp=2 (4 KV heads a rank).
- Its 16-bit weights: 8,030,261,248 parameters (model card, safetensors
  total) x 2 B = 16,060,522,496 B.
- gpt-oss-20b (config.json): 24 layers, 12 sliding + 12 full, 8 KV heads of
  64 dims: 2 x 8 x 64 x 2 B x 16 = 32,768 B per layer per block; V1 packs a
  block across a group of 12 layers: 393,216 B.
- format of the printed figure (notes, "Available KV cache memory"): '%.2f'
  up to 0.13, ``str(round(bytes / 2^30, 2))`` from 0.14 (trailing zero dropped).
"""

from __future__ import annotations

import pytest

from kvlib import GiB, load_model, parse_config
from kvlib.vllm import VllmLogError, predict_pool

LLAMA = load_model("llama-3.1-8b")

ENGINE_V1 = "engine V1 (from the version; pass engine= to choose)"
ENGINE_V0 = "engine V0 (from the version; pass engine= to choose)"
WEIGHTS = "weights: the model's 16-bit weights split evenly over tp x pp ranks"
GRAPHS = "CUDA-graph estimate not given: taken as 0, so the pool is an upper bound"


def test_v1_020_every_default():
    # T = 80 GiB = 85,899,345,920; u = 0.92 (0.20+); R = ceil(79,027,398,246.4) = 79,027,398,247
    # W = 16,060,522,496 / 2 = 8,030,261,248 (tp=2); P = 1 GiB = 1,073,741,824; O = G = 0
    # A = 79,027,398,247 - 8,030,261,248 - 1,073,741,824 = 69,923,395,175 -> 65.12 GiB
    # N = 69,923,395,175 // 1,048,576 = 66,684; blocks per request 8192 / 16 = 512
    # concurrency 66,684 / 512 = 130.2421875 -> 130.24; tokens int(130.2421875 x 8192) = 1,066,944
    f = predict_pool(LLAMA, 80 * GiB, version="0.20.2", tp=2, activation_bytes=GiB, max_model_len=8192)
    assert (f.engine, f.utilization, f.version, f.block_size) == ("v1", 0.92, "0.20.2", 16)
    assert (f.requested_bytes, f.weights_bytes, f.cudagraph_bytes) == (79_027_398_247, 8_030_261_248, 0)
    assert (f.activation_bytes, f.non_torch_bytes) == (1_073_741_824, 0)
    assert (f.available_bytes, f.available_gib_printed) == (69_923_395_175, "65.12")
    assert (f.bytes_per_block, f.num_gpu_blocks) == (1_048_576, 66_684)
    assert (f.gpu_kv_cache_tokens, f.max_concurrency, f.max_model_len) == (1_066_944, 130.24, 8192)
    assert f.assumptions == (ENGINE_V1, WEIGHTS, GRAPHS)


def test_v0_subtracts_from_the_float_and_prints_two_decimals():
    # T = 24 GiB; u = 0.90 (before 0.20); T x u = 23,192,823,398.4 (float, V0)
    # A = floor(23,192,823,398.4 - 16 GiB - 0.5 GiB) = floor(5,476,083,302.4) = 5,476,083,302
    #   = 5.0999999996 GiB -> '5.10'; N = 5,476,083,302 // 2,097,152 = 2,611
    # V0 tokens N x 16 = 41,776; concurrency 41,776 / 8192 = 5.0996 -> 5.10
    f = predict_pool(LLAMA, 24 * GiB, version="0.6.4", weights_bytes=16 * GiB, activation_bytes=GiB // 2,
                     cudagraph_bytes=GiB, max_model_len=8192)
    assert (f.engine, f.utilization, f.cudagraph_bytes) == ("v0", 0.90, 0)   # no CUDA-graph term before 0.20
    assert f.requested_bytes == 23_192_823_399                               # whole bytes in the record
    assert (f.available_bytes, f.available_gib_printed) == (5_476_083_302, "5.10")
    assert (f.num_gpu_blocks, f.gpu_kv_cache_tokens, f.max_concurrency) == (2_611, 41_776, 5.10)
    assert f.assumptions == (ENGINE_V0,)


@pytest.mark.parametrize("version,engine", [("0.7.3", "v0"), ("0.8.0", "v1")])
def test_engine_from_the_version(version, engine):
    # notes: V1 is the default engine from 0.8.0
    f = predict_pool(LLAMA, 80 * GiB, version=version, weights_bytes=0, activation_bytes=0)
    assert f.engine == engine and f.assumptions[0] == (ENGINE_V0 if engine == "v0" else ENGINE_V1)


def test_v1_rounds_the_budget_up_from_014():
    # same memory as the V0 test, V1: 0.13 subtracts from the float (A = 5,476,083,302, '5.10'),
    # 0.14 from ceil(23,192,823,398.4) = 23,192,823,399 (A = 5,476,083,303 = 5.1000000005 GiB, '5.1')
    kw = dict(engine="v1", weights_bytes=16 * GiB, activation_bytes=GiB // 2, utilization=0.9)
    old, new = predict_pool(LLAMA, 24 * GiB, version="0.13.0", **kw), predict_pool(LLAMA, 24 * GiB, version="0.14.0", **kw)
    assert (old.available_bytes, old.available_gib_printed) == (5_476_083_302, "5.10")
    assert (new.available_bytes, new.available_gib_printed) == (5_476_083_303, "5.1")
    # before 0.20 tokens are (N // groups) x 16 = 2,611 x 16 (one group)
    assert (new.num_gpu_blocks, new.gpu_kv_cache_tokens) == (2_611, 41_776)
    assert new.assumptions == ()            # engine, weights given; no CUDA-graph term before 0.20


def test_version_tuple_and_newest():
    f = predict_pool(LLAMA, 80 * GiB, version=(0, 20, 2), weights_bytes=0, activation_bytes=0)
    assert (f.version, f.utilization) == ("0.20.2", 0.92)
    newest = predict_pool(LLAMA, 80 * GiB, weights_bytes=0, activation_bytes=0, cudagraph_bytes=GiB)
    # None = newest: V1, 0.92, ceil; G kept: A = ceil(79,027,398,246.4) - 1 GiB = 77,953,656,423
    assert (newest.version, newest.engine, newest.cudagraph_bytes) == (None, "v1", GiB)
    assert newest.available_bytes == 77_953_656_423
    assert newest.gpu_kv_cache_tokens is None           # newest prints tokens from max_model_len only
    assert newest.assumptions == (ENGINE_V1,)


def test_eager_drops_the_cuda_graph_term():
    f = predict_pool(LLAMA, 80 * GiB, version="0.20.2", weights_bytes=0, activation_bytes=0, cudagraph_bytes=GiB,
                     enforce_eager=True)
    assert (f.cudagraph_bytes, f.available_bytes) == (0, 79_027_398_247)
    assert GRAPHS not in predict_pool(LLAMA, 80 * GiB, version="0.20.2", weights_bytes=0, activation_bytes=0,
                                      enforce_eager=True).assumptions


def test_weights_that_do_not_fit_leave_an_empty_pool():
    f = predict_pool(LLAMA, 24 * GiB, version="0.20.2", weights_bytes=30 * GiB, activation_bytes=0)
    assert (f.available_bytes, f.num_gpu_blocks, f.available_gib_printed) == (0, 0, "0.0")


def test_pipeline_stages_size_the_block_by_the_largest():
    # pp=3 over 32 layers: stages of 11, 11 and 10 layers; the block of an 11-layer stage is
    # 11 x 65,536 = 720,896 B. Weights ceil(16,060,522,496 / 3) = 5,353,507,499.
    # A = ceil(0.92 x 80 GiB) - W = 79,027,398,247 - 5,353,507,499 = 73,673,890,748; N = A // 720,896 = 102,197
    f = predict_pool(LLAMA, 80 * GiB, version="0.20.2", pp=3, activation_bytes=0)
    assert (f.weights_bytes, f.bytes_per_block) == (5_353_507_499, 720_896)
    assert (f.available_bytes, f.num_gpu_blocks) == (73_673_890_748, 102_197)


def test_hybrid_groups_before_020():
    # gpt-oss-20b, V1 0.13: u 0.90 of 80 GiB = 72 GiB; A = 72 - 13 - 1 = 58 GiB = 62,277,025,792
    # N = 62,277,025,792 // 393,216 = 158,378; two groups share the pool: tokens (158,378 // 2) x 16 = 1,267,024
    f = predict_pool(load_model("gpt-oss-20b"), 80 * GiB, version="0.13.0", engine="v1", weights_bytes=13 * GiB,
                     activation_bytes=GiB)
    assert (f.available_bytes, f.available_gib_printed) == (62_277_025_792, "58.00")
    assert (f.bytes_per_block, f.num_gpu_blocks, f.gpu_kv_cache_tokens) == (393_216, 158_378, 1_267_024)
    assert f.assumptions == ("2 KV-cache groups share the pool",)


@pytest.mark.parametrize("kwargs,message", [
    (dict(total_gpu_memory_bytes=-1), "total_gpu_memory_bytes must be a non-negative integer number of bytes, got -1"),
    (dict(activation_bytes=1.5), "activation_bytes must be a non-negative integer number of bytes, got 1.5"),
    (dict(non_torch_bytes="1"), "non_torch_bytes must be a non-negative integer number of bytes, got '1'"),
    (dict(engine="v2"), "engine must be 'v0' or 'v1', got 'v2'"),
    (dict(utilization=0), "utilization must be in (0, 1], got 0"),
    (dict(utilization=1.01), "utilization must be in (0, 1], got 1.01"),
])
def test_bad_arguments_exact_message(kwargs, message):
    args = dict(total_gpu_memory_bytes=80 * GiB, activation_bytes=0, weights_bytes=0, version="0.20.2") | kwargs
    total = args.pop("total_gpu_memory_bytes")
    with pytest.raises(VllmLogError) as info:
        predict_pool(LLAMA, total, **args)
    assert str(info.value) == message


def test_whole_gpu_and_zero_sizes_are_accepted():
    # u = 1 is allowed (the interval is (0, 1]); zero activation and non-torch bytes too
    f = predict_pool(LLAMA, 80 * GiB, version="0.20.2", utilization=1, weights_bytes=0, activation_bytes=0,
                     non_torch_bytes=0, enforce_eager=True)
    assert (f.available_bytes, f.num_gpu_blocks) == (80 * GiB, 80 * 512)    # 80 GiB / 2 MiB


def test_sliding_window_tokens_depend_on_the_batch_budget_and_release():
    # gpt-oss-20b, 0.20+: R = ceil(0.92 x 80 GiB) = 79,027,398,247; A = R - 13 GiB - 1 GiB = 63,995,012,711;
    # N = A // 393,216 = 162,747. Blocks per request at max_model_len 8192 (notes section 4): the full group
    # ceil(8192 / 16) = 512, the sliding group ceil(min(128 - 1 + F, 8192) / 16) + 1 with F the batch budget,
    # counted once before 0.33 and twice from 0.33:
    #   0.20, F = 256: 512 + ceil(383 / 16) + 1 = 537 -> tokens int(162,747 / 537 x 8192) = 2,482,725, 303.07x
    #   0.33, F = 2 x 256: 512 + ceil(639 / 16) + 1 = 553 -> int(162,747 / 553 x 8192) = 2,410,892, 294.30x
    spec = load_model("gpt-oss-20b")
    kw = dict(weights_bytes=13 * GiB, activation_bytes=GiB, max_model_len=8192, max_num_batched_tokens=256)
    v20 = predict_pool(spec, 80 * GiB, version="0.20.2", **kw)
    v33 = predict_pool(spec, 80 * GiB, version="0.33.0", **kw)
    assert (v20.num_gpu_blocks, v20.gpu_kv_cache_tokens, v20.max_concurrency) == (162_747, 2_482_725, 303.07)
    assert (v33.num_gpu_blocks, v33.gpu_kv_cache_tokens, v33.max_concurrency) == (162_747, 2_410_892, 294.3)
    # without the batch budget the sliding group's share is unknown: no token or concurrency figure
    unknown = predict_pool(spec, 80 * GiB, version="0.20.2", weights_bytes=13 * GiB, activation_bytes=GiB,
                           max_model_len=8192)
    assert (unknown.gpu_kv_cache_tokens, unknown.max_concurrency) == (None, None)


def test_the_020_boundary():
    # 0.19.1: u 0.90, ceil(0.9 x 80 GiB) = 77,309,411,328 = 72 GiB exactly; no CUDA-graph term;
    # tokens (N // 1) x 16 = 36,864 x 16 = 589,824 without max_model_len
    old = predict_pool(LLAMA, 80 * GiB, version="0.19.1", weights_bytes=0, activation_bytes=0, cudagraph_bytes=GiB)
    assert (old.cudagraph_bytes, old.available_bytes, old.num_gpu_blocks, old.gpu_kv_cache_tokens) == \
        (0, 77_309_411_328, 36_864, 589_824)
    assert GRAPHS not in predict_pool(LLAMA, 80 * GiB, version="0.19.1", weights_bytes=0, activation_bytes=0).assumptions
    # 0.20.0: the CUDA-graph term counts (A = 79,027,398,247 - 1 GiB = 77,953,656,423), tokens need max_model_len
    new = predict_pool(LLAMA, 80 * GiB, version="0.20.0", weights_bytes=0, activation_bytes=0, cudagraph_bytes=GiB)
    assert (new.cudagraph_bytes, new.available_bytes, new.gpu_kv_cache_tokens) == (GiB, 77_953_656_423, None)
    assert GRAPHS in predict_pool(LLAMA, 80 * GiB, version="0.20.0", weights_bytes=0, activation_bytes=0).assumptions


def test_group_size_rule_follows_the_release():
    # 8 full + 11 sliding layers, 8 KV heads of 64: 2 x 16 x 8 x 64 x 2 B = 32,768 B per layer per block.
    # vllm/v1/core/kv_cache_utils.py: 0.12-0.17 group by the smallest bucket unless largest < 1.25 x smallest:
    # 11 >= 10 -> groups of 8 (3 groups), B = 8 x 32,768 = 262,144; from 0.18 the bound is 1.5 x: 11 < 12 -> groups
    # of 11 (2 groups), B = 11 x 32,768 = 360,448
    spec = parse_config({"num_hidden_layers": 19, "num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 64,
                         "hidden_size": 512, "vocab_size": 1000, "intermediate_size": 1024, "sliding_window": 128,
                         "layer_types": ["full_attention"] * 8 + ["sliding_attention"] * 11})
    kw = dict(engine="v1", weights_bytes=0, activation_bytes=0)
    v13, v15 = predict_pool(spec, 8 * GiB, version="0.13.0", **kw), predict_pool(spec, 8 * GiB, version="0.18.0", **kw)
    assert (v13.bytes_per_block, v13.assumptions) == (262_144, ("3 KV-cache groups share the pool",))
    assert (v15.bytes_per_block, v15.assumptions) == (360_448, ("2 KV-cache groups share the pool",))


def test_fp8_cache_halves_the_block():
    # 1-byte elements: 2 x 32 x 8 x 128 x 1 B x 16 = 1,048,576 B a block
    f = predict_pool(LLAMA, 80 * GiB, version="0.20.2", weights_bytes=0, activation_bytes=0, kv_cache_dtype="fp8")
    assert f.bytes_per_block == 1_048_576


def test_v0_concurrency_is_tokens_over_max_model_len():
    # V0 prints N x bs / max_model_len: 2,611 x 16 / 1000 = 41.776 -> 41.78 (not N / ceil(1000 / 16) = 41.44)
    f = predict_pool(LLAMA, 24 * GiB, version="0.6.4", weights_bytes=16 * GiB, activation_bytes=GiB // 2,
                     max_model_len=1000)
    assert (f.num_gpu_blocks, f.max_concurrency) == (2_611, 41.78)


def test_v0_sizes_every_layer_as_full_attention():
    # V0 has no hybrid KV-cache manager: gpt-oss-20b's block spans all 24 layers, 24 x 32,768 = 786,432 B
    # (V1 groups 12 layers: 393,216 B)
    f = predict_pool(load_model("gpt-oss-20b"), 80 * GiB, version="0.6.4", engine="v0", weights_bytes=0,
                     activation_bytes=0)
    assert (f.bytes_per_block, f.total_gpu_memory_bytes) == (786_432, 80 * GiB)
