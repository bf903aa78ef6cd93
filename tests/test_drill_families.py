"""The drill families of a 2026 interview ([interview 2026 §2]): kvcoach.drills.FAMILIES_2026.

Every answer is recomputed here from what the question states, the formula written out; the figures of
real configs are worked by hand (Qwen3-30B-A3B's config.json: 128 experts, 8 per token, 48 layers,
hidden_size 2,048, moe_intermediate_size 768); one characteristic wrong answer per template is named
as its slip; every draw's deployment runs; the families are in ``kvlib drill`` and ch09's drill mode.
Fast and in-process.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import sys
from pathlib import Path

import pytest

from kvcoach.drills import FAMILIES_2026, GRADED_TOPICS, KINDS, TOPICS, DrillError, generate
from kvcoach.slips import (SLIPS, disagg_transfer, eagle_mtp, expert_parallel, hybrid_state, indexer_cache, long_ttft,
                           low_precision_compute, moe_decode, requests_concurrency, variants)
from kvlib import load_model
from kvlib.feasibility import check_deployment
from kvlib.roofline import all_experts_batch, expected_experts_touched
from kvlib.serving import disagg_transfer_bytes, disagg_transfer_seconds, littles_law_concurrency, pd_ratio, prefill_steps

SEEDS = range(30)
CONFIGS = Path(__file__).resolve().parents[1] / "kvlib" / "data" / "configs"


def _draws(topic, template, count=4, limit=400):
    out = [p for p in (generate(topic, s) for s in range(limit)) if p.template == template]
    assert len(out) >= count, (topic, template)
    return out[:count]


def _hybrid_by_hand(model, tp, seq_len, with_kv) -> int:
    """State bytes per sequence on one GPU from the config's fields (vLLM's state shapes), plus the KV if asked."""
    c = json.loads((CONFIGS / (model.replace("/", "__") + ".json")).read_text(encoding="utf-8"))
    spec = load_model(model)
    if "linear_num_value_heads" in c:           # Gated DeltaNet, bf16 states
        conv = (c["linear_conv_kernel_dim"] - 1) * (2 * c["linear_num_key_heads"] * c["linear_key_head_dim"]
                                                   + c["linear_num_value_heads"] * c["linear_value_head_dim"]) // tp * 2
        state = c["linear_num_value_heads"] // tp * c["linear_value_head_dim"] * c["linear_key_head_dim"] * 2
        layers = spec.layer_kinds.count("gated_deltanet")
    else:                                       # Mamba2: bf16 conv, float32 SSM
        inner = c["mamba_num_heads"] * c["mamba_head_dim"]
        conv = (c["conv_kernel"] - 1) * (inner + 2 * c["n_groups"] * c["ssm_state_size"]) // tp * 2
        state = c["mamba_num_heads"] // tp * c["mamba_head_dim"] * c["ssm_state_size"] * 4
        layers = spec.layer_kinds.count("mamba2")
    kv = 0
    if with_kv:
        kv = spec.layer_kinds.count("full") * 2 * max(1, spec.num_kv_heads // tp) * spec.head_dim * 2 * seq_len
    return layers * (conv + state) + kv


def test_hybrid_state_by_hand():
    # Qwen3-Next (36 Gated DeltaNet layers): conv 3 x (2 x 16 x 128 + 32 x 128) x 2 = 49,152 B and recurrent
    # 32 x 128 x 128 x 2 = 1,048,576 B a layer: 39,518,208 B a sequence, whatever its length
    assert _hybrid_by_hand("Qwen/Qwen3-Next-80B-A3B-Thinking", 1, 4096, False) == 36 * (49_152 + 1_048_576) == 39_518_208
    # Nemotron 3 Nano (23 Mamba2 layers): conv 3 x (4,096 + 2 x 8 x 128) x 2 = 36,864 B, SSM 64 x 64 x 128 x 4 (fp32)
    # = 2,097,152 B: 49,082,368 B
    assert _hybrid_by_hand("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 1, 4096, False) == 23 * (36_864 + 2_097_152)
    p = next(p for p in (generate("hybrid_state", s) for s in range(200)) if p.template == "hybrid_state/state"
             and p.params["model"] == "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16" and p.params["tp"] == 1)
    assert p.answer == 49_082_368
    assert p.slip_key(str(23 * (36_864 + 64 * 64 * 128 * 2))) == "ssm_state_in_model_dtype"
    assert p.slip_key(str(49_082_368 * p.params["seq_len"])) == "state_grows_with_context"


def test_indexer_cache_by_hand():
    # DeepSeek-V3.2: 61 layers, each an fp8 indexer key of 128 values and a float32 scale: 132 B, 8,052 B a token,
    # beside 61 x (512 + 64) x 2 = 70,272 B of MLA: 78,324 B, whole on every GPU at any TP
    from kvlib import load_model as load
    assert load("deepseek-ai/DeepSeek-V3.2").indexer_bytes_per_token(tp=8) == 61 * 132 == 8052
    assert load("deepseek-ai/DeepSeek-V3.2").kv_bytes_per_token(tp=8) == 70_272 + 8052
    p = next(p for p in (generate("indexer_cache", s) for s in range(200)) if p.template == "indexer_cache/pool"
             and p.params["model"] == "deepseek-ai/DeepSeek-V3.2")
    assert p.answer == p.params["budget_bytes"] // 78_324
    assert p.slip_key(str(p.params["budget_bytes"] // 70_272)) == "indexer_forgotten"


def _ridge_by_hand(peak, i) -> int:
    """First batch at the ridge: ceil(F / BW x b / 2) for a dense model; a mixture of experts' experts do 2 k B FLOPs on
    E_B = E (1 - (1 - k/E)^B) experts' bytes, so the first B with 2 k B / (E_B b) >= F / BW, counted up from the dense
    batch."""
    f, bw, b = peak, i["bandwidth_bytes_per_s"], i["weight_dtype_bytes"]
    batch = math.ceil(f / bw * b / 2)
    if not i.get("num_experts"):
        return batch
    e, k = i["num_experts"], i["top_k"]
    while 2 * k * batch * bw < f * b * e * (1 - (1 - k / e) ** batch):
        batch += 1
    return batch


def _independent(p, prompt_tokens=None) -> float:
    i = p.params
    if p.template == "moe_decode/experts":
        e, k, b = i["num_experts"], i["top_k"], i["batch_size"]
        return e * (1 - (1 - k / e) ** b)
    if p.template == "moe_decode/bytes":
        e, k, b = i["num_experts"], i["top_k"], i["batch_size"]
        routed = i["moe_layers"] * e * i["expert_params"]
        return (i["num_params"] - routed) * 2 + i["moe_layers"] * i["expert_params"] * 2 * e * (1 - (1 - k / e) ** b)
    if p.template == "moe_decode/all_read":
        e, k = i["num_experts"], i["top_k"]
        b = 1
        while e * (1 - k / e) ** b >= 1:       # the first batch with fewer than one expert expected unread
            b += 1
        return b
    if p.template == "requests_concurrency/littles_law":
        return i["rate_per_s"] * (i["ttft_s"] + i["output_tokens"] * i["itl_ms"] / 1000)
    if p.template == "requests_concurrency/prefill_steps":
        return -(-i["prompt_tokens"] // (i["token_budget"] - i["decode_tokens"]))
    if p.template == "disagg_transfer/bytes":
        spec = load_model(i["model"])
        t = prompt_tokens or i["prompt_tokens"]
        per_layer = ((spec.kv_lora_rank + spec.qk_rope_head_dim) * 2 if spec.is_mla
                     else 2 * spec.num_kv_heads * spec.head_dim * 2)
        held = {"full": t, "sliding": min(t, spec.sliding_window or t), "chunked": min(t, spec.attention_chunk_size or t)}
        return per_layer * sum(held[kind] for kind in spec.layer_kinds)
    if p.template == "disagg_transfer/time":
        return i["transfer_bytes"] / (i["tp"] * i["link_gbit_per_s"] * 1e9 / 8) * 1000
    if p.template == "long_ttft":
        t = i["prompt_tokens"]
        flops = 2 * i["num_params"] * t + 2 * i["layers"] * i["num_heads"] * (i["qk_head_dim"] + i["v_head_dim"]) \
            * t * (t + 1) / 2
        return flops / (i["tp"] * i["mfu"] * i["peak_flop_per_s"]) * 1000
    if p.template.startswith("indexer_cache"):
        c = json.loads((CONFIGS / (i["model"].replace("/", "__") + ".json")).read_text(encoding="utf-8"))
        indexer = c["num_hidden_layers"] * (c["index_head_dim"] + c["index_head_dim"] // 128 * 4)   # every layer
        if p.template == "indexer_cache/bytes":
            return indexer
        return i["budget_bytes"] // (c["num_hidden_layers"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * 2 + indexer)
    if p.template.startswith("hybrid_state"):
        return _hybrid_by_hand(i["model"], i["tp"], i["seq_len"], with_kv=p.template == "hybrid_state/sequence")
    if p.template.startswith("low_precision_compute/prefill"):
        return 2 * i["num_params"] * i["prompt_tokens"] / (i["mfu"] * i["peak_flop_per_s"]) * 1000
    if p.template.startswith("low_precision_compute/ridge"):
        return _ridge_by_hand(i["peak_flop_per_s"], i)
    if p.template.startswith("eagle_mtp"):
        expected, reach = 1.0, 1.0
        for a in i["acceptance_per_position"]:
            reach *= a
            expected += reach
        if p.template == "eagle_mtp/tokens":
            return expected
        return expected / (i["draft_tokens"] * i["cost_ratio"] + i["verify_ratio"])
    if p.template == "expert_parallel/bytes":
        return i["moe_layers"] * i["tokens"] * i["top_k"] * (i["ep"] - 1) / i["ep"] * i["hidden_size"] \
            * (i["dispatch_bytes"] + i["combine_bytes"])
    if p.template == "expert_parallel/vs_tp":
        b, t = i["batch_size"], i["ep"]
        return (2 * b / t * i["top_k"] * (t - 1) / t * i["hidden_size"] * 2) / (2 * (t - 1) / t * b * i["hidden_size"] * 2)
    if p.template == "disagg_transfer/pd_ratio":
        return (i["prompt_tokens"] / i["prefill_tokens_per_gpu_s"]) / (i["output_tokens"] / i["decode_tokens_per_gpu_s"])
    raise AssertionError(p.template)


def test_the_families_follow_the_older_topics_and_all_are_graded():
    assert FAMILIES_2026 == ("moe_decode", "requests_concurrency", "disagg_transfer", "long_ttft", "expert_parallel",
                             "eagle_mtp", "low_precision_compute", "hybrid_state", "indexer_cache")
    assert list(TOPICS)[-len(FAMILIES_2026):] == list(FAMILIES_2026)
    # ch09's Exercises 10 to 18: long_ttft, then the other families in their order (a grade id each)
    assert GRADED_TOPICS[-len(FAMILIES_2026):] == ("long_ttft",) + tuple(t for t in FAMILIES_2026 if t != "long_ttft")
    assert {(p.quantity, p.units, p.tolerance) for p in map(lambda s: generate("long_ttft", s), range(40))} == \
        {("long_ttft_ms", "ms", 0.005)}


#: Each family's question types and the (quantity, unit, tolerance) each one asks ([interview 2026 §1]: 0.5%, the
#: counts whose rounding is asked exactly).
ASKED = {("moe_decode", "experts"): ("moe_experts_read", "experts", 0.005),
         ("moe_decode", "bytes"): ("moe_step_bytes", "bytes", 0.005),
         ("moe_decode", "all_read"): ("all_experts_batch", "sequences", 0.0),
         ("requests_concurrency", "littles_law"): ("requests_in_system", "requests", 0.005),
         ("requests_concurrency", "prefill_steps"): ("prefill_steps", "steps", 0.0),
         ("disagg_transfer", "bytes"): ("disagg_transfer_bytes", "bytes", 0.005),
         ("disagg_transfer", "time"): ("disagg_transfer_ms", "ms", 0.005),
         ("disagg_transfer", "pd_ratio"): ("pd_ratio", "ratio", 0.005),
         ("expert_parallel", "bytes"): ("ep_step_bytes", "bytes", 0.005),
         ("expert_parallel", "vs_tp"): ("ep_over_tp", "times", 0.005),
         ("eagle_mtp", "tokens"): ("eagle_tokens", "tokens", 0.005),
         ("eagle_mtp", "speedup"): ("eagle_speedup", "times", 0.005),
         ("low_precision_compute", "prefill"): ("low_precision_ttft_ms", "ms", 0.005),
         ("low_precision_compute", "ridge"): ("low_precision_ridge", "sequences", 0.0),
         ("hybrid_state", "state"): ("hybrid_state_bytes", "bytes", 0.005),
         ("hybrid_state", "sequence"): ("hybrid_sequence_bytes", "bytes", 0.005),
         ("indexer_cache", "bytes"): ("indexer_bytes", "bytes", 0.005),
         ("indexer_cache", "pool"): ("indexer_pool_tokens", "tokens", 0.005)}


@pytest.mark.parametrize("topic, kind", sorted(ASKED))
def test_a_kind_fixes_one_question_type(topic, kind):
    """``generate(topic, seed, kind=...)`` asks that type on every seed (a graded exercise's one quantity, unit and
    tolerance), each answer the formula written out; a seed whose draw was that type asks the same question."""
    problems = [generate(topic, s, kind=kind) for s in range(12)]
    assert {(p.quantity, p.units, p.tolerance) for p in problems} == {ASKED[topic, kind]}
    assert {p.template.split("/")[1] for p in problems} == {kind}
    for p in problems:
        assert p.answer == pytest.approx(_independent(p), rel=1e-9), p.question
    same = [s for s in SEEDS if generate(topic, s).template.split("/")[1] == kind]
    assert same and generate(topic, same[0], kind=kind) == generate(topic, same[0])


def test_a_kind_is_refused_in_one_line():
    assert set(KINDS) == {t for t in FAMILIES_2026 if t != "long_ttft"}
    assert {(t, k) for t, kinds in KINDS.items() for k in kinds} == set(ASKED)
    with pytest.raises(DrillError, match=r"^kind must be a question type of moe_decode \(experts, bytes, all_read\), "
                                         r"got 'ratio'$"):
        generate("moe_decode", 1, kind="ratio")
    with pytest.raises(DrillError, match=r"^kind must be a question type of long_ttft \(none: it asks one type\), "
                                         r"got 'bytes'$"):
        generate("long_ttft", 1, kind="bytes")


@pytest.mark.parametrize("topic", FAMILIES_2026)
def test_answers_match_the_formula_written_out(topic):
    templates = set()
    for seed in SEEDS:
        p = generate(topic, seed)
        templates.add(p.template)
        assert p.answer == pytest.approx(_independent(p), rel=1e-9), (seed, p.question)
        assert p.check(p.answer)[0] and p.steps()[-1].value == p.answer
        assert p.params["model"] in p.question
        if p.tolerance:
            assert p.check(p.answer * 1.004)[0] and not p.check(p.answer * 1.01)[0]
        else:
            assert type(p.answer) is int and not p.check(p.answer + 1)[0] and not p.check(p.answer - 1)[0]
    assert len(templates) == {"moe_decode": 3, "requests_concurrency": 2, "disagg_transfer": 3, "long_ttft": 1,
                              "expert_parallel": 2, "eagle_mtp": 2, "low_precision_compute": 4,
                              "hybrid_state": 2, "indexer_cache": 2}[topic]


def test_qwen3_moe_figures_by_hand():
    config = json.loads((CONFIGS / "Qwen__Qwen3-30B-A3B.json").read_text(encoding="utf-8"))
    e, k, d, inter = (config[f] for f in ("num_experts", "num_experts_per_tok", "hidden_size", "moe_intermediate_size"))
    assert (e, k, d, inter) == (128, 8, 2048, 768)
    # 16 tokens: 128 (1 - (15/16)^16) = 128 (1 - 0.356074) = 82.42 experts per layer, not 16 x 8 = 128
    assert round(expected_experts_touched(e, k, 16), 2) == 82.42
    # fewer than one unread: 128 x (15/16)^75 = 1.0116, 128 x (15/16)^76 = 0.948 -> 76 sequences (not 128 / 8 = 16)
    assert all_experts_batch(e, k) == 76
    # the drill states the same figures: an expert's gate, up and down projections, 3 d I = 4,718,592 parameters
    p = next(p for p in (generate("moe_decode", s) for s in range(400))
             if p.template == "moe_decode/bytes" and p.params["model"] == "Qwen/Qwen3-30B-A3B")
    assert p.params["expert_params"] == 3 * 2048 * 768 == 4_718_592
    assert (p.params["moe_layers"], p.params["num_experts"], p.params["top_k"]) == (48, 128, 8)
    assert f"{3 * 2048 * 768:,}" in p.question
    # Mixtral 8x7B (8 experts, top 2): 8 x 0.75^7 = 1.07, 8 x 0.75^8 = 0.80; DeepSeek-V3 (256, top 8): 175
    assert all_experts_batch(8, 2) == 8 and all_experts_batch(256, 8) == 175


def test_requests_figures_by_hand():
    # ten requests a second, 2 s to the first token and 400 tokens at 40 ms: 10 x (2 + 16) = 180 in the system
    assert littles_law_concurrency(10, 2 + 400 * 0.040) == 180
    # a 6,144-token prompt, a budget of 512 beside 64 decodes: 448 a step, ceil(13.71) = 14 steps (not 12)
    assert prefill_steps(6144, 512, 64) == 14 and prefill_steps(6144, 512) == 12


def test_disaggregation_figures_by_hand():
    # Qwen3-30B-A3B (48 layers, 4 KV heads of 128, bf16): 2 x 4 x 128 x 2 = 2,048 B a layer; 6,144 tokens:
    # 48 x 2,048 x 6,144 = 603,979,776 B, 12.08 ms over one 400 Gb/s NIC (50 GB/s)
    assert disagg_transfer_bytes("Qwen/Qwen3-30B-A3B", 6144) == 603_979_776
    assert round(disagg_transfer_seconds(603_979_776, 400e9 / 8) * 1e3, 2) == 12.08
    # gpt-oss-20b: 12 full layers and 12 sliding over 128 tokens, 8 KV heads of 64: 2,048 B a layer;
    # 8,192 tokens: 2,048 x (12 x 8,192 + 12 x 128) = 204,472,320 B (counting every layer in full: 402,653,184)
    assert disagg_transfer_bytes("openai/gpt-oss-20b", 8192) == 204_472_320
    # Kimi K2 (MLA, 61 layers, kv_lora_rank 512 + rope 64): 61 x 576 x 2 x 8,192 = 575,668,224 B
    assert disagg_transfer_bytes("moonshotai/Kimi-K2-Instruct", 8192) == 575_668_224
    # 4,096-token prompts at 20,000 tokens/s against 200 tokens at 1,200/s: 0.2048 s / 0.1667 s = 1.2288
    assert pd_ratio(4096, 200, prefill_tokens_per_gpu_s=20_000, decode_tokens_per_gpu_s=1_200) == pytest.approx(1.2288)


def test_long_ttft_by_hand():
    # Qwen3-30B-A3B, 32,768 tokens on one B200 (4,500 TFLOP/s fp8) at 60% MFU: 2 x 3,041,867,776 x 32,768 =
    # 1.9935e14 linear; 2 x 48 x 32 x 256 x 32,768 x 32,769 / 2 = 4.2223e14 attention (more than the linear
    # layers); 6.2158e14 / 2.7e15 = 230.21 ms; the same as kvlib's TTFT (one chunk, compute-bound)
    from kvlib.offload import prefill_params_per_token
    from kvlib.serving import ttft_seconds
    assert prefill_params_per_token("Qwen/Qwen3-30B-A3B") == 3_041_867_776
    hand = (2 * 3_041_867_776 * 32768 + 2 * 48 * 32 * 256 * 32768 * 32769 // 2) / (0.6 * 4.5e15) * 1e3
    assert round(hand, 2) == 230.21
    assert ttft_seconds("Qwen/Qwen3-30B-A3B", 32768, gpu="B200", mfu=0.6, peak_flop_per_s=4.5e15) * 1e3 == \
        pytest.approx(hand, rel=1e-12)


def test_expert_parallel_by_hand():
    # DeepSeek-V3 (hidden 7,168, top 8, 58 MoE layers), 128 tokens a GPU over EP 8, bf16 both ways: 128 x 8 x 7/8 =
    # 896 routes leave, x 7,168 x (2 + 2) = 25,690,112 B a layer (kvlib's docstring figure), 1,490,026,496 B a step
    from kvlib.serving import ep_all_to_all_bytes
    assert ep_all_to_all_bytes(128, 7168, 8, 8) == 896 * 7168 * 4 == 25_690_112
    p = next(p for p in (generate("expert_parallel", s) for s in range(400)) if p.template == "expert_parallel/bytes"
             and p.params["model"] == "deepseek-ai/DeepSeek-V3" and p.params["tokens"] == 128 and p.params["ep"] == 8
             and p.params["dispatch_bytes"] == 2)
    assert p.answer == 58 * 25_690_112 == 1_490_026_496
    # against TP 8's ring all-reduce of a 512-token batch: 2 x 7/8 x 512 x 7,168 x 2 B; EP sends k / t = 8 / 8 of it
    q = next(p for p in (generate("expert_parallel", s) for s in range(400)) if p.template == "expert_parallel/vs_tp"
             and p.params["top_k"] == 4 and p.params["ep"] == 8)
    assert q.answer == pytest.approx(0.5)                      # gpt-oss: top 4 over 8 GPUs


def test_eagle_figures_by_hand():
    from kvlib.serving import eagle_expected_tokens
    # DeepSeek-V3's report (section 5.4.3): one MTP token accepted 85% of the time gives 1.85 tokens a step
    assert eagle_expected_tokens([0.85]) == pytest.approx(1.85)
    # a falling chain 0.9, 0.68: 1 + 0.9 + 0.9 x 0.68 = 2.512; at a draft cost of 0.08 and a verify of 2 plain steps,
    # 2.512 / (2 x 0.08 + 2) = 1.163x; a constant 0.9 would claim 1 + 0.9 + 0.81 = 2.71
    assert eagle_expected_tokens([0.9, 0.68]) == pytest.approx(2.512)
    p = next(p for p in (generate("eagle_mtp", s) for s in range(400)) if p.template == "eagle_mtp/tokens"
             and p.params["acceptance_per_position"] == (0.9, 0.68))
    assert p.answer == pytest.approx(2.512) and p.slip_key("2.71") == "eagle_first_rate_for_all"
    assert p.slip_key("2.58") == "eagle_sum_not_product"                # 1 + 0.9 + 0.68


def test_eagle_questions_state_the_weights_their_deployment_fits_in():
    # Llama 3.3 70B in bf16 is 141 GB, all of an H200's label: the family's deployments are checked with fp8
    # weights, so its question must say fp8 (the chapter's rule is bf16 unless a question says otherwise)
    from kvlib import load_model
    from kvlib.feasibility import check_deployment
    asked = [generate("eagle_mtp", s) for s in range(60)]
    for p in asked:
        assert "(fp8 weights) on " in p.question, p.question
        # conditional rates are never credited to vLLM, whose per-position rate is the product up to j
        assert "given the drafts before it were" in p.question and "vLLM reports" not in p.question
    p = next(p for p in asked if p.params["model"] == "meta-llama/Llama-3.3-70B-Instruct" and "one H200" in p.question)
    assert 70_553_706_496 * 2 > 141 * 10**9 > 70_553_706_496
    assert not check_deployment(load_model(p.params["model"]), "H200", seq_len=4096).fits
    assert check_deployment(load_model(p.params["model"]), "H200", seq_len=4096, weight_dtype_bytes=1).fits


def test_low_precision_figures_by_hand():
    # B200: 4,500 TFLOP/s dense fp8, 9,000 fp4, 8 TB/s. fp8: 562.5 FLOP/B x 1 / 2 = 281.25 -> 282 sequences; fp4:
    # 1,125 x 0.5 / 2 = 281.25 -> 282 too (the peak doubles as the bytes halve); B300's fp4 (13,125): 410.2 -> 411
    from kvlib.gpus import GPUS
    from kvlib.serving import ridge_batch
    b200, b300 = GPUS["B200"], GPUS["B300"]
    assert ridge_batch(b200.peak_flop_per_s("fp8"), b200.bandwidth_bytes_per_s, 1) == 282
    assert ridge_batch(b200.peak_flop_per_s("fp4"), b200.bandwidth_bytes_per_s, 0.5) == 282
    assert ridge_batch(b300.peak_flop_per_s("fp4"), b300.bandwidth_bytes_per_s, 0.5) == 411


def test_low_precision_draws_mixtures_of_experts_and_counts_their_experts():
    # the FP8/FP4 peaks of 2026 serve mixtures of experts: a prefill multiplies each token by its active parameters
    # only, and a decode step's experts reach the ridge once the batch covers them, E / k times the dense batch.
    # Qwen3-30B-A3B (128 experts, top 8): on a GB200 in fp8 (5,000 TFLOP/s, 8 TB/s) 625 x 1 x 128 / (2 x 8) = 5,000;
    # its prefill: 3,353,032,704 active parameters less the untied table 151,936 x 2,048 = 3,041,867,776 per token
    ridge = next(p for p in (generate("low_precision_compute", s) for s in range(200))
                 if p.quantity == "low_precision_ridge" and p.params["model"] == "Qwen/Qwen3-30B-A3B"
                 and p.params["gpu"] == "GB200" and p.params["dtype"] == "fp8")
    assert ridge.answer == 5000 and "mixture of experts" in ridge.question
    # the dense rule, 625 x 1 / 2 = 312.5 -> 313, is the experts' coverage forgotten
    assert ridge.slip_key("313") == "moe_coverage_forgotten"
    models, prefills = set(), 0
    for seed in range(200):
        p = generate("low_precision_compute", seed)
        if p.params["model"] not in ("Qwen/Qwen3-30B-A3B", "openai/gpt-oss-120b"):
            continue
        models.add(p.params["model"])
        if p.quantity == "low_precision_ttft_ms" and p.params["model"] == "Qwen/Qwen3-30B-A3B":
            i = p.inputs
            assert i["num_params"] == 3_353_032_704 - 151_936 * 2048 == 3_041_867_776
            assert i["total_params"] == 1_541_093_376 + 48 * 128 * 4_718_592 - 151_936 * 2048
            hand = 2 * 3_041_867_776 * i["prompt_tokens"] / (i["mfu"] * i["peak_flop_per_s"]) * 1000
            assert p.answer == pytest.approx(hand, rel=1e-12)
            wrong = hand * i["total_params"] / i["num_params"]
            assert p.slip_key(f"{wrong:.6g}") == "moe_total_params"
            prefills += 1
    assert models == {"Qwen/Qwen3-30B-A3B", "openai/gpt-oss-120b"} and prefills >= 3


def _slipped(p):
    """(a wrong answer computed here, the slip it must be named as)."""
    i = p.params
    if p.template == "moe_decode/experts":
        return i["batch_size"] * i["top_k"], "experts_batch_times_k"
    if p.template == "moe_decode/bytes":
        return i["num_params"] * 2, "moe_read_all_weights"
    if p.template == "moe_decode/all_read":
        return math.ceil(i["num_experts"] / i["top_k"]), "all_read_at_e_over_k"
    if p.template == "requests_concurrency/littles_law":
        return i["rate_per_s"] * i["ttft_s"], "decode_time_left_out"
    if p.template == "requests_concurrency/prefill_steps":
        return math.ceil(i["prompt_tokens"] / i["token_budget"]), "decodes_not_subtracted"
    if p.template == "disagg_transfer/bytes":
        return _independent(p, i["prompt_tokens"] + i["output_tokens"]), "transfer_output_tokens_added"
    if p.template == "disagg_transfer/time":
        return i["transfer_bytes"] / (i["tp"] * i["link_gbit_per_s"] * 1e9) * 1000, "link_bits_as_bytes"
    if p.template == "indexer_cache/bytes":
        return i["indexer_layers"] * i["index_head_dim"], "indexer_scale_forgotten"
    if p.template == "indexer_cache/pool":
        return i["budget_bytes"] // (p.steps()[2].value), "indexer_forgotten"
    if p.template == "hybrid_state/state":
        return _hybrid_by_hand(i["model"], i["tp"], i["seq_len"], False) * i["seq_len"], "state_grows_with_context"
    if p.template == "hybrid_state/sequence":
        kv_only = _hybrid_by_hand(i["model"], i["tp"], i["seq_len"], True) - \
            _hybrid_by_hand(i["model"], i["tp"], i["seq_len"], False)
        return kv_only, "hybrid_state_left_out"
    if p.template.startswith("low_precision_compute/prefill"):
        return 2 * i["num_params"] * i["prompt_tokens"] / (i["mfu"] * 2 * i["peak_flop_per_s"]) * 1000, \
            "sparse_peak_used"
    if p.template.startswith("low_precision_compute/ridge"):
        return _ridge_by_hand(i["other_peak_flop_per_s"], i), "peak_of_wrong_dtype"
    if p.template == "eagle_mtp/tokens":
        return p.answer - 1, "eagle_no_bonus"
    if p.template == "eagle_mtp/speedup":
        return _independent(dataclasses.replace(p, template="eagle_mtp/tokens")), "draft_cost_ignored"
    if p.template == "expert_parallel/bytes":
        return p.answer / i["moe_layers"], "a2a_moe_layers_missing"
    if p.template == "expert_parallel/vs_tp":
        return i["top_k"], "ep_tokens_not_split"
    if p.template == "long_ttft":
        return 2 * i["num_params"] * i["prompt_tokens"] / (i["tp"] * i["mfu"] * i["peak_flop_per_s"]) * 1000, \
            "attention_flops_left_out"
    return i["prompt_tokens"] / i["output_tokens"], "pd_tokens_only"


@pytest.mark.parametrize("template", ["moe_decode/experts", "moe_decode/bytes", "moe_decode/all_read",
                                      "requests_concurrency/littles_law", "requests_concurrency/prefill_steps",
                                      "disagg_transfer/bytes", "disagg_transfer/time", "disagg_transfer/pd_ratio",
                                      "long_ttft", "expert_parallel/bytes", "expert_parallel/vs_tp",
                                      "eagle_mtp/tokens", "eagle_mtp/speedup", "low_precision_compute/prefill/fp8",
                                      "low_precision_compute/prefill/fp4", "low_precision_compute/ridge/fp8",
                                      "low_precision_compute/ridge/fp4", "hybrid_state/state",
                                      "hybrid_state/sequence", "indexer_cache/bytes", "indexer_cache/pool"])
def test_a_known_mistake_is_named_with_its_step(template):
    named = 0
    draws = _draws(template.split("/")[0], template, count=6)
    for p in draws:
        wrong, key = _slipped(p)
        if wrong == p.answer:
            continue
        v = p.verdict(wrong)
        assert not v.correct and f"[{key}]" in v.feedback, (p.question, v.feedback)
        assert p.slip_step(key) is not None and "{" not in v.feedback
        named += 1
    assert named >= 4


@pytest.mark.parametrize("topic, module", [("moe_decode", moe_decode), ("requests_concurrency", requests_concurrency),
                                           ("disagg_transfer", disagg_transfer), ("long_ttft", long_ttft),
                                           ("expert_parallel", expert_parallel), ("eagle_mtp", eagle_mtp),
                                           ("low_precision_compute", low_precision_compute),
                                           ("hybrid_state", hybrid_state), ("indexer_cache", indexer_cache)])
def test_at_least_three_named_slips_each_made_on_some_draw(topic, module):
    # a topic's slips: those its module declares, and those it shares with the chapter that teaches the rule
    # (the indexer's and the state's slips are declared once, in kvcoach/slips/state_sparsity.py for ch10)
    made = set()
    for seed in SEEDS:
        p = generate(topic, seed)
        _, table = variants(p.quantity, unit=p.units, **p.inputs)
        made |= {k.split("@")[0] for k, _ in table} & set(SLIPS)
    assert set(module.SLIP_WORDS) <= made and len(made) >= 3, sorted(made)


@pytest.mark.parametrize("topic", ["moe_decode", "disagg_transfer", "long_ttft", "expert_parallel", "eagle_mtp",
                                   "low_precision_compute", "hybrid_state", "indexer_cache"])
def test_draws_run_on_the_2026_gpus(topic):
    gpus, models = set(), set()
    for seed in range(60):
        p = generate(topic, seed)
        gpus.add(p.params["gpu"])
        models.add(p.params["model"])
        card = "GB200" if p.params["gpu"] == "GB200-NVL72" else p.params["gpu"]    # a rack's GPUs are GB200s
        for check in p.params["deployments"]:
            r = check_deployment(p.params["model"], card, **check)
            assert r.fits, (seed, r.summary())
    assert gpus <= {"H200", "B200", "B300", "GB200", "GB200-NVL72"} and len(gpus) >= 3
    assert len(models) >= (2 if topic == "indexer_cache" else 3)
    # Kimi K2 where the family draws mixtures of experts (dense models, hybrids and DSA models elsewhere)
    if topic not in ("low_precision_compute", "eagle_mtp", "hybrid_state", "indexer_cache"):
        assert "moonshotai/Kimi-K2-Instruct" in models


class _Pipe(io.StringIO):
    def isatty(self):
        return False


@pytest.mark.parametrize("topic", FAMILIES_2026)
def test_kvlib_drill_asks_them(topic, monkeypatch, capsys, tmp_path):
    from kvlib.cli import main
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "stdin", _Pipe("0.0001\n"))          # wrong on every draw: the steps follow
    assert main(["drill", "--topic", topic, "--count", "1", "--seed", "2", "--no-history"]) == 0
    out, err = capsys.readouterr()
    assert f"[{topic}]" in out and "worked steps:" in out and err == ""


@pytest.mark.parametrize("topic", FAMILIES_2026)
def test_ch09_drill_mode_asks_them(topic):
    from kvdisplay.drills import DrillSession
    session = DrillSession((topic,), seed=5, history=None)
    p = session.new_question()
    assert p.topic == topic
    assert session.answer("1").correct in (True, False)
