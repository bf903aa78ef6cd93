"""Chapter 09's per-learner drills and instant checks ([per-learner drills]).

Expected values are hand arithmetic on the figures each question states
(``ch09_drill_answers.EXPRESSIONS``, never kvlib), plus figures written out
below: Llama 2 7B (config.json: 32 layers, 32 KV heads, head_dim 128) in bf16 is
2 x 32 x 32 x 128 x 2 = 524,288 B per token; the A100-80GB pool of Llama 3.1 8B
(CUDA reports 79.15 GiB = 84,986,665,370 B; u = 0.92; 16.06 GB weights; 3 GB
other; 131,072 B per token) holds floor(84,986,665,370 x 0.92 - 16.06e9 - 3e9)
// 131,072 = floor(59,127,732,140.4) // 131,072 = 451,108 tokens.
"""

from __future__ import annotations

import hashlib
import math
import re
import random
import subprocess
import sys

import numpy as np
import pytest

from autograder.checks import ch09, check, claim_student, current_student, my_question
from ch09_drill_answers import DRILL_IDS, FLOAT_TOPICS, KINDS, Q1, TOLERANT_TOPICS, TOPICS, hand_answer, typed
from chapter_checks import fails
from kvcoach import learner
from kvcoach.drills import GRADED_KINDS, GRADED_TOPICS, TOPICS as ALL_TOPICS, DrillError, Question, generate, student_problem

ADA, ALAN = "ada", "alan"
ID_VARS = ("KV_COURSE_GRADING_STUDENT", "JUPYTERHUB_USER", "KV_COURSE_STUDENT", "STUDENT_ID")


@pytest.fixture(autouse=True)
def no_student(monkeypatch):
    """Every test starts with no id anywhere (and leaves no claim behind)."""
    for var in ID_VARS:
        monkeypatch.delenv(var, raising=False)
    claim_student(None)
    yield
    claim_student(None)


# --- kvcoach.drills: the learner's own problem ------------------------------------------------------
def test_graded_topics_are_the_contract():
    assert GRADED_TOPICS == TOPICS
    assert dict(GRADED_KINDS) == KINDS
    assert set(GRADED_TOPICS) <= set(ALL_TOPICS)


@pytest.mark.parametrize("topic", TOPICS)
def test_same_id_same_problem_seeded_from_the_id_alone(topic):
    p = student_problem(ADA, topic)
    assert p == student_problem(ADA, topic)
    # seed: the first 8 bytes of SHA-256 of "<id>/<topic>", big-endian (the interface)
    seed = int.from_bytes(hashlib.sha256(f"{ADA}/{topic}".encode()).digest()[:8], "big")
    assert p.seed == seed and p == generate(topic, seed, kind=KINDS.get(topic))
    assert p.template.split("/")[:2] == [topic, *([KINDS[topic]] if topic in KINDS else [])]


def test_same_problem_in_another_process():
    code = ("from kvcoach.drills import student_problem as s; "
            "print(repr([s('ada', t).answer for t in ('pool', 'step_time', 'plan_step')]))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": h, "PATH": ""}).stdout for h in ("1", "2")}
    assert runs == {repr([student_problem(ADA, t).answer for t in ("pool", "step_time", "plan_step")]) + "\n"}


def test_two_ids_draw_different_answers():
    # the pair the grading tests use: every graded answer differs, so swapped answers are wrong
    for topic in TOPICS:
        assert student_problem(ADA, topic).answer != student_problem(ALAN, topic).answer, topic


@pytest.mark.parametrize("student", [ADA, ALAN, "grace", "student-017"])
@pytest.mark.parametrize("topic", TOPICS)
def test_answer_is_the_hand_arithmetic_of_the_stated_figures(student, topic):
    p = student_problem(student, topic)
    expected = hand_answer(topic, p.public().params)
    if topic in FLOAT_TOPICS:
        assert p.answer == pytest.approx(expected, rel=1e-12)
    else:
        assert type(expected) is int and p.answer == expected
    assert p.check(typed(expected))[0]


def test_two_drawn_problems_written_out():
    kv = student_problem(ADA, "kv_per_token")
    assert kv.params["model"] == "meta-llama/Llama-2-7b-hf" and kv.answer == 524_288   # 2 x 32 x 32 x 128 x 2
    pool = student_problem(ADA, "pool")
    assert (pool.params["gpu"], pool.params["gpu_bytes"], pool.params["utilization"]) == ("A100-80GB",
                                                                                          84_986_665_370, 0.92)
    assert pool.answer == 451_108                                                          # the module doc
    # the 2026 question: Llama 3.3 70B, 16,384 tokens in fp8 on one H200 (1,979 TFLOP/s dense fp8) at 60% MFU;
    # linear 2 x 69,503,033,344 x 16,384 = 2,277,475,396,616,192 FLOP; attention 2 x 80 x 64 x (128 + 128)
    # x 16,384 x 16,385 / 2 = 351,865,195,724,800 FLOP; sum 2,629,340,592,340,992 / (0.6 x 1.979e15) = 2,214.37 ms
    ttft = student_problem(ADA, "long_ttft")
    assert (ttft.params["model"], ttft.params["gpu"], ttft.params["prompt_tokens"], ttft.params["mfu"]) == \
        ("meta-llama/Llama-3.3-70B-Instruct", "H200", 16_384, 0.6)
    assert ttft.answer == pytest.approx(2_214.368, rel=1e-6)


