"""kvlib.info: the ``kvlib info --json`` report, in-process, every figure worked by hand."""

import pytest

import kvlib
from kvlib.info import InfoError, info_report

# Llama 3.1 8B (its config.json): 32 layers, d = 4,096, 32 query heads, 8 KV heads of 128, FFN 14,336,
# vocabulary 128,256, untied head. Parameters: embedding + head 2 x 128,256 x 4,096 = 1,050,673,152;
# per layer attention 4,096 x (4,096 + 1,024 + 1,024 + 4,096) = 41,943,040, MLP 3 x 4,096 x 14,336 = 176,160,768,
# two norms 8,192: 218,112,000, x 32 = 6,979,584,000; final norm 4,096. Total 8,030,261,248 (the card: 8.03B).
LLAMA_8B_PARAMS = 8_030_261_248
# KV per token: 2 (K and V) x 32 layers x 8 heads x 128 x 2 B = 131,072 B
LLAMA_8B_KV_PER_TOKEN = 131_072
# An H100 SXM as CUDA reports it: 79.18 GiB = 79 x 2^30 + 0.18 x 2^30 = 84,825,604,096 + 193,273,528.32
H100_CUDA_BYTES = 85_018_877_624


def test_geometry_and_parameters_of_a_dense_model():
    # bf16 2 B per parameter, fp8 1 B, int4 half a byte (8,030,261,248 is even: exactly 4,015,130,624)
    assert info_report("llama-3.1-8b") == {
        "model": "meta-llama/Llama-3.1-8B",
        "source": "bundled:meta-llama/Llama-3.1-8B",
        "attention": "gqa",
        "num_layers": 32,
        "num_kv_heads": 8,
        "head_dim": 128,
        "num_attention_heads": 32,
        "layer_kinds": {"full": 32},
        "sliding_window": None,
        "attention_chunk_size": None,
        "num_params": LLAMA_8B_PARAMS,
        "num_params_active": LLAMA_8B_PARAMS,
        "num_params_mtp": 0,
        "num_params_error": None,
        "weight_bytes": {"bf16": 16_060_522_496, "fp8": 8_030_261_248, "int4": 4_015_130_624},
        "kv_dtype": "auto (16-bit)",
        "kv_dtype_bytes": 2,
        "kv_bytes_per_token": LLAMA_8B_KV_PER_TOKEN,
        # every per-GPU figure at every TP, 1 included; no indexer, no state layers
        "tp": 1,
        "kv_bytes_per_token_per_gpu": LLAMA_8B_KV_PER_TOKEN,
        "indexer_bytes_per_token": 0,
        "indexer_bytes_per_token_per_gpu": 0,
        "state_bytes_per_sequence": 0,
        "state_bytes_per_sequence_per_gpu": 0,
        "state_layers": {},
        "state_error": None,
    }


def test_layer_kinds_are_counted_per_kind():
    # gpt-oss-20b (its config.json): 24 layers alternating a 128-token sliding window and full attention
    r = info_report("gpt-oss-20b")
    assert r["layer_kinds"] == {"full": 12, "sliding": 12} and r["sliding_window"] == 128


def test_kv_dtype_named_and_its_bytes_used():
    # fp8: 1 B per element, 131,072 / 2 = 65,536 B per token
    r = info_report("llama-3.1-8b", kv_dtype="fp8")
    assert (r["kv_dtype"], r["kv_dtype_bytes"], r["kv_bytes_per_token"]) == ("fp8", 1, 65_536)


def test_context_adds_the_sequence_and_tp_the_per_gpu_figures():
    # 131,072 B x 8,192 tokens = 2^30 B; over tp = 2 GPUs (4 KV heads each) 65,536 B per token, 2^29 per sequence
    one = info_report("llama-3.1-8b", context=8192)
    assert one["context"] == 8192 and one["kv_bytes_per_sequence"] == 2**30
    assert (one["tp"], one["kv_bytes_per_token_per_gpu"], one["kv_bytes_per_sequence_per_gpu"]) == (1, 131_072, 2**30)
    two = info_report("llama-3.1-8b", context=8192, tp=2)
    assert (two["tp"], two["kv_bytes_per_token_per_gpu"]) == (2, 65_536)
    assert two["kv_bytes_per_sequence"] == 2**30 and two["kv_bytes_per_sequence_per_gpu"] == 2**29
    no_context = info_report("llama-3.1-8b", tp=2)
    assert no_context["kv_bytes_per_token_per_gpu"] == 65_536
    assert "context" not in no_context and "kv_bytes_per_sequence_per_gpu" not in no_context
    assert "gpu" not in two and "kv_pool_bytes" not in two


