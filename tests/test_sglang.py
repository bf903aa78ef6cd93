"""kvlib.sglang: SGLang's pool, pages, window split, default fraction and HiCache, rule by rule.

Expected figures are worked by hand in the comments from SGLang's source (the released wheels named in
kvlib/sglang.py). The real startup logs are checked in tests/test_sglang_log.py.
"""

import pytest

import kvlib as kv
from kvlib import GiB, load_model
from kvlib.sglang import (
    SGLangError,
    allocated_kv_bytes,
    cell_size_bytes,
    default_mem_fraction_static,
    default_page_size,
    hicache_host_tokens,
    kv_budget_bytes,
    kv_element_bytes,
    max_total_num_tokens,
    page_waste_tokens,
    parse_release,
    swa_pool_split,
    uses_hybrid_swa_pool,
)
from kvlib.sglang_log import parse_log

# --- the cell ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("model,tp,dtype,cell", [
    ("llama-3.1-8b", 1, "auto", 8 * (128 + 128) * 32 * 2),           # 131,072
    ("llama-3.1-8b", 4, "auto", 2 * (128 + 128) * 32 * 2),           # 8 KV heads over 4 ranks
    ("llama-3.1-8b", 16, "auto", 1 * (128 + 128) * 32 * 2),          # past K: one head copied per rank
    ("llama-3.1-8b", 1, "fp8_e4m3", 8 * (128 + 128) * 32 * 1),
    ("qwen2.5-32b", 4, "auto", 2 * (128 + 128) * 64 * 2),            # 03.log's rank: 65,536
    ("deepseek-v3", 8, "auto", (512 + 64) * 61 * 2),                 # MLA, the same on every rank
    ("deepseek-v3.2", 8, "auto", (512 + 64) * 61 * 2 + 61 * (128 + 128 // 128 * 4)),   # + the DSA indexer
    ("mistral-7b", 1, "auto", 8 * (128 + 128) * 32 * 2),             # windowed layers keep every token
    ("gemma-2-9b", 1, "auto", 8 * (256 + 256) * 42 * 2),             # hybrid SWA memory off for Gemma 2
])
def test_cell_size(model, tp, dtype, cell):
    assert cell_size_bytes(model, tp=tp, kv_cache_dtype=dtype) == cell


@pytest.mark.parametrize("call,message", [
    (lambda: cell_size_bytes("gpt-oss-20b"), "openai/gpt-oss-20b: SGLang keeps its window layers in a pool of "
                                             "their own; size it with swa_pool_split"),
    (lambda: cell_size_bytes("qwen3-next"), "Qwen/Qwen3-Next-80B-A3B-Thinking: SGLang splits the budget between its "
                                            "Mamba/linear-attention state pool and the KV pool "
                                            "(--mamba-full-memory-ratio); kvlib does not model that split"),
    (lambda: cell_size_bytes("llama-3.1-8b", tp=3), "tp=3 must divide num_kv_heads=8 or be a multiple of it"),
    (lambda: cell_size_bytes("llama-3.1-8b", tp=0), "tp must be a positive integer, got 0"),
    (lambda: cell_size_bytes("llama-3.1-8b", kv_cache_dtype="fp4_e2m1"),
     "kv_cache_dtype 'fp4_e2m1': SGLang adds scale buffers to an fp4 or mxfp8 cache that kvlib does not model"),
    (lambda: cell_size_bytes("no-such-model"), "unknown model 'no-such-model': not a bundled id"),
    (lambda: kv_element_bytes("llama-3.1-8b", "int4"), "kv_cache_dtype 'int4' is not a cache dtype SGLang offers"),
])
def test_cell_size_refusals_are_one_line(call, message):
    with pytest.raises(SGLangError) as err:
        call()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_which_models_get_a_window_pool():
    # configs/model_config.py is_hybrid_swa_model (0.5.23); Gemma 2/3 turned off in model_overrides/gemma2_gemma3.py
    assert [uses_hybrid_swa_pool(m) for m in ("gpt-oss-120b", "llama-4-scout", "gemma-4-26b", "gemma-2-9b",
                                              "mistral-7b", "llama-3.1-8b")] == [True, True, True, False, False, False]
    assert not uses_hybrid_swa_pool("gpt-oss-20b", disable_hybrid_swa_memory=True)


