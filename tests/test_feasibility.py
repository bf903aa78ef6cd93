"""kvlib.check_deployment: each rule at its boundary, expected figures by hand."""

import pytest

import kvlib as kv
from kvlib.feasibility import check_deployment, default_max_num_seqs, tp_refusal

GB = 10**9


def _reasons(result, word):
    return [r for r in result.reasons if word in r]


# --- rules 1 and 2: tensor parallelism -------------------------------------------
def test_query_heads_must_divide_by_tp():
    # Qwen2.5-7B: 28 query heads, 4 KV heads. 28 % 4 == 0, 28 % 8 == 4.
    assert check_deployment("qwen2.5-7b", "H100-SXM", tp=4, seq_len=1024).fits
    bad = check_deployment("qwen2.5-7b", "H100-SXM", tp=8, seq_len=1024)
    assert not bad.fits and _reasons(bad, "28 query heads")


def test_kv_heads_must_divide_or_be_divided_by_tp():
    # Qwen2.5-7B at TP 7: 28 % 7 == 0 (query heads fine), but 4 % 7 and 7 % 4 are both non-zero.
    bad = check_deployment("qwen2.5-7b", "H100-SXM", tp=7, seq_len=1024)
    assert bad.reasons and all("4 KV heads" in r for r in bad.reasons)
    # Llama 3.1 8B at TP 16: 32 % 16 == 0 and 16 is a multiple of its 8 KV heads (replicated): refused by neither.
    assert tp_refusal(kv.load_model("llama-3.1-8b"), 16) is None
    # DeepSeek V3 (MLA, one latent): only the query-head rule applies; 128 % 8 == 0.
    assert tp_refusal(kv.load_model("deepseek-v3"), 8) is None


# --- rule 3: context ------------------------------------------------------------------
def test_context_at_max_position_embeddings():
    # Llama 2 7B: max_position_embeddings 4096.
    assert not _reasons(check_deployment("llama-2-7b", "H100-SXM", seq_len=4096), "max_position_embeddings")
    bad = check_deployment("llama-2-7b", "H100-SXM", seq_len=4097)
    assert bad.reasons == ("context 4,097 is over the model's max_position_embeddings 4,096",)


# --- rule 4: weights -------------------------------------------------------------------
def test_weights_at_the_budget():
    # M = 20 GB, u = 0.5 -> budget 10 GB; O = 1 GB -> 9 GB for weights and KV.
    common = dict(seq_len=1, gpu_memory_bytes=20 * GB, utilization=0.5, other_bytes=1 * GB)
    at = check_deployment("llama-3.1-8b", "H100-SXM", weight_bytes=9 * GB, **common)
    assert at.weight_room_bytes == 9 * GB and at.pool_bytes == 0
    assert not _reasons(at, "weights are")          # weights fit exactly; the KV of one token does not
    assert _reasons(at, "KV for 1 sequence of 1 tokens")
    over = check_deployment("llama-3.1-8b", "H100-SXM", weight_bytes=9 * GB + 1, **common)
    assert _reasons(over, "weights are") and over.pool_bytes == -1


def test_weights_split_over_tp_and_pp():
    # Llama 3.3 70B: 141,107,412,992 B of bf16 weights; 8 ranks hold ceil(W / 8) = 17,638,426,624 B each.
    r = check_deployment("llama-3.3-70b", "H100-SXM", tp=4, pp=2, seq_len=1024)
    assert r.weight_bytes_per_gpu == 17_638_426_624 and r.fits
    # on one H100 (budget ceil(85,018,877,624 x 0.92) = 78,217,367,415, less 3 GB) the weights do not fit
    one = check_deployment("llama-3.3-70b", "H100-SXM", seq_len=1024)
    assert one.weight_room_bytes == 78_217_367_415 - 3 * GB
    assert _reasons(one, "weights are 141.11 GB")


# --- rule 5: the batch's KV ---------------------------------------------------------
def test_kv_at_the_pool():
    # Llama 3.1 8B: 131,072 B per token. Pool = budget - weights = 2^30 exactly: 2 x 4096 tokens fill it.
    w = 10**9
    common = dict(weight_bytes=w, utilization=0.5, other_bytes=0, gpu_memory_bytes=2 * (w + 2**30))
    at = check_deployment("llama-3.1-8b", "H100-SXM", batch_size=2, seq_len=4096, **common)
    assert at.pool_bytes == 2**30 and at.kv_bytes_per_gpu == 2**30 and at.fits
    over = check_deployment("llama-3.1-8b", "H100-SXM", batch_size=2, seq_len=4097, **common)
    assert over.kv_bytes_per_gpu == 2**30 + 2 * 131072 and _reasons(over, "KV for 2 sequences of 4,097 tokens")


def test_kv_per_gpu_under_tp_and_pp():
    # TP 2 halves the KV heads (8 -> 4), PP 2 halves the layers (32 -> 16): a quarter per GPU.
    r = check_deployment("llama-3.1-8b", "H100-SXM", tp=2, pp=2, batch_size=4, seq_len=8192)
    assert r.kv_bytes_per_gpu == 4 * 8192 * 131072 // 4


def test_source_batch_of_32_at_32k_does_not_fit_one_h100():
    # 32 x 32,768 x 131,072 B = 137,438,953,472 B; pool ceil(0.92 M) - 16,060,522,496 - 3 GB.
    r = check_deployment("llama-3.1-8b", "H100-SXM", batch_size=32, seq_len=32768)
    assert r.kv_bytes_per_gpu == 137_438_953_472
    assert r.pool_bytes == 78_217_367_415 - 16_060_522_496 - 3 * GB
    assert not r.fits and r.summary().startswith("does not fit: KV for 32 sequences")


# --- rule 6: max_num_seqs ----------------------------------------------------------------
@pytest.mark.parametrize("gpu, limit", [("H100-SXM", 1024), ("H200", 1024), ("A100-80GB", 256), ("L40S", 256)])
def test_batch_at_default_max_num_seqs(gpu, limit):
    assert default_max_num_seqs(gpu) == limit
    assert not _reasons(check_deployment("qwen3-0.6b", gpu, batch_size=limit, seq_len=16), "max_num_seqs")
    assert _reasons(check_deployment("qwen3-0.6b", gpu, batch_size=limit + 1, seq_len=16), "max_num_seqs")


def test_the_max_num_seqs_reason_names_its_release():
    # 1,025 > 1,024 on an H100 (get_batch_defaults: 70 GiB and not an A100); 257 > 256 under V0's 0.7.3
    assert _reasons(check_deployment("qwen3-0.6b", "H100-SXM", batch_size=1025, seq_len=16), "max_num_seqs") == [
        "a batch of 1,025 is over vLLM 0.34.0's default max_num_seqs of 1,024 on H100-SXM"]
    assert _reasons(check_deployment("qwen3-0.6b", "H100-SXM", batch_size=257, seq_len=16, version="0.7.3"),
                    "max_num_seqs") == ["a batch of 257 is over vLLM 0.7.3's default max_num_seqs of 256 on H100-SXM"]


def test_max_num_seqs_by_release():
    assert default_max_num_seqs("H100-SXM", "0.7.3") == 256     # V0's default
    assert default_max_num_seqs("L40S", "0.8.2") == 1024        # V1 before the revert
    assert default_max_num_seqs("L40S", "0.8.4") == 256


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="batch_size"):
        check_deployment("llama-3.1-8b", "H100-SXM", batch_size=0, seq_len=1)