def test_public_question_holds_no_answer():
    for topic in TOPICS:
        p = student_problem(ADA, topic)
        q = p.public()
        assert isinstance(q, Question) and not hasattr(q, "answer") and not hasattr(q, "check")
        assert (q.topic, q.question, q.units, q.tolerance) == (p.topic, p.question, p.units, p.tolerance)
        assert dict(q.params) == dict(p.params)
        if type(p.answer) is int and p.answer >= 1000:     # a figure distinctive enough to look for
            assert p.answer not in q.params.values() and f"{p.answer:,}" not in repr(q), topic
            assert str(p.answer) not in repr(q), topic
    assert student_problem(ADA, "step_time").public().tolerance_text() == "within 0.5%"
    assert student_problem(ADA, "pool").public().tolerance_text() == "within 0.5%"
    assert student_problem(ADA, "concurrency").public().tolerance_text() == "exact"


@pytest.mark.parametrize("bad", ["", "   ", None, 7])
def test_student_problem_refuses_a_missing_id(bad):
    with pytest.raises(DrillError, match="student_id"):
        student_problem(bad, "pool")
    with pytest.raises(DrillError, match="topic"):
        student_problem(ADA, "nope")


# --- the student id ---------------------------------------------------------------------------------
def test_student_id_order(monkeypatch):
    """The grader's id, the STUDENT_ID cell, the hub login, KV_COURSE_STUDENT, STUDENT_ID in the environment."""
    assert current_student() is None
    monkeypatch.setenv("STUDENT_ID", "e")
    assert current_student() == "e"
    monkeypatch.setenv("KV_COURSE_STUDENT", "d")
    assert current_student() == "d"
    monkeypatch.setenv("JUPYTERHUB_USER", "c")
    assert current_student() == "c"
    assert claim_student("b") == "b" == current_student()          # the notebook's own cell before the login
    monkeypatch.setenv("KV_COURSE_GRADING_STUDENT", "a")
    assert current_student() == "a" and claim_student("someone-else") == "a"
    monkeypatch.delenv("KV_COURSE_GRADING_STUDENT")
    assert current_student() == "someone-else"
    assert claim_student("") == "c" and claim_student(None) == "c"    # withdrawn: back to the hub login
    monkeypatch.delenv("JUPYTERHUB_USER")
    monkeypatch.delenv("KV_COURSE_STUDENT")
    assert current_student() == "e"
    with pytest.raises(TypeError, match="STUDENT_ID must be text"):
        claim_student(42)


def test_binders_generated_hub_user_is_never_the_learner(monkeypatch):
    """On Binder (its environment as BinderHub sets it), JUPYTERHUB_USER is made up for the session: the STUDENT_ID
    cell decides, and with none there is no id (ch09's questions are never drawn for Binder's user)."""
    from ch09_drill_answers import BINDER_ENV, BINDER_USER

    for name, value in BINDER_ENV.items():
        monkeypatch.setenv(name, value)
    assert current_student() is None and learner.hub_user() is None
    assert "STUDENT_ID" in fails(DRILL_IDS["pool"], 451_108)
    assert claim_student("p1") == "p1"
    assert my_question("pool").question == student_problem("p1", "pool").public().question
    assert my_question("pool").question != student_problem(BINDER_USER, "pool").public().question
    check(DRILL_IDS["pool"], hand_answer("pool", my_question("pool").params))   # p1's own answer, by hand
    monkeypatch.delenv("BINDER_LAUNCH_HOST")                         # the same user on a real hub: the login
    claim_student(None)
    assert current_student() == BINDER_USER == learner.hub_user()


def test_blank_values_name_nobody(monkeypatch):
    monkeypatch.setenv("KV_COURSE_GRADING_STUDENT", "  ")
    monkeypatch.setenv("JUPYTERHUB_USER", "")
    assert current_student() is None
    assert claim_student("  ada ") == "ada"


def test_the_one_variable_name_agrees_everywhere():
    from autograder import nbgrader_setup, sandbox, verdict_runner
    assert learner.GRADING_STUDENT_ENV == sandbox.GRADING_STUDENT_ENV == nbgrader_setup.GRADING_STUDENT_ENV \
        == verdict_runner.GRADING_STUDENT_ENV == "KV_COURSE_GRADING_STUDENT"