# --- the budget and the pool, forwards ----------------------------------------------------------------
def test_budget_is_f_of_the_memory_before_the_load_less_what_the_load_took():
    # M_1 - M_0 (1 - f): 70 GiB free after, 80 before, f = 0.9: 70 - 8 = 62 GiB
    assert kv_budget_bytes(80 * GiB, 70 * GiB, 0.9) == 62 * GiB
    # f = 1: nothing kept back; weights larger than f M_0: negative
    assert kv_budget_bytes(80 * GiB, 70 * GiB, 1) == 70 * GiB
    assert kv_budget_bytes(80 * GiB, 10 * GiB, 0.5) == -30 * GiB


def test_pool_from_the_gpu_table_and_the_stored_weights():
    # H100: CUDA total 79.18 GiB = 85,018,877,624 B (kvlib.gpus); Llama 3.1 8B's weights as stored
    # 16,094,076,928 B (kvlib.weights); f = 0.88: 0.88 x 85,018,877,624 = 74,816,612,309.12;
    # less the weights = 58,722,535,381.12; / 131,072 = 448,017.7 -> 448,017
    assert max_total_num_tokens("llama-3.1-8b", "h100", mem_fraction_static=0.88) == 448_017
    # weight_bytes replaces the stored weights: (74,816,612,309.12 - 17,179,869,184) / 131,072 = 439,733.5
    assert max_total_num_tokens("llama-3.1-8b", "h100", mem_fraction_static=0.88, weight_bytes=16 * GiB) == 439_733


def test_pool_pages_round_down():
    # 10 GiB free after, 20 before, f = 0.9: budget 8 GiB = 8,589,934,592 B; / 131,072 = 65,536 exactly;
    # with a budget 1 byte short it is 65,535, and 64-token pages make it 65,472
    args = dict(mem_fraction_static=0.9, free_before_load=20 * GiB)
    assert max_total_num_tokens("llama-3.1-8b", free_after_load=10 * GiB, **args) == 65_536
    assert max_total_num_tokens("llama-3.1-8b", free_after_load=10 * GiB - 1, **args) == 65_535
    assert max_total_num_tokens("llama-3.1-8b", free_after_load=10 * GiB - 1, page_size=64, **args) == 65_472


def test_pool_of_a_window_model_is_its_full_layer_pool():
    # gpt-oss-20b, budget 8 GiB as above: full = floor(8,589,934,592 / (12 x 2,048 + 0.8 x 12 x 2,048))
    # = floor(194,180.7) = 194,180
    assert max_total_num_tokens("gpt-oss-20b", mem_fraction_static=0.9, free_before_load=20 * GiB,
                                free_after_load=10 * GiB) == 194_180
    # --disable-hybrid-swa-memory: every layer in the one pool, 24 x 2,048 = 49,152 B: 174,762.7 -> 174,762
    assert max_total_num_tokens("gpt-oss-20b", mem_fraction_static=0.9, free_before_load=20 * GiB,
                                free_after_load=10 * GiB, disable_hybrid_swa_memory=True) == 174_762


