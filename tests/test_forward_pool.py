"""kvlib's forward prediction of vLLM's KV pool against real startup logs, and each part's rule by hand.

Expected values are what the logs print (tests/fixtures/vllm_mem_logs) or arithmetic done here.
"""

import math

import pytest

import vllm_mem_cases as mc
from kvlib.units import GiB
from kvlib.vllm import UncheckedReleaseWarning, VllmLogError, batch_defaults, forecast_pool, release_rules
from kvlib.weights import MXFP4_BITS, quantization_scheme, stored_weights

ROWS = {r.id: r for r in mc.rows()}


@pytest.mark.parametrize("case_id", sorted(ROWS))
def test_available_within_a_gib_of_the_log(case_id):
    r = ROWS[case_id]
    assert abs(r.error_gib) < 1.0, (r.predicted_gib, r.printed_gib)


def test_mean_error_under_half_a_gib_on_all_and_on_held_out():
    assert mc.summary(ROWS.values())[0] < 0.5
    assert mc.summary([r for r in ROWS.values() if r.role == "held-out"])[0] < 0.5


def test_old_rule_is_worse_than_the_new_on_the_same_logs():
    assert mc.summary(ROWS.values(), "old_error_gib")[0] > 4 * mc.summary(ROWS.values())[0]


@pytest.mark.parametrize("case_id", [c for c in sorted(ROWS) if ROWS[c].printed_parts.get("weights_gib")])
def test_weights_as_stored_match_the_printed_model_loading(case_id):
    r = ROWS[case_id]
    assert r.forecast.part("weights").bytes / GiB == pytest.approx(r.printed_parts["weights_gib"], abs=0.15)


@pytest.mark.parametrize("case_id", [c for c in sorted(ROWS) if ROWS[c].printed_parts.get("torch_peak_increase_gib")])
def test_torch_peak_within_a_quarter_gib(case_id):
    r = ROWS[case_id]
    assert r.forecast.part("torch peak").bytes / GiB == pytest.approx(r.printed_parts["torch_peak_increase_gib"],
                                                                      abs=0.25)


def test_tokens_are_blocks_times_block_size_near_the_log():
    for r in ROWS.values():
        if r.printed_tokens and r.tp == r.forecast.tp:   # under PP the tokens follow the other stage's memory
            assert r.predicted_tokens % 16 == 0
            kv_bytes_per_token = r.forecast.bytes_per_block / 16
            token_error_gib = abs(r.predicted_tokens - r.printed_tokens) * kv_bytes_per_token / GiB
            assert token_error_gib <= abs(r.error_gib) + 0.02, r.id


def test_fp8_70b_weights_by_hand():
    # Llama 3.3 70B, FP8 linears (1 B + a float32 scale per output row), bf16 embedding and head, tp 2.
    h, i, L, v, kv = 8192, 28640 + 32, 80, 128256, 1024
    linear = L * (h * (h + 2 * kv) + h * h + h * 2 * i + i * h)
    column_scales = L * 4 * ((h + 2 * kv) + 2 * i)      # qkv, gate_up: output rows split over the ranks
    row_scales = L * 4 * (h + h)                        # o, down: every rank keeps all h output rows
    by_hand = (linear + column_scales) // 2 + row_scales + 2 * (v * h * 2) // 2 + L * 2 * h * 2 + h * 2 \
        + 131072 * 128 * 2
    w = stored_weights(str(mc.FIXTURES / "configs/RedHatAI__Llama-3.3-70B-Instruct-fp8-dynamic.json"), tp=2)
    assert w.scheme == "fp8"
    assert w.bytes_per_rank == by_hand


def test_int4_group_scales_and_tied_embeddings():
    q = quantization_scheme({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}})
    assert (q["scheme"], q["group_size"], q["g_idx"], q["zeros"], q["lm_head"]) == ("int4", 128, True, False, False)
    # Qwen2.5-0.5B ties its embedding: counted once, 151,936 x 896 x 2 B.
    w = stored_weights(str(mc.FIXTURES / "configs/Qwen__Qwen2.5-0.5B-Instruct.json"))
    names = [p.name for p in w.parts]
    assert "lm_head" not in names and dict((p.name, p.bytes) for p in w.parts)["embedding"] == 151936 * 896 * 2


def test_gpt_oss_experts_are_mxfp4():
    w = stored_weights("gpt-oss-20b")
    experts = dict((p.name, p.bytes) for p in w.parts)["experts"]
    # 24 layers x 32 experts x 3 x 2880 x 2880 values at 4.25 bits, plus bf16 biases and router
    values = 24 * 32 * 3 * 2880 * 2880
    assert MXFP4_BITS == 4.25
    assert abs(experts - values * 4.25 / 8) < 0.01 * experts
    assert 12e9 < w.bytes_per_rank < 14.5e9