def test_the_verdict_runner_reads_the_student_before_the_answer_cells(monkeypatch):
    """The graded id comes from the payload (else the grader's variable) once, at start-up: an answer cell
    that rewrites the variable or claims another id later cannot move the drill-read check to another problem
    (tests/hostile/ch09.py's drill_answer_id_rewritten, graded in tests/test_grading_ch09_variants.py)."""
    from autograder import verdict_runner as R

    monkeypatch.setenv("KV_COURSE_GRADING_STUDENT", "from-env")
    assert R.graded_student({"student": "ada"}) == "ada"
    assert R.graded_student({"student": None}) is None and R.graded_student({"student": "  "}) is None
    assert R.graded_student({}) == "from-env"
    seen = []
    assert R._drill_reads(lambda topic, who: seen.append((topic, who)) or ["x"], "answer_pool", "ada") == ["x"]
    assert seen == [("pool", "ada")] and R._drill_reads(None, "answer_pool", "ada") == []
    assert R._drill_reads(lambda *a: ["x"], "kv_cache_bytes", "ada") == []


def test_my_question_is_the_learners_and_needs_an_id():
    with pytest.raises(LookupError, match="STUDENT_ID"):
        my_question("pool")
    claim_student(ALAN)
    assert my_question("pool") == student_problem(ALAN, "pool").public()


# --- the exercises -------------------------------------------------------------------------------------
def test_ten_exercises_in_order():
    assert list(ch09.EXERCISES) == [Q1, *DRILL_IDS.values()]
    q1 = ch09.EXERCISES[Q1]
    assert not q1.value and q1.params == ("layers", "kv_heads", "head_dim", "seq_len", "batch", "dtype_bytes")
    for topic, gid in DRILL_IDS.items():
        ex = ch09.EXERCISES[gid]
        assert ex.value and ex.function_name == f"answer_{topic}" and ex.params == ()
        assert ex.cases(True, 5, ADA) == ()


@pytest.mark.parametrize("topic", TOPICS)
def test_own_typed_answer_passes_and_the_other_students_fails(topic, capsys):
    claim_student(ADA)
    mine = hand_answer(topic, student_problem(ADA, topic).params)
    check(DRILL_IDS[topic], mine)
    check(DRILL_IDS[topic], float(typed(mine)))
    assert f"✓ answer_{topic}" in capsys.readouterr().out
    theirs = hand_answer(topic, student_problem(ALAN, topic).params)
    message = fails(DRILL_IDS[topic], theirs)
    assert message.startswith(f"✗ {DRILL_IDS[topic]}: answer_{topic} = ")
    assert "exact" in message or "within 0.5%" in message


#: one unit off an exact count is named (first, or as the alternative beside a unit slip that gives the same
#: count) as off by one, or as the count's rounding taken the other way (the floors of Exercises 3-4, the
#: ceiling of Exercise 9)
ROUNDED = {"off_by_one", "ceil_not_floor", "floor_nodes"}
#: one node more than the ceiling is also what a pool read in GiB gives (7.4% fewer sequences per node): the
#: check names that, the specific slip, before the generic off by one
ROUNDED_NODES = ROUNDED | {"gb_for_gib"}


@pytest.mark.parametrize("student", [ADA, ALAN, "grace"])
def test_the_edges_the_text_states(student):
    """ch09.EDGES, on each learner's own question: 0.49% off either way passes the 0.5% of Exercises 5-6,
    0.51% fails (|a - e| <= 0.005 max(|a|, |e|): 1.0051 e is 0.0051 e off, over 0.005 x 1.0051 e = 0.0050255 e);
    the exact counts fail one unit either way, named as off by one. The outside verdict: test_grading_ch09_variants."""
    assert set(ch09.EDGES) == set(DRILL_IDS.values())
    claim_student(student)
    for topic in TOPICS:
        right = hand_answer(topic, student_problem(student, topic).params)
        (rule,) = ch09.EDGES[DRILL_IDS[topic]]
        if topic in TOLERANT_TOPICS:
            assert "0.49%" in rule["rule"] and "0.51%" in rule["rule"]
            for inside in (1.0049, 0.9951):
                check(DRILL_IDS[topic], right * inside)
            for outside in (1.0051, 0.9949):
                message = fails(DRILL_IDS[topic], right * outside)
                assert "within 0.5%" in message and f"{right:,}" not in message, message
        else:
            assert "off by one" in rule["rule"]
            for off in (1, -1):
                message = fails(DRILL_IDS[topic], right + off)
                named = {k.split("@")[0] for k in re.findall(r"\[([a-z0-9_+@]+)\]", message)}
                assert "(exact;" in message and named & (ROUNDED_NODES if topic == "plan_step" else ROUNDED), message