@pytest.mark.parametrize("kwargs,message", [
    (dict(mem_fraction_static=0.88), "give a gpu or free_before_load"),
    (dict(mem_fraction_static=1.5, gpu="h100"), "mem_fraction_static must be a number in (0, 1], got 1.5"),
    (dict(mem_fraction_static=0.5, gpu="h100", weight_bytes=60 * GiB), "no KV pool: the weights leave"),
    (dict(mem_fraction_static=0.88, gpu="z100"), "unknown GPU 'z100'"),
    (dict(mem_fraction_static=0.88, free_before_load=-1), "free_before_load must be a whole number of bytes >= 0"),
    (dict(mem_fraction_static=0.88, gpu="h100", page_size=0), "page_size must be a positive integer, got 0"),
])
def test_pool_refusals_are_one_line(kwargs, message):
    with pytest.raises(SGLangError) as err:
        max_total_num_tokens("llama-3.1-8b", **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_mem_fraction_static_is_required():
    with pytest.raises(TypeError):
        max_total_num_tokens("llama-3.1-8b", "h100")


def test_allocated_buffers_have_a_padding_page():
    # memory_pool.py: size + page_size rows. Llama 3.1 8B, 1,000 tokens, page 1: 1,001 x 8 x 128 x 2 x 32 per K
    assert allocated_kv_bytes("llama-3.1-8b", 1000) == {"k": 1001 * 65_536, "v": 1001 * 65_536}
    assert allocated_kv_bytes("llama-3.1-8b", 1000, page_size=64)["k"] == 1064 * 65_536
    # MLA: one latent buffer; DeepSeek-V3.2's indexer is a buffer of its own, not in "KV size"
    assert allocated_kv_bytes("deepseek-v3", 1000, tp=8) == {"kv": 1001 * 576 * 61 * 2}
    assert allocated_kv_bytes("deepseek-v3.2", 1000, tp=8) == {"kv": 1001 * 576 * 61 * 2}


# --- the window split -----------------------------------------------------------------------------------
def test_swa_split_by_hand():
    # gpt-oss-120b at TP 2: 18 full + 18 sliding layers, 8 KV heads / 2 = 4 x (64 + 64) x 2 B = 1,024 B a layer.
    # 20 GiB = 21,474,836,480 B; full = floor(21,474,836,480 / (18 x 1,024 + 0.5 x 18 x 1,024)) = 776,722.9
    # -> 776,722; swa = floor(776,722 x 0.5) = 388,361
    assert swa_pool_split("gpt-oss-120b", 20 * GiB, tp=2, swa_full_tokens_ratio=0.5) == (776_722, 388_361)
    # 64-token pages: 776,722 -> 776,704; 388,352 -> 388,352
    assert swa_pool_split("gpt-oss-120b", 20 * GiB, tp=2, swa_full_tokens_ratio=0.5, page_size=64) == \
        (776_704, 388_352)


def test_swa_split_with_two_geometries():
    # Gemma 4 26B-A4B: 5 full layers of 2 KV heads x (512 + 512) x 2 = 4,096 B, 25 sliding of 8 x (256 + 256) x 2
    # = 8,192 B. 10 GiB = 10,737,418,240 B; full = floor(10,737,418,240 / (5 x 4,096 + 0.8 x 25 x 8,192))
    # = floor(10,737,418,240 / 184,320) = 58,254.2 -> 58,254; swa = floor(46,603.2) = 46,603
    assert swa_pool_split("gemma-4-26b", 10 * GiB) == (58_254, 46_603)


@pytest.mark.parametrize("call,message", [
    (lambda: swa_pool_split("llama-3.1-8b", GiB), "meta-llama/Llama-3.1-8B: SGLang keeps no sliding-window pool"),
    (lambda: swa_pool_split("gpt-oss-20b", GiB, swa_full_tokens_ratio=0),
     "swa_full_tokens_ratio must be a number in (0, 1]"),
    # 5,000,000 B: full = floor(5,000,000 / 44,236.8) = 113, swa = floor(90.4) = 90 < window 128 + page 1
    (lambda: swa_pool_split("gpt-oss-20b", 5_000_000), "the window pool (90 tokens) cannot hold one request: "
                                                       "the window (128) plus a page (1)"),
])
def test_swa_refusals_are_one_line(call, message):
    with pytest.raises(SGLangError) as err:
        call()
    assert message in str(err.value) and "\n" not in str(err.value)


# --- the default --mem-fraction-static ---------------------------------------------------------------------
@pytest.mark.parametrize("tp,f", [(1, 0.88), (2, 0.87), (3, 0.87), (4, 0.85), (7, 0.85), (8, 0.81), (16, 0.79)])
def test_default_fraction_by_tp_in_0_4(tp, f):
    # server_args.py __post_init__, 0.4.1 to 0.4.3.post4: a TP table, the GPU not consulted
    assert default_mem_fraction_static(24_576, tp=tp, release="0.4.3.post4") == f
    assert default_mem_fraction_static(81_559, tp=tp, release="0.4.1") == f


def test_default_fraction_0_5_8_by_hand():
    # H100 (nvidia-smi 81,559 MiB), TP 1: C 8,192, decode graphs to 256: 512 + 12,288 + 512 + 128 = 13,440 MiB
    # (> 10,240); (81,559 - 13,440) / 81,559 = 0.83521 -> 0.835
    assert default_mem_fraction_static(81_559, release="0.5.8.post1") == 0.835
    # RTX 4090 (24,564 MiB), TP 1: C 2,048, graphs 24: 512 + 3,072 + 48 + 128 = 3,760; 20,804 / 24,564 = 0.84693
    assert default_mem_fraction_static(24_564, release="0.5.6") == 0.847
    # the same at TP 4: graphs 80, 512 + 3,072 + 160 + 512 = 4,256; 20,308 / 24,564 = 0.82674 -> 0.827
    assert default_mem_fraction_static(24_564, tp=4, release="0.5.8.post1") == 0.827


def test_default_fraction_0_5_23_by_hand():
    # H100, TP 1: 512 + 12,288 + 128 + 2 x 256 + 8 x 58 prefill graphs (4..8,192: 8 + 14 + 8 + 8 + 12 + 8)
    # = 13,904; (81,559 - 13,904) / 81,559 = 0.82952 -> 0.83
    assert default_mem_fraction_static(81_559) == 0.83
    # MLA: a flat 1,536 MiB for the prefill graphs: 512 + 12,288 + 128 + 512 + 1,536 = 14,976; 0.81638 -> 0.816
    assert default_mem_fraction_static(81_559, mla=True) == 0.816
    # RTX 4090, TP 1: C 4,096, graphs 48; 8 x 50 prefill sizes (to 4,096): 512 + 6,144 + 128 + 96 + 400 = 7,280;
    # (24,564 - 7,280) / 24,564 = 0.70363 -> 0.704
    assert default_mem_fraction_static(24_564, release="0.5.22") == 0.704


@pytest.mark.parametrize("kwargs,message", [
    (dict(release="0.5.1"), "release '0.5.1': kvlib has SGLang's default mem_fraction_static for 0.4.1-0.4.3.post4"),
    (dict(release="latest"), "release must be an SGLang version such as '0.5.8.post1', got 'latest'"),
    (dict(release="0.4.2", vision=(27, 1152)), "SGLang had no reduction for a vision tower before 0.5"),
    (dict(vision=(27,)), "vision must be (num_hidden_layers, hidden_size)"),
    (dict(tp=0), "tp must be a positive integer, got 0"),
])
def test_default_fraction_refusals(kwargs, message):
    with pytest.raises(SGLangError) as err:
        default_mem_fraction_static(81_559, **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_releases_compare():
    assert parse_release("0.5.3rc0") < parse_release("0.5.3") < parse_release("0.5.3.post1") < parse_release("0.5.10")


# --- pages and HiCache ---------------------------------------------------------------------------------------
def test_page_waste_by_hand():
    # -T mod page: 100 -> 28, 1,000 -> 24, 4,097 -> 63, 4,096 -> 0 at 64; nothing at SGLang's page of 1
    assert page_waste_tokens([100, 1000, 4097, 4096], page_size=64) == 28 + 24 + 63
    assert page_waste_tokens([100, 1000, 4097, 4096]) == 0
    assert page_waste_tokens(4097, page_size=128) == 127
    assert page_waste_tokens([]) == 0
    with pytest.raises(SGLangError, match="seq_lens must hold token counts >= 0, got -1"):
        page_waste_tokens([5, -1])


def test_default_page_sizes():
    # arg_groups/overrides.py (0.5.23): FlashMLA 64 always, TRT-LLM MLA/MHA 64 when unset, FA4 128 on Blackwell
    assert [default_page_size(b) for b in (None, "flashinfer", "fa3", "flashmla", "trtllm_mla", "trtllm_mha",
                                           "fa4", "dsv4")] == [1, 1, 1, 64, 64, 64, 128, 256]
    with pytest.raises(SGLangError, match="unknown attention_backend 'cutlass'"):
        default_page_size("cutlass")


def test_hicache_host_pool_by_hand():
    # ratio: int(444,500 x 2) = 889,000, + a padding page of 1 = 889,001; at 64-token pages:
    # 889,000 // 64 = 13,890 pages + 1 = 13,891 x 64 = 889,024
    assert hicache_host_tokens(444_500) == 889_001
    assert hicache_host_tokens(444_500, page_size=64) == 889_024
    assert hicache_host_tokens(444_500, hicache_ratio=1.5) == 666_751
    # size in decimal GB: 100 x 10^9 // 131,072 = 762,939 (.45) + 1
    assert hicache_host_tokens(444_500, hicache_size=100, cell_bytes=131_072) == 762_940
    with pytest.raises(SGLangError, match="cell_bytes must be a positive integer, got None"):
        hicache_host_tokens(444_500, hicache_size=100)


def test_reachable_from_kvlib():
    assert kv.sglang.max_total_num_tokens is max_total_num_tokens
    assert kv.sglang_log.parse_log is parse_log
    assert load_model("kimi-k2.5").kv_bytes_per_token() == 70_272