def test_index_total_size_overrides_and_splits():
    assert stored_weights("llama-3.1-8b", index_total_size=16_060_522_496, tp=2).bytes_per_rank == 8_030_261_248


def test_kv_heads_replicated_when_tp_exceeds_k():
    # Qwen2.5-7B has 4 KV heads: at tp 8 each rank keeps one, not half of one.
    attn = dict((p.name, p.bytes) for p in stored_weights("qwen2.5-7b", tp=8).parts)["attention"]
    q_out, kv_out = 28 * 128 // 8, 128           # 3.5 query heads' width, one whole K (and V) head per rank
    per_layer = (3584 * (q_out + 2 * kv_out) + (q_out + 2 * kv_out) + q_out * 3584) * 2   # qkv + bias + o, bf16
    assert attn == 28 * per_layer


def test_sampler_part_in_0_19_is_the_triton_path_by_hand():
    # vLLM 0.19 (v1/sample/ops/topk_topp_sampler.py): 1,024 rows of Qwen2.5's 152,064 logits at 2 (bf16) + 4 (fp32,
    # masked in place by the Triton kernel) + 4 (softmax) + 4 (exponential noise) B, plus the kernel's row buffer:
    # min(next_pow2(min(132 SMs, 1,024)), 132) = 132 fp32 rows; the dummy run's hidden states (8,192 x 3,584 x 2 B)
    # stay alive. The forward (8,192 x 2 x (3 x 18,944 / 4 + 2 x 3,584) x 1.408) is smaller.
    f = forecast_pool("qwen2.5-7b", round(79.19 * GiB), version="0.19.0", tp=4, gpu_name="H100")
    sampler = 1024 * 152064 * (2 + 4 + 4 + 4) + 132 * 152064 * 4
    hidden = 8192 * 3584 * 2
    forward = int(8192 * 2 * (3 * 18944 // 4 + 2 * 3584) * 1.408)
    assert forward < hidden + sampler
    assert f.part("torch peak").bytes == hidden + sampler


def test_sampler_part_in_0_11_sorts_the_logits_by_hand():
    # vLLM 0.11 without FlashInfer (pip's default install): Sampler.forward holds the bf16 logits (2) and their fp32
    # copy (4) while apply_top_k_top_p sorts them: values 4 + int64 indices 8, and inside torch's segmented sort
    # (>= 128 rows: SortStable.cu segmented_sort_pairs) an int64 index input 8 + cub's alternate buffers 4 + 8.
    f = forecast_pool("llama-3.1-8b", round(79.19 * GiB), version="0.11.0", gpu_name="H100")
    assert f.part("torch peak").bytes == 8192 * 4096 * 2 + 1024 * 128256 * (2 + 4 + 4 + 8 + 8 + 4 + 8)
    # more than twice what kvlib charged before (16 B a logit), as measured 0.11 peaks are
    assert f.part("torch peak").bytes > 2 * 1024 * 128256 * 16
    # with FlashInfer installed (0.8-0.11 samples with it): logits 2 + fp32 4 + masked logits 4 + probs 4
    g = forecast_pool("llama-3.1-8b", round(79.19 * GiB), version="0.11.0", gpu_name="H100", sampler="flashinfer")
    assert g.part("torch peak").bytes == 8192 * 4096 * 2 + 1024 * 128256 * 14
    assert f.part("torch peak").low <= g.part("torch peak").bytes           # the range covers either install


def test_model_runner_v2_by_the_models_shape():
    # 0.25-0.28: Model Runner V2 for dense models (logits only, 2 B, no graph estimate), V1 for MoE (Triton
    # sampler, the V1 runner's graph estimate)
    dense = forecast_pool("llama-3.1-8b", round(79.19 * GiB), version="0.27.0", gpu_name="H100")
    moe = forecast_pool("mixtral-8x7b", round(79.19 * GiB), version="0.27.0", tp=2, gpu_name="H100")
    assert (dense.runner, moe.runner) == ("v2", "v1")
    assert dense.part("CUDA graphs").bytes == 0 and moe.part("CUDA graphs").bytes == 32 * round(0.025 * GiB)
    assert forecast_pool("mixtral-8x7b", round(79.19 * GiB), version="0.29.0", tp=2, gpu_name="H100").runner == "v2"


def test_release_defaults_and_cudagraphs():
    assert release_rules("0.19.1").utilization == 0.90 and release_rules("0.20.2").utilization == 0.92
    assert not release_rules("0.19.1").subtracts_cudagraph and release_rules("0.20.2").subtracts_cudagraph
    assert batch_defaults("0.19.0", "v1", round(79.19 * GiB), "A100") == (256, 2048)
    f = forecast_pool("llama-3.1-8b", round(79.19 * GiB), version="0.20.2", gpu_name="H100")
    assert f.part("CUDA graphs").bytes == 32 * round(0.025 * GiB)
    # Model Runner V2 (Llama's default from 0.24) estimates graphs from 0.29 only
    assert forecast_pool("llama-3.1-8b", round(79.19 * GiB), version="0.28.0").part("CUDA graphs").bytes == 0
    assert forecast_pool("llama-3.1-8b", round(79.19 * GiB), version="0.29.0").part("CUDA graphs").bytes == \
        32 * round(0.025 * GiB)
    # 0.19's printed estimates (not subtracted there) fall inside the per-layer range
    for case_id, layers in (("08", 80), ("11", 32), ("13", 28)):
        est = ROWS[case_id].printed_parts["cuda_graph_estimate_gib"]
        assert 0.022 * layers - 0.01 <= est <= 0.034 * layers + 0.01


def test_budget_rounds_up_from_014():
    t = 85_899_345_921
    assert forecast_pool("llama-3.1-8b", t, version="0.19.0", utilization=0.9).requested_bytes == -(-t * 9 // 10)


def test_kvlib_plan_takes_weights_and_overhead_from_the_same_prediction(capsys):
    import json

    from kvlib.cli import main
    assert main(["plan", "llama-3-70b", "--users", "2000", "--context", "6000", "--itl-ms", "60", "--gpu", "H100",
                 "--vllm-version", "0.19.0", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    f = forecast_pool("llama-3-70b", r["gpu_memory_bytes"], version="0.19.0", tp=8, gpu_name="H100-SXM")
    assert r["utilization"] == 0.90                       # the release's default, not the newest's
    assert r["weight_bytes"] == 8 * f.part("weights").bytes == 8 * stored_weights("llama-3-70b", tp=8).bytes_per_rank
    assert r["overhead_bytes_per_gpu"] == sum(p.bytes for p in f.parts if p.name != "weights")


def test_every_part_names_its_vllm_source_and_a_range_around_it():
    for r in ROWS.values():
        for part in r.forecast.parts:
            assert part.source and part.rule, (r.id, part.name)
            assert part.low <= part.bytes <= part.high, (r.id, part.name)
        assert r.forecast.available_low <= r.forecast.available_bytes <= r.forecast.available_high


def test_the_printed_figure_falls_inside_the_predicted_range():
    for r in ROWS.values():
        low, high = r.forecast.available_low / GiB, r.forecast.available_high / GiB
        assert low <= r.printed_gib + 0.005 and r.printed_gib - 0.005 <= high, (r.id, low, high, r.printed_gib)


# --- 0.34: the measured pool, worked from its source's own function ---------------------------------------------
def measure_kv_cache_bytes(*, init_free_memory, free_memory, committed_bytes, requested_memory,
                           transient_peak_bytes=0, torch_reserve_growth_bytes=0,
                           margin_floor_bytes=1 << 30, margin_fraction=0.75):
    """vLLM 0.34.0's vllm/v1/worker/extensible_kv_cache.py measure_kv_cache_bytes, line for line (its CUDA
    constants: KV_CACHE_MARGIN_FLOOR_BYTES = 1 << 30, KV_CACHE_MARGIN_FRACTION = 0.75)."""
    non_kv_used = init_free_memory - free_memory - committed_bytes
    headroom = free_memory + committed_bytes
    margin = max(margin_floor_bytes, int(transient_peak_bytes * margin_fraction))
    available = min(requested_memory - non_kv_used, headroom - margin)
    available -= max(transient_peak_bytes, torch_reserve_growth_bytes)
    return max(available, 0)


@pytest.mark.parametrize("requested,init_free,non_kv,transient,growth", [
    (80 * GiB, 79 * GiB, 20 * GiB, 2 * GiB, 0),                 # u 1.0: the device headroom binds
    (72 * GiB, 79 * GiB, 20 * GiB, 2 * GiB, 3 * GiB),           # u 0.9: the request binds; growth beyond the peak
    (80 * GiB, 79 * GiB, 20 * GiB, GiB // 4, 0),                # a small transient: the 1 GiB floor
    (80 * GiB, 21 * GiB, 20 * GiB, GiB, 0),                     # nothing left: 0, never negative
])
def test_measured_pool_is_vllms_function(requested, init_free, non_kv, transient, growth):
    from kvlib.vllm.pool import measured_kv_cache_bytes
    committed = 2 * 2**20                                       # two blocks committed at measurement time
    free = init_free - non_kv - committed
    total = 80 * GiB
    expected = measure_kv_cache_bytes(init_free_memory=init_free, free_memory=free, committed_bytes=committed,
                                      requested_memory=requested, transient_peak_bytes=transient,
                                      torch_reserve_growth_bytes=growth)
    assert measured_kv_cache_bytes(requested=requested, in_use_at_start=total - init_free, total=total,
                                   non_kv=non_kv, transient=transient, torch_reserve_growth=growth) == expected


def test_0_34_forecast_by_hand_from_its_source():
    """Llama 3.1 8B on an H100 (85,018,877,624 B as CUDA reports it), vLLM 0.34 defaults, every part by hand:

    - utilization: config/cache.py resolved_gpu_memory_utilization -> 1.0 (extensible KV cache, CUDA);
      request_memory: ceil(T x 1.0) = T;
    - weights as stored: 16,060,522,496 B bf16 + the 131,072 x 128 x 2 B rotary cache;
    - non-torch at TP 1: round(0.07 GiB); CUDA graphs: 32 layers x round(0.025 GiB); Model Runner V2's sampler
      state (v1/worker/gpu/sample/penalties.py): 1,024 x (128,256 + cdiv(128,256, 32)) int32;
    - transient kept free = gpu_worker.py peak_activation_memory = the profiled peak + the graph estimate; the
      profiled peak = max(forward, hidden + sampler): Model Runner V2's two sampler passes hold the bf16 logits and
      their fp32 copy, 1,024 x 128,256 x (2 + 4) B, with the 8,192 x 4,096 x 2 B hidden states; the forward
      int(8,192 x 2 x (3 x 14,336 + 2 x 4,096) x 1.408) is larger;
    - memory in use before the first snapshot: round(0.51 GiB) (mem-log 11's 79.19 - 78.68 GiB at TP 1);
    - the pool: measure_kv_cache_bytes above on those inputs; blocks of 64 tokens x 32 layers x 4,096 B
      (2 x 8 KV heads x 128 x 2 B a token and layer).
    """
    t = 85_018_877_624
    weights = 16_060_522_496 + 131_072 * 128 * 2
    non_torch, graphs = round(0.07 * GiB), 32 * round(0.025 * GiB)
    forward = int(8192 * 2 * (3 * 14336 + 2 * 4096) * 1.408)
    sampler = 8192 * 4096 * 2 + 1024 * 128256 * (2 + 4)
    transient = max(forward, sampler) + graphs
    state = 1024 * (128256 + -(-128256 // 32)) * 4                # PenaltiesState: output_bin_counts + prompt_bin_mask
    init_free = t - round(0.51 * GiB)
    committed = 64 * 32 * 4096                                    # the null block, committed before measurement
    free = init_free - (weights + non_torch + state + graphs) - committed
    expected = measure_kv_cache_bytes(init_free_memory=init_free, free_memory=free, committed_bytes=committed,
                                      requested_memory=t, transient_peak_bytes=transient)
    f = forecast_pool("llama-3.1-8b", t, version="0.34.0", gpu_name="H100-SXM")
    assert (f.utilization, f.block_size, f.pool_rule, f.runner) == (1.0, 64, "measured", "v2")
    assert f.requested_bytes == t
    assert f.part("weights").bytes == weights and f.part("torch peak").bytes == transient
    assert f.available_bytes == expected
    assert f.num_gpu_blocks == expected // (64 * 32 * 4096) and f.gpu_kv_cache_tokens == f.num_gpu_blocks * 64
    # the same model under 0.32 (estimate-based, 0.92, 16-token blocks) holds less: 0.34 measures instead of
    # keeping 8% of the GPU back
    g = forecast_pool("llama-3.1-8b", t, version="0.32.0", gpu_name="H100-SXM")
    assert (g.utilization, g.block_size, g.pool_rule) == (0.92, 16, "estimate")
    assert g.available_bytes == math.ceil(t * 0.92) - weights - max(forward, 8192 * 4096 * 2 + 1024 * 128256 * 2) \
        - non_torch - state - graphs
    assert f.available_bytes > g.available_bytes


def test_0_34_without_the_extensible_cache_is_estimate_based():
    # --no-enable-extensible-kv-cache, other platforms, kv_cache_memory_bytes: 0.92 and ceil(T x u) - parts
    t = 85_018_877_624
    f = forecast_pool("llama-3.1-8b", t, version="0.34.0", gpu_name="H100-SXM", extensible=False)
    assert (f.utilization, f.pool_rule, f.block_size) == (0.92, "estimate", 64)
    assert f.available_bytes == math.ceil(t * 0.92) - sum(p.bytes for p in f.parts)
    with pytest.raises(VllmLogError, match="extensible"):
        forecast_pool("llama-3.1-8b", t, version="0.32.0", extensible=True)


def test_newest_is_0_34_and_a_later_release_warns():
    with pytest.warns(UncheckedReleaseWarning, match="0.34.0"):
        f = forecast_pool("llama-3.1-8b", 85_018_877_624, version="0.35.0", gpu_name="H100-SXM")
    assert f.available_bytes == forecast_pool("llama-3.1-8b", 85_018_877_624, gpu_name="H100-SXM").available_bytes
