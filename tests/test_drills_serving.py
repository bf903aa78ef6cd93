"""kvcoach.drills' serving families ([drills §1]) and the variety of a long problem set (§6).

Every answer is recomputed here from what the question states, with the formula written out; one
characteristic wrong answer per family is computed here and must be named as its slip; every draw's
deployment passes check_deployment again; 200 questions in a row repeat no (template, model, GPU)
more than MAX_REPEATS times; the graded drills of existing students are what they were.
"""

import collections
import hashlib
import json
import math

import pytest

import kvlib as kv
from kvlib import serving
from kvcoach.drills import (GRADED_TOPICS, MAX_REPEATS, TOPICS, generate, problem_set, student_problem,
                          variety_key)
from kvlib.feasibility import check_deployment
from kvcoach.slips import diagnose

SERVING_TOPICS = ("ttft", "ridge_batch", "decode_rate", "chunked_prefill", "batching", "prefix_hit", "spec_decode",
                  "quant_speedup", "allreduce", "cost")
SEEDS = range(30)


def _ms(flops, p):
    return flops / (p["mfu"] * p["peak_flop_per_s"]) * 1000


def _decode_rate(p):
    step = (-(-p["weight_bytes"] // p["tp"]) + p["batch_size"] * p["kv_bytes_per_sequence_per_gpu"]) \
        / p["bandwidth_bytes_per_s"]
    return 1 / step if p["per"] == "user" else p["batch_size"] / (p["tp"] * step)


def _spec(p):
    if "acceptance" in p:
        a, g = p["acceptance"], p["draft_tokens"]
        # a mixture-of-experts target: the verify reads the experts gamma + 1 tokens touch, v plain steps
        v = p.get("verify_weight_bytes", p["weight_bytes"]) / p["weight_bytes"]
        return (1 - a ** (g + 1)) / (1 - a) / (g * p["draft_weight_bytes"] / p["weight_bytes"] + v)
    bpt = 2 * p["layers"] * p["kv_heads"] * p["head_dim"] * p["dtype_bytes"]
    return p["draft_weight_bytes"] + bpt * p["seq_len"] * p["batch_size"]


def _ridge(p):
    dense = -(-p["peak_flop_per_s"] * round(2 * p["dtype_bytes"]) // (4 * p["bandwidth_bytes_per_s"]))
    if "num_experts" not in p:
        return dense
    # the routed experts: B tokens touch E (1 - (1 - k/E)^B) of E; intensity 2 k B / (E_B b) against F / BW
    e, k, b = p["num_experts"], p["top_k"], p["dtype_bytes"]
    batch = dense
    while 2 * k * batch * p["bandwidth_bytes_per_s"] < p["peak_flop_per_s"] * b * e * (1 - (1 - k / e) ** batch):
        batch += 1
    return batch


def _rate(p):
    return p["tokens_per_s"] if "tokens_per_s" in p else p["batch_size"] / (p["step_ms"] / 1000)


# Each answer from the question's figures, the formula written out.
INDEPENDENT = {
    "ttft": lambda p: _ms(2 * p["num_params"] * p["prompt_tokens"], p),
    "ridge_batch": lambda p: _ridge(p),
    "decode_rate": _decode_rate,
    "chunked_prefill": lambda p: max((p["weight_bytes"] + p["kv_bytes"]) / p["bandwidth_bytes_per_s"] * 1000,
                                     _ms(2 * p["num_params"] * (p["batch_size"] + p["chunk_tokens"]), p)),
    "batching": lambda p: (len(p["output_tokens"]) * max(p["output_tokens"]) / sum(p["output_tokens"])
                           if p["template"] == "batching/speedup" else
                           len(p["output_tokens"]) * max(p["output_tokens"]) - sum(p["output_tokens"])),
    "prefix_hit": lambda p: _ms(2 * p["num_params"] * (p["prompt_tokens"] - p["shared_tokens"] // p["block_size"]
                                                       * p["block_size"]), p),
    "spec_decode": _spec,
    "quant_speedup": lambda p: (p["weight_bytes"] + p["kv_bytes"]) / (p["quant_weight_bytes"] + p["kv_bytes"]),
    "allreduce": lambda p: p["layers"] * 2 * 2 * (p["tp"] - 1) * p["tokens"] * p["hidden_size"] * p["dtype_bytes"]
                           // p["tp"],
    "cost": lambda p: p["price_per_gpu_hour"] * p["gpus"] / 3600 / _rate(p) * 1e6,
}


def _params(p):
    return dict(p.params, template=p.template)


def test_the_serving_topics_are_the_new_ones_and_not_graded():
    # the 2026 families (kvcoach.drills.FAMILIES_2026, tests/test_drill_families.py) come after them
    from kvcoach.drills import FAMILIES_2026
    assert list(TOPICS)[-len(SERVING_TOPICS) - len(FAMILIES_2026):-len(FAMILIES_2026)] == list(SERVING_TOPICS)
    assert list(TOPICS)[-len(FAMILIES_2026):] == list(FAMILIES_2026) and set(INDEPENDENT) == set(SERVING_TOPICS)
    assert not set(SERVING_TOPICS) & set(GRADED_TOPICS)


@pytest.mark.parametrize("topic", SERVING_TOPICS)
def test_answers_match_the_formula_and_check_accepts_them(topic):
    for seed in SEEDS:
        p = generate(topic, seed)
        assert p.topic == topic and p.template.split("/")[0] == topic
        assert p.answer == pytest.approx(INDEPENDENT[topic](_params(p)), rel=1e-12), (seed, p.question)
        assert p.check(p.answer)[0]
        assert p.steps()[-1].value == p.answer
        if p.tolerance:
            assert p.tolerance == 0.005 and "within 0.5%" in p.units_line()
            assert p.check(p.answer * 1.002)[0] and not p.check(p.answer * 1.02)[0]
        else:
            assert type(p.answer) is int and not p.check(p.answer + 1)[0]
        assert p.params["model"] in p.question and p.params["gpu"] in p.question


def _slipped(topic, p):
    """(a wrong answer computed here, the slip it must be named as), or None where it equals the answer."""
    q = _params(p)
    if topic == "ttft":
        return q["num_params"] * q["prompt_tokens"] / (q["mfu"] * q["peak_flop_per_s"]) * 1000, \
            "prefill_missing_factor_2"
    if topic == "ridge_batch":
        return math.floor(q["peak_flop_per_s"] * q["dtype_bytes"] / (2 * q["bandwidth_bytes_per_s"])), \
            "batch_rounded_down"
    if topic == "decode_rate":
        step = (-(-q["weight_bytes"] // q["tp"]) + q["batch_size"] * q["kv_bytes_per_sequence_per_gpu"]) \
            / q["bandwidth_bytes_per_s"]
        if q["per"] == "user":
            return q["batch_size"] / step, "batch_rate_for_user"
        return q["batch_size"] / step, "per_replica_not_per_gpu"
    if topic == "chunked_prefill":
        return (q["weight_bytes"] + q["kv_bytes"]) / q["bandwidth_bytes_per_s"] * 1000 \
            + _ms(2 * q["num_params"] * (q["batch_size"] + q["chunk_tokens"]), q), "sum_not_max"
    if topic == "batching":
        o = q["output_tokens"]
        if q["template"] == "batching/speedup":
            return sum(o) / max(o), "static_rate_not_speedup"
        return sum(o), "tokens_not_waste"
    if topic == "prefix_hit":
        return _ms(2 * q["num_params"] * q["prompt_tokens"], q), "no_cache"
    if topic == "spec_decode":
        if "acceptance" in q:
            return (1 - q["acceptance"] ** (q["draft_tokens"] + 1)) / (1 - q["acceptance"]), "draft_cost_ignored"
        return q["draft_weight_bytes"], "draft_kv_missing"
    if topic == "quant_speedup":
        return q["weight_bytes"] / q["quant_weight_bytes"], "kv_left_out"
    if topic == "allreduce":
        return q["layers"] * 2 * q["tokens"] * q["hidden_size"] * 2, "ring_factor_missing"
    if topic == "cost":
        return q["price_per_gpu_hour"] * q["gpus"] / _rate(q) * 1e6, "hours_not_seconds"
    raise KeyError(topic)


@pytest.mark.parametrize("topic", SERVING_TOPICS)
def test_a_known_mistake_is_named_with_its_step(topic):
    named = differ = 0
    for seed in SEEDS:
        p = generate(topic, seed)
        wrong, key = _slipped(topic, p)
        if wrong == pytest.approx(p.answer, rel=max(p.tolerance, 1e-9)):
            continue            # the slip changes nothing here (TP 2's ring factor is 1, tp = 1 per GPU)
        differ += 1
        ok, feedback = p.check(wrong)
        assert not ok
        named += p.slip_key(wrong) == key and f"[{key}]" in feedback
        assert p.slip_step(key) is not None
        d = diagnose(p.quantity, wrong, rel_tol=p.tolerance or 1e-9, **p.inputs)
        assert d.slip is not None and d.slip.message in feedback
        assert "{" not in d.slip.message
    assert differ >= 5 and named >= 0.9 * differ, f"{key} named in only {named} of {differ} problems"


@pytest.mark.parametrize("topic", SERVING_TOPICS + ("block_waste",))
def test_every_draw_is_a_deployment_that_runs(topic):
    for seed in range(150):
        p = generate(topic, seed)
        for check in p.params["deployments"]:
            r = check_deployment(p.params["model"], p.params["gpu"], **check)
            assert r.fits, (seed, p.question[:100], r.summary())


def test_the_serving_families_draw_every_kind_of_model_and_every_gpu():
    models, gpus = collections.Counter(), set()
    for topic in SERVING_TOPICS:
        for seed in range(60):
            p = generate(topic, seed)
            models[p.params["model"]] += 1
            gpus.add(p.params["gpu"])
    specs = [kv.load_model(m) for m in models]
    # every card the drills were written for (kvcoach.drills._GPU_NAMES); the newer rows and the NVL72 domain not yet
    assert gpus == {"A10", "A100-40GB", "A100-80GB", "A10G", "B200", "H100-PCIe", "H100-SXM", "H200", "L4", "L40S",
                    "MI300X", "RTX-3090", "RTX-4090", "T4"}
    assert not gpus & {"B300", "GB200", "GB200-NVL72", "MI325X", "MI355X"} and gpus < set(kv.GPUS)
    assert any(s.is_mla for s in specs)                                       # DeepSeek-V3
    assert any(s.num_params_active() < s.num_params() for s in specs)          # Mixtral, gpt-oss
    assert any("sliding" in s.layer_kinds for s in specs)                      # Mistral, Gemma 2, gpt-oss
    assert any(s.num_kv_heads == s.num_heads for s in specs)                   # MHA: Llama 2 7B, GPT-2
    assert any(1 < s.num_heads // s.num_kv_heads for s in specs if not s.is_mla)   # GQA
    assert set(models) == set(kv.course_models())


def test_two_hundred_questions_in_a_row_vary():
    from kvcoach.drills import FAMILIES_2026
    for seed in range(3):
        problems = problem_set(seed, 200)
        triples = collections.Counter(variety_key(p) for p in problems)
        assert max(triples.values()) <= MAX_REPEATS
        assert len(triples) >= 150                              # measured: 157 to 174 for seeds 0-3
        assert len({p.topic for p in problems}) == len(TOPICS) == 21 + len(FAMILIES_2026)
        assert len({p.template for p in problems}) >= 31        # 29 + the 2026 families' 5 templates in all


def test_a_single_topic_set_varies_too():
    triples = collections.Counter(variety_key(p) for p in problem_set(4, 40, topic="decode_rate"))
    assert max(triples.values()) <= MAX_REPEATS


#: Graded draws changed on purpose since [drills]: [diagnosis] (session 3) draws again a step time where a forgotten
#: batch read as forgotten layers (within 0.5%: a small cache beside the weights; kvcoach.drills._SEPARATE).
REDRAWN = {("student-001", "step_time"), ("student-006", "step_time"), ("student-008", "step_time")}
#: Graded figures corrected on purpose: a mixture of experts' step reads only the experts its batch touches
#: (Mixtral 8x7B in student-003's step time; see test_moe_graded_step_time_reads_the_experts_touched).
MOE_CORRECTED = {("student-003", "step_time")}
#: [interview 2026 §1]: a pool asked within 0.5% is drawn again where the label-memory slip lands within 0.5% of the answer
#: (label and CUDA-reported memory close: the learner who took the label would be marked right).
REDRAWN_50 = {("student-006", "pool"), ("student-009", "pool")}
#: [interview 2026 §1] moved the tolerance from the question's text to its units line: these questions said "(to 0.5%)".
SAID_TOLERANCE = ("crossover", "step_time")
#: The graded topics these pins cover, in notebook order; [interview 2026 §2] graded the 2026 families after them (each
#: answer worked by hand in tests/test_checks_ch09.py), whose draws the pin leaves out so the old rows stay as they were.
GRADED_BEFORE_2026 = ("kv_per_token", "concurrency", "pool", "crossover", "step_time", "mla_vs_gqa", "tp_per_gpu",
                      "plan_step")


def _as_asked_before_issue_50(p) -> str:
    return p.question + (" (to 0.5%)" if p.topic in SAID_TOLERANCE else "")


def test_graded_drills_of_existing_students_are_unchanged():
    # sha256 of (question, answer) of students 000-011 on every graded topic, computed with kvlib before [drills]
    # (f550b7a8...); every row but the REDRAWN ones, computed with kvlib before [diagnosis]'s redraw (e7a0191d...);
    # every row but the REDRAWN, REDRAWN_50 and MOE_CORRECTED ones, computed with the drills before both changes
    # (before [interview 2026]'s tolerance line and before the experts-touched rule: 75aaa367...)
    rows = [[_as_asked_before_issue_50(student_problem(f"student-{i:03d}", t)),
             repr(student_problem(f"student-{i:03d}", t).answer)]
            for i in range(12) for t in GRADED_BEFORE_2026
            if (f"student-{i:03d}", t) not in REDRAWN | REDRAWN_50 | MOE_CORRECTED]
    assert GRADED_TOPICS[:len(GRADED_BEFORE_2026)] == GRADED_BEFORE_2026
    assert hashlib.sha256(json.dumps(rows).encode()).hexdigest() == \
        "75aaa3670da05a21c17bebfe995867b12ee038573d0720309caaa5ed43a93c60"
    # the redrawn ones: a forgotten batch is now named first (where the new draw's batch is above 1)
    for student, topic in REDRAWN:
        p = student_problem(student, topic)
        q = p.inputs
        if q["batch_size"] == 1:
            continue
        no_batch = (q["weight_bytes"] + 2 * q["layers"] * q["kv_heads"] * q["head_dim"] * q["dtype_bytes"]
                    * q["seq_len"]) / q["bandwidth_bytes_per_s"] * 1000
        assert p.slip_key(f"{no_batch:.6g}") == "missing_batch", (student, p.question)
    for student, topic in REDRAWN_50:
        # the label's bytes in place of CUDA's (kvlib.formulas.kv_pool_tokens by hand): now named, not accepted
        q = student_problem(student, topic).inputs
        label = int((q["label_bytes"] * q["utilization"] - q["weight_bytes"] - q["other_bytes"]) // q["bytes_per_token"])
        right = int((q["gpu_bytes"] * q["utilization"] - q["weight_bytes"] - q["other_bytes"]) // q["bytes_per_token"])
        assert abs(label - right) > 0.005 * right
        assert student_problem(student, topic).slip_key(str(label)) == "label_memory", (student, label, right)


# --- kvlib.serving against arithmetic done by hand --------------------------------------------
def test_serving_formulas_by_hand():
    # Llama 3.1 8B, 2,000 prompt tokens, H100 at 50% MFU: 2 x 8.03e9 x 2,000 = 3.212e13 FLOP / 4.945e14 FLOP/s
    assert serving.prefill_seconds(8.03e9, 2000, 989e12, 0.5) == pytest.approx(0.0649545, rel=1e-5)
    # H100: 989e12 / 3.35e12 = 295.22 FLOP/B: bf16 -> 296, fp8 weights on fp8 compute 1979e12 / 3.35e12 / 2 = 295.4 -> 296
    assert serving.ridge_batch(989 * 10**12, 3_350_000_000_000, 2) == 296
    assert serving.ridge_batch(1979 * 10**12, 3_350_000_000_000, 1) == 296
    assert serving.ridge_batch(300, 100, 2) == 3                   # exactly on the ridge: 3, not 4
    # 4 requests of 100, 300, 200, 400 tokens: static 1,000 / 400 = 2.5 per step; continuous 4 -> 1.6x; idle 600
    assert serving.continuous_batching_speedup([100, 300, 200, 400]) == pytest.approx(1.6)
    # alpha 0.8, gamma 4: 1 + 0.8 + 0.64 + 0.512 + 0.4096 = 3.3616 tokens; c = 0.05 -> / 1.2 = 2.8013
    assert serving.speculative_expected_tokens(0.8, 4) == pytest.approx(3.3616)
    assert serving.speculative_speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)
    assert serving.speculative_expected_tokens(1, 4) == 5
    # ring over 8 GPUs: 2 x 7 / 8 = 1.75 x the message
    assert serving.ring_allreduce_bytes_sent(65536, 8) == 114688
    assert serving.tp_allreduce_bytes_per_step(80, 16, 8192, 2, 4) == 80 * 2 * 16 * 8192 * 2 * 3 // 2
    # $2.50 x 8 GPUs an hour = $20 / 3,600 s; 5,000 tokens/s -> 200 s for a million: $1.11
    assert serving.cost_per_million_tokens(2.5, 8, 5000) == pytest.approx(20 / 3600 * 200)
    assert serving.prefix_hit_tokens(2007, 16) == 2000 and serving.prefix_hit_tokens(15, 16) == 0
    assert serving.weight_only_speedup(16e9, 4e9, 0) == 4


# --- a mixture of experts' figures read the experts its tokens touch ----------------------------------------------
# Mixtral 8x7B (config.json): 1,605,636,096 parameters outside the routed experts, 32 MoE layers of 8 experts of
# 3 x 4,096 x 14,336 = 176,160,768; B tokens touch 8 (1 - 0.75^B) of them per layer.
def _mixtral_read(tokens):
    return 2 * (1_605_636_096 + 32 * 176_160_768 * 8 * (1 - 0.75 ** tokens))


def _first(topic, accept):
    for seed in range(400):
        p = generate(topic, seed)
        if accept(p):
            return p
    raise AssertionError(f"no {topic} draw in 400 seeds")


def test_spec_decode_on_mixtral_reads_the_experts_touched():
    p = _first("spec_decode", lambda p: p.template == "spec_decode/speedup" and "Mixtral" in p.params["model"])
    q = p.params
    g = q["draft_tokens"]
    assert q["weight_bytes"] == pytest.approx(_mixtral_read(1), abs=1) == 2 * 12_879_925_248
    assert q["verify_weight_bytes"] == pytest.approx(_mixtral_read(g + 1), abs=1)
    assert q["total_weight_bytes"] == pytest.approx(2 * 46_702_792_704, rel=1e-3)     # as the checkpoint stores them
    # against the old figure (the total weights per step, the verify as one step) it is far lower
    a = q["acceptance"]
    e = (1 - a ** (g + 1)) / (1 - a)
    old = e / (g * q["draft_weight_bytes"] / q["total_weight_bytes"] + 1)
    assert p.answer == pytest.approx(e / (g * q["draft_weight_bytes"] / _mixtral_read(1)
                                          + _mixtral_read(g + 1) / _mixtral_read(1)), rel=1e-6)
    assert p.answer < old / 2
    assert "moe_total_weights" in str(diagnose(p.quantity, old, rel_tol=p.tolerance, **p.inputs))
    # the question reads as sentences: the weight-read rule, then the mixture of experts (once it ran "so <model>
    # is a mixture of experts" and "1 token(s) routed uniformly touch")
    assert "weight read. Here mistralai/Mixtral-8x7B-v0.1 is a mixture of experts" in p.question
    assert "one token routed uniformly touches" in p.question and "token(s)" not in p.question


def test_moe_ridge_batch_counts_coverage():
    p = _first("ridge_batch", lambda p: "num_experts" in p.params)
    q = p.params
    dense = -(-q["peak_flop_per_s"] * round(2 * q["dtype_bytes"]) // (4 * q["bandwidth_bytes_per_s"]))
    # at least E / k times the dense figure, less a little for the rounding
    assert p.answer >= (q["num_experts"] / q["top_k"]) * (dense - 1)
    assert "moe_coverage_forgotten" in str(diagnose(p.quantity, dense, rel_tol=1e-9, **p.inputs))


@pytest.mark.parametrize("topic", ["decode_rate", "quant_speedup"])
def test_moe_steps_read_the_experts_touched(topic):
    p = _first(topic, lambda p: "Mixtral" in p.params["model"])
    q = p.params
    tokens = q.get("batch_size", 1)
    assert q["weight_bytes"] == pytest.approx(_mixtral_read(tokens), abs=1)
    assert q["weight_bytes"] < 2 * 46_702_792_704


def _moe_draws(topic, seeds=200):
    """(seed, problem, model spec) of every draw of ``topic`` that is a mixture of experts."""
    for seed in range(seeds):
        p = generate(topic, seed)
        spec = kv.load_model(p.params["model"])
        if spec.num_experts:
            yield seed, p, spec


def test_cost_of_a_mixtral_step_reads_the_experts_touched():
    # Mixtral 8x7B on 8 x L4 (300 GB/s, NVIDIA's L4 datasheet), 8 sequences of 1,024 tokens, the step stated in ms.
    # 8 tokens touch 8 (1 - 0.75^8) = 7.199 of 8 experts in each of 32 layers: (1,605,636,096 + 32 x 7.199 x
    # 176,160,768) x 2 = 84,375,969,792 B, an eighth per GPU; cache 2 x 32 x 1 KV head x 128 x 2 B x 1,024 x 8 =
    # 134,217,728 B per GPU: (10,546,996,224 + 134,217,728) / 300e9 = 35.60 ms (every expert: 39.37 ms)
    p = _first("cost", lambda p: "Mixtral" in p.params["model"] and p.params["gpu"] == "L4"
               and p.params.get("batch_size") == 8 and p.params["gpus"] == 8)
    kv = 2 * 32 * 1 * 128 * 2 * 1024 * 8
    assert p.params["deployments"][0]["seq_len"] == 1024
    assert p.inputs["step_ms"] == round((_mixtral_read(8) / 8 + kv) / 300e9 * 1e3, 2) == 35.6
    assert round((2 * 46_702_792_704 / 8 + kv) / 300e9 * 1e3, 2) == 39.37


def test_cost_of_a_deepseek_step_reads_the_experts_touched():
    # DeepSeek-V3 in fp8 (1 B a parameter) on 4 x B200 (8 TB/s), 16 sequences of 2,048 tokens. Its 58 MoE layers have
    # 256 routed experts of 3 x 7,168 x 2,048 = 44,040,192 parameters, 8 per token: 16 tokens touch
    # 256 (1 - (31/32)^16) = 101.96 of them. Dense part 671,026,404,352 - 58 x 256 x 44,040,192 = 17,117,633,536;
    # read 17,128,644,608 + 58 x 101.96 x 44,040,192 = 277,562,759,447 B, a quarter per GPU. MLA's cache
    # ((512 + 64) x 61 layers x 2 B a token, every TP rank holds it whole) 16 x 2,048 x 70,272 = 2,302,672,896 B:
    # (69,390,689,862 + 2,302,672,896) / 8e12 = 8.96 ms, not the 21.26 ms of reading all 671 GB
    p = _first("cost", lambda p: "DeepSeek-V3" in p.params["model"] and p.params.get("batch_size") == 16
               and p.params["gpu"] == "B200" and p.params["gpus"] == 4)
    assert p.params["deployments"][0]["seq_len"] == 2048
    touched = 256 * (1 - (31 / 32) ** 16)
    read = 671_026_404_352 - 58 * 256 * 44_040_192 + 58 * touched * 44_040_192
    kv = (512 + 64) * 61 * 2 * 2048 * 16
    assert p.inputs["step_ms"] == round((read / 4 + kv) / 8e12 * 1e3, 2) == 8.96
    assert round((671_026_404_352 / 4 + kv) / 8e12 * 1e3, 2) == 21.26


def test_cost_draws_mixtures_of_experts_and_never_charges_them_every_expert():
    # every MoE draw's stated rate or step beats the step that reads all of the weights, wherever a batch leaves an
    # expert unread on average (tokens/s: B / step; the step: (W / t + B S_g) / BW)
    seen = collections.Counter()
    for seed, p, spec in _moe_draws("cost"):
        seen[spec.name] += 1
        dep = p.params["deployments"][0]
        gpu = kv.get_gpu(p.params["gpu"])
        b, t = dep["batch_size"], dep["tp"]
        every = (dep["weight_bytes"] / t + b * spec.kv_bytes_per_sequence(dep["seq_len"], tp=t)) \
            / gpu.bandwidth_bytes_per_s
        step = p.inputs["step_ms"] / 1e3 if "step_ms" in p.inputs else b / p.inputs["tokens_per_s"]
        unread = spec.num_experts * (1 - spec.num_experts_per_tok / spec.num_experts) ** b
        if unread > 0.01 * spec.num_experts:
            assert step < every, (seed, spec.name)
        else:
            assert step == pytest.approx(every, rel=0.01), (seed, spec.name)
    assert len(seen) == 3 and sum(seen.values()) >= 20, seen


def test_a_chunked_prefill_step_of_a_moe_reads_every_expert():
    # chunked_prefill charges a mixture of experts its whole weights: right only because the step's B decodes and C chunk
    # tokens (at least 8 + 256) touch every expert. Mixtral (8, top 2): 8 x 0.75^264 = 8e-33 experts unread; gpt-oss-20b
    # (32, top 4): 32 x 0.875^264 = 1.5e-14; DeepSeek-V3 (256, top 8) would leave 256 x (31/32)^264 = 0.058 unread
    # (0.02% of its expert bytes): none is near the 0.5% tolerance
    seen = collections.Counter()
    for seed, p, spec in _moe_draws("chunked_prefill"):
        seen[spec.name] += 1
        tokens = p.inputs["batch_size"] + p.inputs["chunk_tokens"]
        assert tokens >= 264
        e, k = spec.num_experts, spec.num_experts_per_tok
        assert e * (1 - k / e) ** tokens / e < 0.001, (seed, spec.name)
    assert sum(seen.values()) >= 20, seen


def test_mixtral_crossover_states_the_weights_a_step_reads():
    # the crossover compares a step's KV read with its weight read: Mixtral's batch of 64 touches
    # 8 (1 - 0.75^64) = 8 - 8e-8 experts, so 93.41 GB; 93.41e9 / (131,072 x 64) = 11,135.5 tokens
    p = _first("crossover", lambda p: "Mixtral" in p.params["model"] and p.inputs["batch_size"] == 64)
    assert p.inputs["weight_bytes"] == round(_mixtral_read(64) / 1e7) * 10**7 == 93_410_000_000
    assert "experts" in p.question and "93.41 GB" in p.question
    assert p.answer == pytest.approx(93_410_000_000 / (131_072 * 64))


def test_moe_graded_step_time_reads_the_experts_touched():
    p = student_problem("student-003", "step_time")
    q = p.inputs
    assert "Mixtral" in p.question and "experts" in p.question
    # the step's weights: the bytes the batch's experts make, rounded to the GB the question prints
    assert q["weight_bytes"] == pytest.approx(_mixtral_read(q["batch_size"]), rel=0.005)
    bpt = 2 * 32 * 8 * 128 * 2
    expected = (q["weight_bytes"] + bpt * q["seq_len"] * q["batch_size"]) / q["bandwidth_bytes_per_s"] * 1000
    assert p.answer == pytest.approx(expected, rel=1e-12)


def test_the_exponent_gamma_for_gamma_plus_one_is_named():
    # [interview 2026 §1]: E typed with alpha^gamma, (1 - a^g) / (1 - a), over the step's cost g c + v (Leviathan et al.
    # 2023, eq. 1 has gamma + 1; v = 1 for a dense target, W_verify / W_one for a mixture of experts), by hand from
    # the question's figures
    found = 0
    for seed in range(60):
        p = generate("spec_decode", seed)
        if p.quantity != "spec_speedup":
            continue
        q = p.inputs
        a, g, c = q["acceptance"], q["draft_tokens"], q["draft_weight_bytes"] / q["weight_bytes"]
        v = q.get("verify_weight_bytes", q["weight_bytes"]) / q["weight_bytes"]
        wrong = (1 - a ** g) / (1 - a) / (g * c + v)
        assert p.slip_key(f"{wrong:.5g}") == "acceptance_exponent_gamma", (seed, p.check(f"{wrong:.5g}")[1])
        assert p.steps()[p.slip_step("acceptance_exponent_gamma")].label == "tokens per verification"
        found += 1
    assert found >= 10


def test_a_mixture_of_experts_total_parameters_are_named_in_prefix_hit():
    # the same slip as ttft names: 2 x all parameters x the tokens still prefilled / (MFU x peak), by hand
    found = 0
    for seed in range(200):
        p = generate("prefix_hit", seed)
        q = p.inputs
        if q["total_params"] == q["active_params"]:
            continue            # dense: 2 x all parameters is the embedding slip (tests below)
        cached = q["shared_tokens"] // q["block_size"] * q["block_size"]
        wrong = 2 * q["total_params"] * (q["prompt_tokens"] - cached) / (q["mfu"] * q["peak_flop_per_s"]) * 1000
        # named first, or beside another slip that gives the same number here (both are named and recorded)
        assert "moe_total_params" in p.verdict(f"{wrong:.5g}").slips, (seed, p.check(f"{wrong:.5g}")[1])
        assert f"{q['total_params']:,}" in p.question
        found += 1
    assert found >= 3


# One prefill-FLOP rule: a prompt token is multiplied by the matmuls' parameters, P - V d (the input embedding is a
# lookup). By hand: Llama 3.1 8B (config.json: 8,030,261,248 parameters, vocab_size 128,256, hidden_size 4,096):
# V d = 525,336,576, P_m = 7,504,924,672. gpt-oss-20b (config.json: vocab_size 201,088, hidden_size 2,880):
# V d = 579,133,440; OpenAI's model card lists 3.61B active parameters (the embedding apart) and 20.91B in all.
LLAMA_PM, LLAMA_P = 7_504_924_672, 8_030_261_248
GPT_OSS_PM, GPT_OSS_VD, GPT_OSS_TOTAL = 3_608_307_264, 201_088 * 2_880, 20_914_757_184


def _prefill_answer(topic, q, params):
    """The family's answer with P = params, the formula written out."""
    if topic == "ttft":
        return _ms(2 * params * q["prompt_tokens"], q)
    if topic == "prefix_hit":
        return _ms(2 * params * (q["prompt_tokens"] - q["shared_tokens"] // q["block_size"] * q["block_size"]), q)
    return max((q["weight_bytes"] + q["kv_bytes"]) / q["bandwidth_bytes_per_s"] * 1000,
               _ms(2 * params * (q["batch_size"] + q["chunk_tokens"]), q))


@pytest.mark.parametrize("topic", ["ttft", "chunked_prefill", "prefix_hit"])
def test_the_prefill_families_multiply_by_the_matmul_parameters_dense(topic):
    assert LLAMA_P - 128_256 * 4_096 == LLAMA_PM and 128_256 * 4_096 == 525_336_576
    found = 0
    for seed in range(80):
        p = generate(topic, seed)
        if p.params["model"] != "meta-llama/Llama-3.1-8B":
            continue
        q = p.inputs
        assert q["num_params"] == LLAMA_PM and q["active_params"] == q["total_params"] == LLAMA_P
        assert "multiplies each token by 7,504,924,672 parameters (the embedding lookup excluded" in p.question
        assert p.answer == pytest.approx(_prefill_answer(topic, q, LLAMA_PM), rel=1e-12)
        wrong = _prefill_answer(topic, q, LLAMA_P)            # 2 x all 8.03e9 parameters: 7.0% high
        if wrong == pytest.approx(p.answer, rel=1e-9):
            continue                                          # a chunked step the reads set: P changes nothing
        assert wrong == pytest.approx(p.answer * LLAMA_P / LLAMA_PM, rel=1e-12)
        v = p.verdict(f"{wrong:.6g}")
        assert not v.correct and v.slips[0] == "embedding_counted", v.feedback     # named first
        assert "the input embedding is a table lookup, not a matmul" in v.feedback and "7,504,924,672" in v.feedback
        enters = p.steps()[p.slip_step("embedding_counted")]       # the FLOPs step: 2 x P_m x tokens
        assert "embedding lookup excluded" in enters.label and enters.substitution.startswith("2 · 7,504,924,672 · ")
        found += 1
    assert found >= 2


@pytest.mark.parametrize("topic", ["ttft", "chunked_prefill", "prefix_hit"])
def test_the_prefill_families_multiply_by_the_matmul_parameters_moe(topic):
    assert GPT_OSS_VD == 579_133_440 and round(GPT_OSS_PM / 1e9, 2) == 3.61 and round(GPT_OSS_TOTAL / 1e9, 2) == 20.91
    found = 0
    for seed in range(80):
        p = generate(topic, seed)
        if p.params["model"] != "openai/gpt-oss-20b":
            continue
        q = p.inputs
        assert (q["num_params"], q["active_params"], q["total_params"]) == \
            (GPT_OSS_PM, GPT_OSS_PM + GPT_OSS_VD, GPT_OSS_TOTAL)
        assert f"multiplies each token by {GPT_OSS_PM:,} parameters" in p.question and "a mixture of experts" in p.question
        assert p.answer == pytest.approx(_prefill_answer(topic, q, GPT_OSS_PM), rel=1e-12)
        for params, key in ((GPT_OSS_PM + GPT_OSS_VD, "embedding_counted"), (GPT_OSS_TOTAL, "moe_total_params")):
            wrong = _prefill_answer(topic, q, params)
            if wrong == pytest.approx(p.answer, rel=1e-9):
                continue                                      # a chunked step the reads set
            assert key in p.verdict(f"{wrong:.6g}").slips, (seed, key, p.check(f"{wrong:.6g}")[1])
            found += 1
    assert found >= 3


def test_a_tied_embedding_is_multiplied_once_and_no_embedding_slip_is_catalogued():
    # Qwen3-0.6B ties its table to the LM head (config.json: tie_word_embeddings true): 596,049,920 multiplied
    from kvcoach.slips import variants
    p = next(p for p in (generate("ttft", s) for s in range(20)) if p.params["model"] == "Qwen/Qwen3-0.6B")
    assert p.inputs["num_params"] == p.inputs["active_params"] == 596_049_920
    assert "tied to the LM head, so multiplied by once" in p.question
    assert "embedding_counted" not in [k for k, _ in variants(p.quantity, unit=p.units, **p.inputs)[1]]


def test_a_draw_whose_embedding_share_hides_the_slip_is_drawn_again():
    # Llama 2 70B (config.json: 68,976,648,192 parameters, vocab_size 32,000, hidden_size 8,192): V d = 262,144,000,
    # 0.38% of the 68,714,504,192 multiplied -- inside a 0.5% tolerance, so 2 x all parameters would be marked right.
    # generate() draws such a problem again (swallowed_slips), as for every family's slips.
    from types import MappingProxyType
    from kvcoach.drills import Problem, swallowed_slips
    p_m = 68_976_648_192 - 32_000 * 8_192
    inputs = {"num_params": p_m, "active_params": 68_976_648_192, "total_params": 68_976_648_192,
              "prompt_tokens": 2000, "peak_flop_per_s": 989e12, "mfu": 0.5}
    answer = 2 * p_m * 2000 / (0.5 * 989e12) * 1000
    hidden = Problem(topic="ttft", seed=0, question="Q?", answer=answer, units="ms", tolerance=0.005,
                     quantity="ttft_ms", params=MappingProxyType({"model": "meta-llama/Llama-2-70b-chat-hf"}),
                     inputs=MappingProxyType(inputs))
    assert swallowed_slips(hidden) == ("embedding_counted",)
    # Llama 3.1 8B's 7.0% is told apart: kept
    assert swallowed_slips(generate("ttft", 0)) == () and generate("ttft", 0).params["model"] == "meta-llama/Llama-3.1-8B"


def test_long_ttft_names_the_embedding_counted_on_a_dense_model():
    # Llama 3.3 70B multiplies a prompt token by 70,553,706,496 - 128,256 x 8,192 = 69,503,033,344 parameters; an
    # answer with all 70,553,706,496 is the embedding counted, not a mixture of experts' total (it has no experts)
    assert 70_553_706_496 - 128_256 * 8_192 == 69_503_033_344
    from kvcoach.slips.long_ttft import _flops
    seed = next(s for s in range(200) if generate("long_ttft", s).params["total_params"] == 70_553_706_496)
    p = generate("long_ttft", seed)
    i = p.params
    assert i["num_params"] == 69_503_033_344 and i["active_params"] == 70_553_706_496
    wrong_ms = _flops(i, linear_params=70_553_706_496) / (i["tp"] * i["mfu"] * i["peak_flop_per_s"]) * 1e3
    ok, message = p.check(f"{wrong_ms:.3f}")
    assert not ok and "[embedding_counted]" in message and "moe_total_params" not in message, message