@pytest.mark.parametrize("student", [ADA, ALAN, "grace"])
def test_a_slip_is_named_and_the_answer_is_never_shown(student):
    claim_student(student)
    p = student_problem(student, "kv_per_token").params
    right = 2 * p["layers"] * p["kv_heads"] * p["head_dim"] * p["dtype_bytes"]
    message = fails(DRILL_IDS["kv_per_token"], right // 2)                       # K and V counted once
    assert "[missing_kv_factor]" in message and "factor 2 for K and V" in message
    assert f"{right:,}" not in message and str(right) not in message
    assert "x too" not in message                                                 # no ratio to work it back from
    c = student_problem(student, "concurrency").params
    per_seq = 2 * c["layers"] * c["kv_heads"] * c["head_dim"] * c["dtype_bytes"] * c["seq_len"]
    if c["budget_bytes"] % per_seq:
        message = fails(DRILL_IDS["concurrency"], -(-c["budget_bytes"] // per_seq))   # rounded up
        assert "[ceil_not_floor]" in message
    tp = student_problem(student, "tp_per_gpu").params
    whole = 2 * tp["layers"] * tp["kv_heads"] * tp["head_dim"] * tp["dtype_bytes"]
    assert "[total_not_per_gpu]" in fails(DRILL_IDS["tp_per_gpu"], whole)
    t = student_problem(student, "long_ttft").params                  # the attention FLOPs left out
    linear_only = 2 * t["num_params"] * t["prompt_tokens"] / (t["tp"] * t["mfu"] * t["peak_flop_per_s"]) * 1e3
    message = fails(DRILL_IDS["long_ttft"], f"{linear_only:.2f} ms")
    assert "[attention_flops_left_out]" in message and f"{student_problem(student, 'long_ttft').answer:.1f}" \
        not in message, message


def _state_and_kv(q) -> tuple:
    """(conv, recurrent) state bytes of one state layer and the attention KV of a hybrid_state question, by hand."""
    t = q["tp"]
    if "linear_num_value_heads" in q:            # Gated DeltaNet: bf16 states
        conv = (q["linear_conv_kernel_dim"] - 1) * (2 * q["linear_num_key_heads"] * q["linear_key_head_dim"]
                                                   + q["linear_num_value_heads"] * q["linear_value_head_dim"]) // t * 2
        recurrent = q["linear_num_value_heads"] // t * q["linear_value_head_dim"] * q["linear_key_head_dim"] * 2
    else:                                        # Mamba2: bf16 conv, float32 SSM
        conv = (q["conv_kernel"] - 1) * (q["mamba_num_heads"] * q["mamba_head_dim"]
                                         + 2 * q["n_groups"] * q["ssm_state_size"]) // t * 2
        recurrent = q["mamba_num_heads"] // t * q["mamba_head_dim"] * q["ssm_state_size"] * 4
    kv = q["attention_layers"] * 2 * max(1, q["kv_heads"] // t) * q["head_dim"] * 2 * q["seq_len"]
    return conv, recurrent, kv


def _mla_and_indexer(q) -> tuple:
    return (q["num_layers"] * (q["kv_lora_rank"] + q["qk_rope_head_dim"]) * 2,
            q["indexer_layers"] * (q["index_head_dim"] + q["index_head_dim"] // 128 * 4))


def _eagle_reach(q) -> list:
    out, reach = [], 1.0
    for a in q["acceptance_per_position"]:
        reach *= a
        out.append(reach)
    return out


#: Three or more slips of each 2026 family's graded question, worked by hand from the stated figures (q) and the
#: right answer (r): {topic: {slip key: value}}.
FAMILY_SLIPS = {
    "moe_decode": lambda q, r: {
        "moe_read_all_weights": q["num_params"] * q["weight_dtype_bytes"],               # every expert read
        "moe_dense_left_out": r - (q["num_params"] - q["moe_layers"] * q["num_experts"] * q["expert_params"])
        * q["weight_dtype_bytes"],                                                       # the routed experts only
        "moe_read_top_k_only": (q["num_params"] - q["moe_layers"] * q["num_experts"] * q["expert_params"]
                                + q["moe_layers"] * q["top_k"] * q["expert_params"]) * q["weight_dtype_bytes"]},
    "requests_concurrency": lambda q, r: {
        "ttft_left_out": q["rate_per_s"] * q["output_tokens"] * q["itl_ms"] / 1000,
        "decode_time_left_out": q["rate_per_s"] * q["ttft_s"],
        "itl_ms_as_seconds": q["rate_per_s"] * (q["ttft_s"] + q["output_tokens"] * q["itl_ms"])},
    "disagg_transfer": lambda q, r: {
        "link_bits_as_bytes": q["transfer_bytes"] / (q["tp"] * q["link_gbit_per_s"] * 1e9) * 1000,
        "seconds_for_ms": r / 1000,
        **({"one_link_for_all": q["transfer_bytes"] / (q["link_gbit_per_s"] * 1e9 / 8) * 1000} if q["tp"] > 1
           else {})},
    "expert_parallel": lambda q, r: {
        "a2a_local_routes_counted": q["moe_layers"] * q["tokens"] * q["top_k"] * q["hidden_size"]
        * (q["dispatch_bytes"] + q["combine_bytes"]),
        "a2a_top_k_missing": r / q["top_k"],
        "a2a_moe_layers_missing": r / q["moe_layers"]},
    "eagle_mtp": lambda q, r: {
        "eagle_no_bonus": sum(_eagle_reach(q)) / (q["draft_tokens"] * q["cost_ratio"] + q["verify_ratio"]),
        "draft_cost_ignored": 1 + sum(_eagle_reach(q)),                  # the drafts free, the verify one step
        "eagle_sum_not_product": (1 + sum(q["acceptance_per_position"]))
        / (q["draft_tokens"] * q["cost_ratio"] + q["verify_ratio"]),
        **({"moe_verify_as_one_step": (1 + sum(_eagle_reach(q))) / (q["draft_tokens"] * q["cost_ratio"] + 1)}
           if q["verify_ratio"] != 1 else {})},
    "low_precision_compute": lambda q, r: {
        "ignored_mfu": r * q["mfu"],
        "sparse_peak_used": r / 2,            # twice the peak: the same number as 1 FLOP per parameter, both named
        "peak_of_wrong_dtype": 2 * q["num_params"] * q["prompt_tokens"] / (q["mfu"] * q["other_peak_flop_per_s"])
        * 1000},
    "hybrid_state": lambda q, r: {
        "hybrid_state_left_out": _state_and_kv(q)[2],
        "conv_state_left_out": q["state_layers"] * _state_and_kv(q)[1] + _state_and_kv(q)[2],
        "state_all_layers": q["num_layers"] * sum(_state_and_kv(q)[:2]) + _state_and_kv(q)[2],
        "hybrid_kv_every_layer": q["state_layers"] * sum(_state_and_kv(q)[:2])
        + _state_and_kv(q)[2] // q["attention_layers"] * q["num_layers"]},
    "indexer_cache": lambda q, r: {
        "indexer_forgotten": q["budget_bytes"] // _mla_and_indexer(q)[0],
        "indexer_in_bf16": q["budget_bytes"] // (_mla_and_indexer(q)[0]
                                                 + q["indexer_layers"] * q["index_head_dim"] * 2),
        **({"indexer_split_by_tp": q["budget_bytes"] // (_mla_and_indexer(q)[0] + _mla_and_indexer(q)[1] // q["tp"])}
           if q["tp"] > 1 else {})},
}


@pytest.mark.parametrize("topic", sorted(FAMILY_SLIPS))
def test_each_graded_family_names_three_slips(topic):
    """[interview 2026 §2]: every 2026 family's graded exercise names at least three slips, at its tolerance, with
    the answer never shown; a slip that lands within 0.5% of the answer, or of another slip (at an MFU of 50%,
    2 FLOPs per parameter forgotten is the MFU ignored), on a draw is not asked there."""
    named = set()
    for student in (ADA, ALAN, "grace", "student-017", "p1", "p2", "p3", "p4"):
        claim_student(student)
        q = student_problem(student, topic).public().params
        right = hand_answer(topic, q)
        table = FAMILY_SLIPS[topic](q, right)
        for key, value in table.items():
            if any(abs(value - other) <= 0.005 * abs(other) for other in (right, *(table[k] for k in table if k != key))):
                continue
            message = fails(DRILL_IDS[topic], value)
            assert f"[{key}]" in message, (student, key, message)
            assert f"{right:,}" not in message and typed(right) not in message, message
            named.add(key)
    assert len(named) >= 3, named


@pytest.mark.parametrize("value, words", [(None, "is None"), ("lots", "is text that is not a number in tokens"),
                                          ("451108 parsecs", "is text that is not a number in tokens"), (True, "type bool"),
                                          (float("nan"), "nan or infinity"), ([1], "type list"),
                                          (np.int64(451_108), "convert it with int(...)")])
def test_a_value_that_is_not_a_number(value, words):
    claim_student(ADA)
    assert words in fails(DRILL_IDS["pool"], value)


@pytest.mark.parametrize("student", [ADA, ALAN])
def test_a_graded_value_is_read_as_the_drills_read_it(student):
    # [interview 2026 §1]: one rule for every drill answer -- the graded value typed as text in any notation the drills read
    # is right within the same tolerance, and a slip typed so is named at it
    claim_student(student)
    q = student_problem(student, "kv_per_token").public().params
    right = 2 * q["layers"] * q["kv_heads"] * q["head_dim"] * q["dtype_bytes"]
    for typed_answer in (right, float(right), f"{right}", f"{right:,}", f"{right:.6e}", f"{right / 1e3:.2f} KB",
                         f"{right / 2**10:g} KiB", right * 1.004):
        check(DRILL_IDS["kv_per_token"], typed_answer)
    for slipped in (right // 2 - 100, f"{right / 2e3:.1f} KB"):          # K and V once, 0.04% off the slip
        assert "[missing_kv_factor]" in fails(DRILL_IDS["kv_per_token"], slipped)
    assert "within 0.5%" in fails(DRILL_IDS["kv_per_token"], right * 1.006)
    c = student_problem(student, "concurrency").public().params          # exact: a count whose floor is asked
    fit = c["budget_bytes"] // (2 * c["layers"] * c["kv_heads"] * c["head_dim"] * c["dtype_bytes"] * c["seq_len"])
    check(DRILL_IDS["concurrency"], f"{fit} sequences")
    check(DRILL_IDS["concurrency"], float(fit))
    assert "(exact;" in fails(DRILL_IDS["concurrency"], f"{fit + 1} sequences")


def test_no_id_asks_for_student_id():
    message = fails(DRILL_IDS["pool"], 451_108)
    assert "STUDENT_ID" in message and "451,108" not in message


def test_q1_formula_function():
    def kv_cache_bytes(layers, kv_heads, head_dim, seq_len, batch, dtype_bytes):
        return 2 * layers * kv_heads * head_dim * seq_len * batch * dtype_bytes

    for seed in (0, 1, 2026):
        check(Q1, kv_cache_bytes)
        check(Q1, kv_cache_bytes, hidden=True, seed=seed)

    def once(layers, kv_heads, head_dim, seq_len, batch, dtype_bytes):
        return layers * kv_heads * head_dim * seq_len * batch * dtype_bytes
    assert "factor 2 for K and V" in fails(Q1, once)

    def no_batch(layers, kv_heads, head_dim, seq_len, batch, dtype_bytes):
        return 2 * layers * kv_heads * head_dim * seq_len * dtype_bytes
    assert "batch" in fails(Q1, no_batch)
    # Llama 3.1 8B, bf16, 32 x 4,096 tokens: 131,072 B x 4,096 x 32 = 17,179,869,184 B (the first visible case)
    assert "17,179,869,184" in fails(Q1, once)


def test_the_fixture_notebook_and_the_exercises_agree():
    from autograder import chapter
    from ch09_drill_answers import ASSIGNMENT, answer_cell, fixture_source

    nb = fixture_source()
    assert chapter.problems(nb, ASSIGNMENT) == []
    answer_cell(nb, "pool")["source"] = "pool_answer = 3\n"        # the name the test cell passes is never set
    assert chapter.problems(nb, ASSIGNMENT) == [
        f"{ASSIGNMENT}.ipynb: no answer cell assigns answer_pool = ... (value exercise ch09_q4_pool)"]


def test_hidden_cases_vary_with_the_seed():
    ex = ch09.EXERCISES[Q1]
    assert ex.cases(True, 1) != ex.cases(True, 2)
    assert len({c["kwargs"]["dtype_bytes"] for s in range(5) for c in ex.cases(True, s)}) >= 2


def test_random_ids_rarely_share_a_problem():
    rng = random.Random(25)
    ids = [f"s{rng.getrandbits(32):08x}" for _ in range(40)]
    for topic in ("pool", "plan_step", "step_time"):
        assert len({student_problem(i, topic).answer for i in ids}) >= 10, topic


# --- slips through the shared mechanism ([diagnosis]) ------------------------------------------------
def test_no_offered_slip_contradicts_a_case():
    """Every catalogued slip, made by a learner: each alternative offered fits every visible case."""
    from chapter_checks import offered_slips_contradicting_a_case
    assert offered_slips_contradicting_a_case(ch09.EXERCISES) == []


def test_generic_slips_are_named():
    """Off by one, s/ms, per GPU/node, the next unit, KB/GB/TB mix-ups: named in every numeric exercise."""
    from chapter_checks import generic_slips_unnamed
    assert generic_slips_unnamed(ch09.EXERCISES) == []


# --- topic slips of the drills ([diagnosis §3]), with figures by hand ------------------------------------
def test_drill_topic_slips_are_named():
    from kvcoach import slips
    # pool: 80e9 B x 0.9 - 16e9 - 2e9 = 54e9 B / 131,072 B = 411,987 tokens; without u: 62e9 / 131,072 = 473,022
    pool = dict(gpu_bytes=80 * 10**9, utilization=0.9, weight_bytes=16 * 10**9, other_bytes=2 * 10**9,
                bytes_per_token=131_072)
    assert slips.expected_value("kv_pool_tokens", **pool) == 411_987
    assert slips.diagnose("kv_pool_tokens", 473_022, unit="tokens", **pool).slip.key == "ignored_utilization"
    # MLA, fp8: 61 x (512 + 64) x 1 = 35,136 B; in bf16 70,272
    mla = dict(layers=61, latent_dim=512, rope_dim=64, dtype_bytes=1, num_heads=128, qk_head_dim=192)
    d = slips.diagnose("mla_bytes_per_token", 70_272, unit="bytes", **mla)
    assert d.slip.key == "wrong_16bit_vs_fp8" and "you used 2" in d.message, d.message   # then "Or: factor 2"
    # TP 8, Llama 3.3 70B: 2 x 80 x 1 x 128 x 2 = 40,960 B; the 64 query heads split over 8 GPUs: 327,680
    tp = dict(layers=80, kv_heads=8, head_dim=128, dtype_bytes=2, num_heads=64, tp=8)
    assert "query heads" in slips.diagnose("kv_bytes_per_token_per_gpu", 327_680, unit="bytes", **tp).message
    # nodes: 1 KV head per GPU, 16,384 B per token, 8,192 tokens = 134,217,728 B per sequence; 40e9 B hold 298;
    # 1,000 users need ceil(3.36) = 4 nodes; the floor gives 3
    nodes = dict(layers=32, kv_heads=8, head_dim=128, dtype_bytes=2, num_heads=32, tp=8, users=1000, seq_len=8192,
                 pool_bytes_per_gpu=40 * 10**9)
    assert slips.expected_value("nodes_for_memory", **nodes) == 4
    d = slips.diagnose("nodes_for_memory", 3, unit="nodes", **nodes)
    assert d.slip.key == "floor_nodes" and "Or:" not in d.message, d.message


# --- [drills §5]: a value read from kvlib's drill object is refused; practice keeps working -------
def _refusal(topic):
    message = fails(DRILL_IDS[topic], student_problem(ADA, topic).answer)
    assert message == (f"✗ {DRILL_IDS[topic]}: answer_{topic} is the answer read from kvlib's drill object "
                       "(kvcoach.drills.Problem.answer), not worked out: a graded answer must be your own arithmetic "
                       "on the figures your question states."), message
    return message


@pytest.mark.parametrize("topic", TOPICS)
def test_the_drill_objects_answer_is_refused(topic):
    from kvcoach import drills

    claim_student(ADA)
    mine = hand_answer(topic, student_problem(ADA, topic).public().params)
    check(DRILL_IDS[topic], mine)                             # nothing read yet: the arithmetic passes
    assert drills.answer_reads() == frozenset()
    _refusal(topic)
    assert (topic, student_problem(ADA, topic).seed) in drills.answer_reads()
    assert "read from kvlib's drill object" in fails(DRILL_IDS[topic], mine)   # the same number, once read


def test_what_counts_as_reading_the_answer():
    from kvcoach import drills

    claim_student(ADA)
    p = student_problem(ADA, "pool")
    p.check(1, reveal=False)                                   # the graded question's check: no answer shown
    assert p.slip_key(1) is None and p.public().params
    assert drills.answer_reads() == frozenset()
    assert "The answer is" in p.check(1)[1]                    # the feedback shows it: a read
    assert drills.answer_reads() == {("pool", p.seed)}
    drills._ANSWER_READS.clear()
    repr(p)
    assert drills.answer_reads() == {("pool", p.seed)}
    drills._ANSWER_READS.clear()
    p.matching_step(1), p.slip_step("missing_layers")            # an index says nothing of the answer
    assert drills.answer_reads() == frozenset()
    p.steps()                                                  # the worked chain ends on the answer: a read
    assert drills.answer_reads() == {("pool", p.seed)}


def test_practice_reads_other_problems_and_the_course_reads_none():
    import io

    from kvdisplay.drills import DrillSession
    from kvcoach import drills

    claim_student(ADA)
    for seed in range(3):                                      # practice: other problems' answers
        q = drills.generate("pool", seed)
        assert q.check(q.answer)[0]
    session = DrillSession(seed=4, topics=("pool",))          # drill mode (kvdisplay) and kvlib drill read freely
    session.answer(str(session.new_question().answer + 1))
    drills.run_drill([student_problem(ADA, "pool")], stdin=io.StringIO("1\n"), stdout=io.StringIO(), reveal=False)
    mine = hand_answer("pool", student_problem(ADA, "pool").public().params)
    assert ("pool", student_problem(ADA, "pool").seed) not in drills.answer_reads()
    check(DRILL_IDS["pool"], mine)


# --- [diagnosis §3] through the checks: the slip a learner makes is the one the feedback leads with -----------
def _heads_per_gpu(q):
    return max(1, q["kv_heads"] // q["tp"])


#: (grade id's topic, the slip's key, the learner's slipped arithmetic on the stated figures, by hand;
#: None where the slip cannot be made on that draw: it gives the right answer)
SLIPPED = {
    "utilization forgotten (Ex 4)": ("pool", "ignored_utilization",
                                     lambda q: math.floor(q["gpu_bytes"] - q["weight_bytes"] - q["other_bytes"])
                                     // q["bytes_per_token"]),
    "batch forgotten (Ex 5)": ("crossover", "crossover_not_divided",
                               lambda q: q["weight_bytes"] / (2 * q["layers"] * q["kv_heads"] * q["head_dim"]
                                                              * q["dtype_bytes"])),
    "batch forgotten (Ex 6)": ("step_time", "missing_batch",
                               lambda q: None if q["batch_size"] == 1 else
                               (q["weight_bytes"] + 2 * q["layers"] * q["kv_heads"] * q["head_dim"] * q["dtype_bytes"]
                                * q["seq_len"]) / q["bandwidth_bytes_per_s"] * 1000),
    "bf16 instead of fp8 (Ex 7)": ("mla_vs_gqa", "wrong_16bit_vs_fp8",
                                   lambda q: None if q["dtype_bytes"] != 1 else
                                   q["layers"] * (q["latent_dim"] + q["rope_dim"]) * 2),
    "query heads split over the GPUs (Ex 8)": ("tp_per_gpu", "query_heads",     # H / t = K: "every KV head" too
                                               lambda q: None if q["num_heads"] // q["tp"] <= _heads_per_gpu(q) else
                                               2 * q["layers"] * (q["num_heads"] // q["tp"]) * q["head_dim"]
                                               * q["dtype_bytes"]),
    "floor instead of ceiling (Ex 9)": ("plan_step", "floor_nodes",
                                        lambda q: q["users"] // (q["pool_bytes_per_gpu"] // (
                                            2 * q["layers"] * _heads_per_gpu(q) * q["head_dim"] * q["dtype_bytes"]
                                            * q["seq_len"]))),
}
LEARNERS = [ADA, ALAN, "grace", *(f"learner-{k}" for k in range(40))]
#: a slip that may be named second: where H / t = K, splitting the query heads gives exactly the number of all
#: the KV heads on one GPU, so the feedback names both (kvcoach.drills._SEPARATE's twins)
LEADS = {"query_heads": {"query_heads", "total_not_per_gpu"}}


@pytest.mark.parametrize("slip", SLIPPED)
def test_the_slip_learners_make_leads_the_feedback(slip):
    """Typed through the check for 43 learners' own questions: the feedback names the slip first (never the
    "missing layers" of L = B = 32, "fp32" for split query heads, "missing KV factor" for a floored node count)."""
    topic, key, slipped = SLIPPED[slip]
    made = 0
    for student in LEARNERS:
        claim_student(student)
        q = student_problem(student, topic).public().params
        value = slipped(q)
        if value is None or value == hand_answer(topic, q):
            continue
        made += 1
        message = fails(DRILL_IDS[topic], value)
        named = re.findall(r"\[([a-z0-9_+@]+)\]", message)
        assert key in named and named[0] in LEADS.get(key, {key}), (student, message)
    assert made >= 20, made             # the draws let the slip be made


def test_the_draws_that_used_to_hide_a_slip_are_drawn_again():
    """A draw that led with another slip before [diagnosis]'s fix is drawn again: a step time whose cache is small
    beside the weights (Qwen2.5 7B, a batch of 16 at 1,024 tokens: a forgotten batch within 0.5% of forgotten
    layers, and named after it)."""
    from kvcoach.drills import _apart
    # Qwen2.5 7B, 28 layers, 4 KV heads of 128, bf16 weights 15.23 GB, batch 16 x 1,024 tokens, 3.35 TB/s:
    # KV 57,344 B per token x 16,384 = 939,524,096 B beside 15.23e9 B of weights; without the batch 58,720,256 B;
    # without the layers 33,554,432 B: 4.7222 ms against 4.7120 ms, 0.22% apart (inside 0.5%)
    q = dict(layers=28, kv_heads=4, head_dim=128, dtype_bytes=2, num_heads=28, hidden_size=3584,
             weight_bytes=15_230_000_000, seq_len=1024, batch_size=16, bandwidth_bytes_per_s=3.35e12)
    no_batch = (15_230_000_000 + 57_344 * 1024) / 3.35e12 * 1000
    no_layers = (15_230_000_000 + 2048 * 1024 * 16) / 3.35e12 * 1000
    assert abs(no_batch / no_layers - 1) < 0.005
    assert not _apart("step_time", "decode_step_ms", q, "ms", 0.005)
    assert _apart("step_time", "decode_step_ms", dict(q, seq_len=32768), "ms", 0.005)
    # TP: both slips named where H / t = K (Llama 3.1 8B at TP 4: 32 / 4 = 8 query heads per GPU, all 8 KV heads)
    llama = dict(layers=32, kv_heads=8, head_dim=128, dtype_bytes=2, num_heads=32, hidden_size=4096)
    assert _apart("tp_per_gpu", "kv_bytes_per_token_per_gpu", dict(llama, tp=4), "bytes")