def test_tp_must_fit_the_kv_heads():
    # 8 KV heads do not split over 3 GPUs
    with pytest.raises(ValueError, match="tp"):
        info_report("llama-3.1-8b", tp=3)


def test_pool_on_one_gpu_with_tensor_parallel_weights():
    # Llama 3.1 8B at 8K on H100s, tp = 2, vLLM 0.28's rules (0.92; Model Runner V2 for dense models, which
    # estimates no CUDA-graph memory before 0.29):
    # budget ceil(85,018,877,624 x 0.92) = 78,217,367,415.
    # weights as stored: the bf16 count 16,060,522,496 split in two, except the 65 norms of 4,096 x 2 B that every
    # rank keeps (532,480 B), plus the rotary cache 131,072 x 128 x 2 = 33,554,432 B.
    weights = (16_060_522_496 - 532_480) // 2 + 532_480 + 33_554_432
    # torch peak: the forward over 8,192 tokens, 2 B x (3 x 14,336 / 2 + 2 x 4,096) x 1.408 per token, beats the
    # sampler's 1,024 x 128,256 x 2 B; non-torch at tp 2: 2.10 GiB; no CUDA-graph term in this release.
    peak = int(8192 * 2 * (3 * 14336 // 2 + 2 * 4096) * 1.408)
    non_torch = round(2.10 * 2**30)
    # Model Runner V2 keeps its sampler's penalty state: 1,024 requests x (128,256 + cdiv(128,256, 32)) x 4 B
    state = 1024 * (128256 + 4008) * 4
    pool = 78_217_367_415 - weights - peak - non_torch - state
    r = info_report("llama-3.1-8b", context=8192, gpu="H100-SXM", tp=2, vllm_version="0.28.0")
    assert (r["gpu"], r["gpu_cuda_memory_bytes"], r["utilization"], r["overhead_bytes"]) == (
        "H100-SXM", H100_CUDA_BYTES, 0.92, None)
    assert r["weight_bytes_per_gpu"] == weights
    assert r["vllm_pool"]["parts"]["torch peak"]["bytes"] == peak
    assert r["kv_pool_bytes"] == pool
    assert r["kv_pool_tokens"] == pool // (16 * 65536) * 16      # whole blocks of 16 tokens x 64 KiB per GPU
    assert r["max_concurrency"] == pool // 2**29
    assert "weights as stored" in r["assumptions"]


def test_pool_follows_utilization_and_overhead():
    # utilization 0.5, --overhead 0 (replaces torch peak, non-torch and sampler state), tp = 1, vLLM 0.28 (no graph
    # estimate):
    # ceil(85,018,877,624 x 0.5) = 42,509,438,812 - (16,060,522,496 + 33,554,432 rotary cache) = 26,415,361,884 B;
    # / 2 MiB per block = 12,595 blocks = 201,520 tokens; / 2^30 = 24.6 -> 24 sequences of 8K
    r = info_report("llama-3.1-8b", context=8192, gpu="H100-SXM", utilization=0.5, overhead_bytes=0,
                    vllm_version="0.28.0")
    assert (r["utilization"], r["overhead_bytes"]) == (0.5, 0)
    assert r["weight_bytes_per_gpu"] == 16_094_076_928
    assert r["kv_pool_bytes"] == 26_415_361_884
    assert (r["kv_pool_tokens"], r["max_concurrency"]) == (201_520, 24)


def test_no_pool_left_is_zero_sequences_not_a_negative_count():
    # Llama 3.1 8B's 16.09 GB of weights on an L4 at utilization 0.1: ceil(23,654,532,383 x 0.1) = 2,365,453,239 B
    # cannot hold them; the report says so in one line instead of a negative pool.
    r = info_report("llama-3.1-8b", context=8192, gpu="L4", utilization=0.1)
    assert r["kv_pool_bytes"] == 0
    assert r["kv_pool_tokens"] == 0 and r["max_concurrency"] == 0
    assert r["vllm_pool"]["does_not_fit"].startswith("does not fit: weights 14.99 GiB > budget ")


def test_gpu_needs_a_context():
    with pytest.raises(InfoError) as info:
        info_report("llama-3.1-8b", gpu="H100-SXM")
    assert str(info.value) == "--gpu needs --context (concurrency is per context length)"


def _qwen_7b_without(field):
    config = dict(kvlib.bundled_config("qwen2.5-7b"))
    del config[field]
    return kvlib.load_model(config, name="qwen-no-" + field)


def test_unknown_width_reports_no_parameters_and_no_pool():
    # Qwen2.5-7B without vocab_size: the KV geometry stands (2 x 28 layers x 4 heads x 128 x 2 B = 57,344 B
    # per token), the parameter count and therefore the weights and the pool do not
    spec = _qwen_7b_without("vocab_size")
    r = info_report(spec, context=4096, gpu="H100-SXM")
    # the reader looked for the vocabulary under each name configs use for it
    message = "missing field vocab_size / n_vocab / padded_vocab_size: the parameter count needs it"
    assert r["kv_bytes_per_token"] == 57_344 and r["kv_bytes_per_sequence"] == 57_344 * 4096
    assert (r["num_params"], r["num_params_active"], r["num_params_mtp"]) == (None, None, None)
    assert r["num_params_error"] == message
    assert r["weight_bytes"] == {"bf16": None, "fp8": None, "int4": None}
    assert (r["weight_bytes_per_gpu"], r["kv_pool_bytes"], r["kv_pool_tokens"], r["max_concurrency"]) == (
        None, None, None, None)
    assert r["gpu"] == "H100-SXM" and r["utilization"] is None and r["vllm_pool"] is None
    assert r["assumptions"] == f"no pool: the weights are unknown ({message})"


def test_kv_dtype_carries_into_every_per_sequence_and_per_gpu_figure():
    # fp8 (1 B): 65,536 B per token; x 8,192 = 2^29 B per sequence; over tp = 2: 32,768 B and 2^28 B per GPU
    r = info_report("llama-3.1-8b", kv_dtype="fp8", context=8192, tp=2)
    assert (r["kv_bytes_per_token"], r["kv_bytes_per_token_per_gpu"]) == (65_536, 32_768)
    assert (r["kv_bytes_per_sequence"], r["kv_bytes_per_sequence_per_gpu"]) == (2**29, 2**28)


def test_an_unknown_model_is_not_fetched_unless_asked():
    # offline by default: an id that is not bundled is refused with the hint to pass --hub
    from kvlib.config import ConfigError
    with pytest.raises(ConfigError, match=r"^unknown model 'no-such-model': .* add --hub to fetch it"):
        info_report("no-such-model")


def test_hub_is_asked_only_when_hub_is_true(monkeypatch):
    # The Hub fetch replaced by a stand-in that hands back Qwen2.5-7B's config (offline): with hub=True an id that
    # is not bundled is fetched (57,344 B per token, above), without it it is refused.
    import kvlib.config
    monkeypatch.setattr(kvlib.config, "_fetch_from_hub",
                        lambda repo_id: (kvlib.bundled_config("qwen2.5-7b"), f"hub:{repo_id}"))
    r = info_report("someone/qwen-copy", hub=True)
    assert (r["model"], r["source"], r["kv_bytes_per_token"]) == ("someone/qwen-copy", "hub:someone/qwen-copy", 57_344)
    with pytest.raises(kvlib.config.ConfigError, match="add --hub"):
        info_report("someone/qwen-copy")


def test_pool_in_a_kv_dtype():
    # the same pool as at bf16 (the KV dtype changes no other part), in fp8: 16-token blocks of 32,768 B per token
    # per GPU, 2^28 B per sequence per GPU
    bf16 = info_report("llama-3.1-8b", context=8192, gpu="H100-SXM", tp=2, vllm_version="0.28.0")["kv_pool_bytes"]
    r = info_report("llama-3.1-8b", kv_dtype="fp8", context=8192, gpu="H100-SXM", tp=2, vllm_version="0.28.0")
    assert r["kv_pool_bytes"] == bf16
    assert (r["kv_pool_tokens"], r["max_concurrency"]) == (bf16 // (16 * 32768) * 16, bf16 // 2**28)


def test_a_pool_of_one_byte_holds_one_token_of_one_byte():
    # The smallest cache there is: 1 layer, 1 KV head of 1 dim, fp4: 2 x 1 x 1 x 1 x 0.5 = 1 B per token.
    # Its 30 parameters (embedding + head 2 x 10 x 1, q/k/v/o 4, gated MLP 3, 2 norms, final norm 1) are 60 B in
    # bf16. Overhead set so that ceil(85,018,877,624 x 0.5) = 42,509,438,812 - 60 - overhead leaves 1 byte:
    # one token, one sequence of 1 token (vLLM 0.28: no graph estimate for this dense model, no margin).
    tiny = kvlib.load_model({"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 1,
                             "num_key_value_heads": 1, "hidden_size": 1, "head_dim": 1, "vocab_size": 10,
                             "intermediate_size": 1}, name="tiny")
    r = info_report(tiny, kv_dtype="fp4", context=1, gpu="H100-SXM", utilization=0.5, weights_bytes=60,
                    overhead_bytes=42_509_438_812 - 60 - 1, vllm_version="0.28.0")
    assert (r["num_params"], r["kv_bytes_per_token"], r["kv_pool_bytes"]) == (30, 1, 1)
    assert (r["kv_pool_tokens"], r["max_concurrency"]) == (1, 1)


def test_a_deployment_that_cannot_run_says_why_not_a_negative_pool(capsys):
    # Llama 3.3 70B's 141,107,412,992 B of bf16 parameters (plus the few stored buffers vLLM loads) on one
    # H100: budget ceil(85,018,877,624 x the release's utilization) less the profiled overhead, below the weights.
    r = info_report("llama-3.3-70b", context=8192, gpu="H100-SXM")
    assert r["fits"] is False and len(r["reasons"]) == 1 and "weights are 141.1" in r["reasons"][0]
    assert r["vllm_pool"]["parts"]["weights"]["bytes"] >= 141_107_412_992
    assert info_report("llama-3.1-8b", context=8192, gpu="H100-SXM")["fits"] is True
    from kvlib.cli import main
    assert main(["info", "llama-3.3-70b", "--context", "8192", "--gpu", "H100-SXM"]) == 0
    out = capsys.readouterr().out
    # one line says it: the pool's own (weights as stored, in GiB, over the budget), no second weights line
    assert out.count("does not fit") == 1 and "does not fit: weights 131." in out
    assert "-" not in out.split("KV per sequence")[1].split("GB")[0]
    assert " blocks x " not in out and "that fit" not in out   # no pool in tokens for a deployment that cannot run


def test_info_refuses_a_tp_that_splits_the_query_heads_unevenly():
    r = info_report("qwen2.5-7b", context=8192, gpu="H100-SXM", tp=8)   # 28 query heads, 28 % 8 = 4
    assert r["fits"] is False and r["reasons"] == ["TP 8 does not divide the 28 query heads "
                                                   "(vLLM: verify_with_parallel_config)"]


def test_the_newest_release_measures_its_pool_and_says_how_0_32_differed(capsys):
    # vLLM 0.34 (source only): utilization 1.0, 64-token blocks, the measured rule with its margin part; the same
    # deployment under 0.32 (0.92, 16-token blocks, estimate-based) beside it
    r = info_report("llama-3.1-8b", context=8192, gpu="H100-SXM")
    pool = r["vllm_pool"]
    assert (pool["pool_rule"], pool["utilization"], pool["block_size"], pool["model_runner"]) == (
        "measured", 1.0, 64, "v2")
    assert set(pool["parts"]) == {"weights", "torch peak", "non-torch", "sampler state", "CUDA graphs", "margin"}
    assert r["kv_pool_bytes"] == pool["requested_bytes"] - sum(p["bytes"] for p in pool["parts"].values())
    assert r["kv_pool_tokens"] == r["kv_pool_bytes"] // (64 * 131_072) * 64
    old = pool["compared_with"]
    assert (old["vllm_version"], old["utilization"], old["block_size"]) == ("0.32.0", 0.92, 16)
    assert old["available_bytes"] == info_report("llama-3.1-8b", context=8192, gpu="H100-SXM",
                                                 vllm_version="0.32.0")["kv_pool_bytes"]
    assert "source only" in pool["checked_against"]
    from kvlib.cli import main
    assert main(["info", "llama-3.1-8b", "--context", "8192", "--gpu", "H100-SXM"]) == 0
    out = capsys.readouterr().out
    for text in ("x 64 = ", "- margin", "vs vLLM 0.32.0", "16-token blocks", "after warmup and CUDA-graph capture",
                 "its source only (no 0.34 engine or GPU run)"):
        assert text in out, text
    assert info_report("llama-3.1-8b", context=8192, gpu="H100-SXM", vllm_version="0.32.0")["vllm_pool"][
        "compared_with"] is None


def test_a_release_past_the_newest_read_gets_one_warning_line(capsys):
    from kvlib.cli import main
    assert main(["info", "llama-3.1-8b", "--context", "8192", "--gpu", "H100-SXM", "--vllm-version", "0.35.0"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kvlib: warning: vLLM 0.35.0 is newer than 0.34.0")
    assert main(["info", "llama-3.1-8b", "--context", "8192", "--gpu", "H100-SXM", "--vllm-version", "0.34.0"]) == 0
    assert capsys.readouterr().err == ""


def test_planned_bytes_per_sequence_at_every_tp():
    # Llama 3.1 8B at 8,192 tokens, vLLM 0.32.0: 16-token blocks of 32 layers x 16 x 8 x 256 x 2 B = 2 MiB;
    # 8,192 / 16 = 512 blocks = 2^30 B, the tokens themselves (8,192 is whole blocks). TP 2: 4 heads a rank, 1 MiB
    # blocks, 2^29 B. At 8,000 tokens: ceil(8,000 / 16) = 500 blocks, again whole blocks.
    one = info_report("llama-3.1-8b", context=8192, vllm_version="0.32.0")
    assert one["planned_bytes_per_sequence_per_gpu"] == 2**30
    assert one["planned_sequence"] == {"vllm_version": "0.32.0", "block_size": 16, "bytes_per_block": 2**21,
                                       "blocks_per_request": 512, "kv_cache_groups": 1, "max_in_flight_tokens": None,
                                       "state_pages_per_request": 0, "notes": [], "error": None}
    assert info_report("llama-3.1-8b", context=8192, tp=2, vllm_version="0.32.0")[
        "planned_bytes_per_sequence_per_gpu"] == 2**29
    # 1,000 tokens: ceil(1000 / 16) = 63 blocks, 8 token slots more than the tokens
    assert info_report("llama-3.1-8b", context=1000, vllm_version="0.32.0")[
        "planned_bytes_per_sequence_per_gpu"] == 63 * 2**21
    # no context, no per-sequence figure
    assert "planned_bytes_per_sequence_per_gpu" not in info_report("llama-3.1-8b")


def test_planned_bytes_of_a_hybrid_with_a_gpu():
    # Qwen3-Next on H100s at TP 4, 0.32.0: the block grows to 272 tokens (state 274,432 B over 1,024 B a token),
    # groups of 12 layers x 278,528 B = 3,342,336 B; 32,768 tokens: ceil(32,768 / 272) = 121 + 3 GDN groups x 2
    # pages = 127 blocks (GDN exports no checkpoint before 0.33).
    r = info_report("qwen3-next-80b-a3b", context=32768, tp=4, gpu="H100-SXM", vllm_version="0.32.0")
    assert r["planned_bytes_per_sequence_per_gpu"] == 127 * 3342336
    assert (r["planned_sequence"]["block_size"], r["planned_sequence"]["state_pages_per_request"]) == (272, 2)
    # 0.34 on an H100 (Hopper: FlashInfer's GDN prefill): 320-token blocks, 3 pages a GDN group:
    # ceil(32,768 / 320) = 103 + 9 = 112 blocks of 12 x 327,680 B
    r = info_report("qwen3-next-80b-a3b", context=32768, tp=4, gpu="H100-SXM", vllm_version="0.34.0")
    assert r["planned_bytes_per_sequence_per_gpu"] == 112 * 12 * 327680 and r["planned_sequence"]["notes"] == []
    # an A100 has no FlashInfer GDN prefill: 2 pages a group, and the block stays on the 64-token default:
    # 64 x ceil(274,432 / 65,536) = 320 as well; 103 + 6 = 109 blocks
    r = info_report("qwen3-next-80b-a3b", context=32768, tp=4, gpu="A100-80GB", vllm_version="0.34.0")
    assert r["planned_bytes_per_sequence_per_gpu"] == 109 * 12 * 327680


def test_planned_bytes_refused_in_one_line(capsys, tmp_path):
    # A linear-attention layer kvlib cannot size (Gemma 2's config with one layer so renamed): no figure, the reason
    import json
    config = kvlib.bundled_config("gemma-2-9b")
    config["layer_types"] = ["linear_attention"] + ["sliding_attention", "full_attention"] * 20 + ["full_attention"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    r = info_report(str(path), context=4096)
    why = ("field layer_types[0] is 'linear_attention': kvlib does not model that layer's state (Mamba2 and Gated "
           "DeltaNet only)")
    assert r["planned_bytes_per_sequence_per_gpu"] is None
    assert r["planned_sequence"] == {"error": f"{r['model']}: {why}"}
    from kvlib.cli import main
    assert main(["info", str(path), "--context", "4096"]) == 0
    assert f"vLLM plans per sequence per GPU (tp=1)  not computed: {r['model']}: {why}" in capsys.readouterr().out
