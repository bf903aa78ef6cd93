"""kvlib's forward prediction of vLLM's KV pool against real startup logs, and each part's rule by hand.

Expected values are what the logs print (tests/fixtures/vllm_mem_logs) or arithmetic done here.
"""

import pytest

import vllm_mem_cases as mc
from kvlib.units import GiB
from kvlib.vllm import batch_defaults, forecast_pool, release_rules
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


def test_sampler_part_is_seqs_times_vocab_times_16_in_v1():
    f = forecast_pool("qwen2.5-7b", round(79.19 * GiB), version="0.19.0", tp=4, gpu_name="H100")
    assert f.part("torch peak").bytes == 1024 * 152064 * 16


def test_release_defaults_and_cudagraphs():
    assert release_rules("0.19.1").utilization == 0.90 and release_rules("0.20.2").utilization == 0.92
    assert not release_rules("0.19.1").subtracts_cudagraph and release_rules("0.20.2").subtracts_cudagraph
    assert batch_defaults("0.19.0", "v1", round(79.19 * GiB), "A100") == (256, 2048)
    f = forecast_pool("llama-3.1-8b", round(79.19 * GiB), version="0.20.2", gpu_name="H100")
    assert f.part("CUDA graphs").bytes == 32 * round(0.025 * GiB)
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
