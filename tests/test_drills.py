"""kvcoach.drills: answers recomputed here, named slips, determinism, and ``kvlib drill``."""

import hashlib
import io
import math
import os
import random
import subprocess
import sys
from types import MappingProxyType

import pytest

from kvcoach.drills import (
    TOPICS,
    DrillError,
    Problem,
    Question,
    generate,
    problem_set,
    run_drill,
    seed_for_student,
    student_problem,
)
from kvcoach.slips import diagnose

SEEDS = range(25)


def _bpt(p, kv_heads=None):
    """2 L K D b from what the question states."""
    k = p["kv_heads"] if kv_heads is None else kv_heads
    return 2 * p["layers"] * k * p["head_dim"] * p["dtype_bytes"]


# Each answer recomputed from the question's parameters with the formula written out.
INDEPENDENT = {
    "kv_per_token": lambda p: _bpt(p),
    "per_sequence": lambda p: _bpt(p) * p["seq_len"],
    "concurrency": lambda p: math.floor(p["budget_bytes"] / (_bpt(p) * p["seq_len"])),
    "pool": lambda p: math.floor((p["gpu_bytes"] * p["utilization"] - p["weight_bytes"] - p["other_bytes"])
                                 / p["bytes_per_token"]),
    "block_waste": lambda p: p["num_seqs"] * (p["block_size"] - 1) / 2,
    "mla_vs_gqa": lambda p: p["layers"] * (p["latent_dim"] + p["rope_dim"]) * p["dtype_bytes"],
    "tp_per_gpu": lambda p: _bpt(p, kv_heads=max(1, p["kv_heads"] // p["tp"])),
    "crossover": lambda p: p["weight_bytes"] / (_bpt(p) * p["batch_size"]),
    "step_time": lambda p: (p["weight_bytes"] + _bpt(p) * p["seq_len"] * p["batch_size"])
                           / p["bandwidth_bytes_per_s"] * 1e3,
    "fp8": lambda p: math.floor(p["budget_bytes"] / _bpt(p)),
    "plan_step": lambda p: math.ceil(p["users"] / math.floor(
        p["pool_bytes_per_gpu"] / (_bpt(p, kv_heads=max(1, p["kv_heads"] // p["tp"])) * p["seq_len"]))),
}


#: The cache-size topics this file checks (the serving families of [drills]: tests/test_drills_serving.py).
CACHE_TOPICS = ("kv_per_token", "per_sequence", "concurrency", "pool", "block_waste", "mla_vs_gqa", "tp_per_gpu",
                "crossover", "step_time", "fp8", "plan_step")
KNOWN = ", ".join(TOPICS)


def test_every_topic_has_an_independent_check():
    assert set(INDEPENDENT) == set(CACHE_TOPICS) and list(TOPICS)[:len(CACHE_TOPICS)] == list(CACHE_TOPICS)


@pytest.mark.parametrize("topic", CACHE_TOPICS)
def test_answers_match_the_formula_and_check_accepts_them(topic):
    for seed in SEEDS:
        p = generate(topic, seed)
        assert isinstance(p, Problem) and p.topic == topic and p.seed == seed
        expected = INDEPENDENT[topic](p.params)
        assert p.answer == pytest.approx(expected, rel=1e-12), (seed, p.question)
        ok, feedback = p.check(p.answer)
        assert ok and feedback.startswith("correct"), feedback
        assert p.check(f"{p.answer:,}")[0]                       # '131,072' is accepted
        if p.tolerance:
            assert p.check(p.answer * (1 + p.tolerance / 2))[0]
            assert not p.check(p.answer * (1 + 3 * p.tolerance))[0]
        else:
            assert not p.check(p.answer + 1)[0]


def test_the_question_states_every_number_it_needs():
    p = generate("kv_per_token", 0)
    for key in ("layers", "kv_heads", "head_dim", "num_heads"):
        assert f"{p.params[key]}" in p.question
    p = generate("pool", 0)
    assert f"{p.params['bytes_per_token']:,}" in p.question and f"{p.params['utilization']:.2f}" in p.question


# One characteristic wrong answer per topic, computed here, and the slip it must be named as.
SLIPPED = {
    "kv_per_token": (lambda p: _bpt(p) // 2, "missing_kv_factor"),
    "per_sequence": (lambda p: _bpt(p), "missing_seq_len"),
    "concurrency": (lambda p: math.ceil(p["budget_bytes"] / (_bpt(p) * p["seq_len"])), "ceil_not_floor"),
    "pool": (lambda p: math.floor((p["label_bytes"] * p["utilization"] - p["weight_bytes"] - p["other_bytes"])
                                  / p["bytes_per_token"]), "label_memory"),
    "block_waste": (lambda p: p["num_seqs"] * p["block_size"] / 2, "block_size_not_minus_one"),
    "mla_vs_gqa": (lambda p: 2 * p["layers"] * (p["latent_dim"] + p["rope_dim"]) * p["dtype_bytes"],
                   "extra_factor_2"),
    "tp_per_gpu": (lambda p: _bpt(p), "total_not_per_gpu"),
    "crossover": (lambda p: p["weight_bytes"] / _bpt(p), "crossover_not_divided"),
    "step_time": (lambda p: (p["weight_bytes"] + _bpt(p) * p["seq_len"] * p["batch_size"])
                  / p["bandwidth_bytes_per_s"], "seconds_for_ms"),
    "fp8": (lambda p: math.floor(p["budget_bytes"] / (2 * _bpt(p))), "wrong_16bit_vs_fp8"),
    "plan_step": (lambda p: math.floor(p["users"] / math.floor(
        p["pool_bytes_per_gpu"] / (_bpt(p, kv_heads=max(1, p["kv_heads"] // p["tp"])) * p["seq_len"]))),
        "floor_nodes"),
}


@pytest.mark.parametrize("topic", CACHE_TOPICS)
def test_a_known_mistake_is_named(topic):
    wrong_of, key = SLIPPED[topic]
    named = 0
    for seed in SEEDS:
        p = generate(topic, seed)
        wrong = wrong_of(p.params)
        if wrong == pytest.approx(p.answer, rel=max(p.tolerance, 1e-9)):
            continue  # the slip gives the right number for this problem (e.g. tp = 1, exact division)
        ok, feedback = p.check(wrong)
        assert not ok
        if p.slip_key(wrong) == key or f"[{key}]" in feedback:
            named += 1
        assert "The answer is" in feedback
        # the feedback carries the catalogue's message for the slip it names
        d = diagnose(p.quantity, wrong, rel_tol=p.tolerance or 1e-9, **p.inputs)
        assert d.slip is not None and d.slip.message in feedback
    assert named >= 10, f"{key} named in only {named} of {len(SEEDS)} problems"


def test_query_heads_slip_named_on_a_gqa_model():
    p = next(q for q in (generate("kv_per_token", s) for s in SEEDS) if q.params["num_heads"] != q.params["kv_heads"])
    wrong = 2 * p.params["layers"] * p.params["num_heads"] * p.params["head_dim"] * 2
    ok, feedback = p.check(wrong)
    assert not ok and "[query_heads]" in feedback


def test_answers_in_byte_units_are_read_as_bytes():
    p = generate("per_sequence", 2)
    assert p.answer == 2**28  # Qwen3-0.6B: 2 x 28 x 8 x 128 x 2 B x 2,048 tokens = 256 MiB
    assert p.check("0.25 GiB")[0] and p.check("256 MiB")[0] and p.check("268,435,456 B")[0]
    # typed to three figures: 0.268 GB is 0.16% off 0.268435 GB, within 0.5%
    assert p.check("0.268 GB")[0]
    assert not p.check("0.3 GB")[0]  # 11.8% off
    ok, feedback = p.check("0.25 GB")  # the GiB figure labelled GB
    assert not ok and "[gb_for_gib]" in feedback and p.slip_key("256 MB") == "gb_for_gib"


@pytest.mark.parametrize("text", ["", "abc", "12 parsecs", "True"])
def test_unreadable_answers_are_wrong_not_errors(text):
    ok, feedback = generate("kv_per_token", 1).check(text)
    assert not ok and "The answer is" in feedback


def test_seed_000_fp8_pool_figure():
    # [chains]: 59.16 GB / 65,536 B = 902,710 tokens. 59.16e9 / 65,536 = 902,709.96: a pool holds whole
    # tokens, so 902,709 (the seed rounded up). Its 59.16 GB is itself 78.2184 - 16.06 - 3.0 = 59.1584 GB
    # rounded; from that, 902,685 tokens.
    geometry = dict(layers=32, kv_heads=8, head_dim=128, dtype_bytes=1)
    assert diagnose("pool_tokens", 902_709, budget_bytes=59.16e9, **geometry).correct
    assert diagnose("pool_tokens", 902_710, budget_bytes=59.16e9, **geometry).slip.key == "ceil_not_floor"
    assert diagnose("pool_tokens", 902_685, budget_bytes=0.92 * 85.02e9 - 16.06e9 - 3.0e9, **geometry).correct


STEP = dict(weight_bytes=16.06e9, layers=32, kv_heads=8, head_dim=128, dtype_bytes=2, seq_len=4096, batch_size=32,
            bandwidth_bytes_per_s=3.35e12)
NODES = dict(users=2000, seq_len=6000, pool_bytes_per_gpu=59.35e9, layers=80, kv_heads=8, head_dim=128,
             dtype_bytes=2, num_heads=64, tp=8)


@pytest.mark.parametrize("quantity, answer, inputs, key", [
    # 200 sequences, 16-token blocks: expected 200 x 15 / 2 = 1,500
    ("block_waste_tokens", 200 * 16 / 2, dict(num_seqs=200, block_size=16), "block_size_not_minus_one"),
    ("block_waste_tokens", 200 * 15, dict(num_seqs=200, block_size=16), "worst_case_waste"),
    ("block_waste_tokens", 7.5, dict(num_seqs=200, block_size=16), "one_sequence_waste"),
    # Llama 3 8B, 16.06 GB, batch 64: 16.06e9 / 131,072 / 64 = 1,914.5; undivided 122,527.9
    ("crossover_context", 16.06e9 / 131072, dict(weight_bytes=16.06e9, layers=32, kv_heads=8, head_dim=128,
                                                 dtype_bytes=2, batch_size=64), "crossover_not_divided"),
    ("crossover_context", 16.06e9 / 524288 / 64, dict(weight_bytes=16.06e9, layers=32, kv_heads=8, head_dim=128,
                                                      dtype_bytes=2, num_heads=32, batch_size=64), "query_heads"),
    # [kv-math] example 5: 9.92 ms = (16.06e9 + 17.18e9) / 3.35e12
    ("decode_step_ms", 131072 * 4096 * 32 / 3.35e12 * 1e3, dict(STEP), "kv_only_step"),
    ("decode_step_ms", 16.06e9 / 3.35e12 * 1e3, dict(STEP), "weights_only_step"),
    ("decode_step_ms", (16.06e9 + 131072 * 4096) / 3.35e12 * 1e3, dict(STEP, batch_size=16), "missing_batch"),
    # 70B, TP 8, 59.35 GB per GPU, 6,000 tokens: floor(59.35e9 / (40,960 x 6,000)) = 241 per node;
    # 2,000 users: ceil(8.30) = 9 nodes
    ("nodes_for_memory", 8, dict(NODES), "floor_nodes"),
    ("nodes_for_memory", math.ceil(2000 / math.floor(59.35e9 / (327680 * 6000))), dict(NODES), "total_not_per_gpu"),
])
def test_new_catalogue_entries_name_their_slips(quantity, answer, inputs, key):
    d = diagnose(quantity, answer, rel_tol=1e-6, **inputs)
    assert not d.correct and d.slip is not None and d.slip.key == key, d.message


def test_new_catalogue_entries_accept_the_seed_values():
    assert round(diagnose("decode_step_ms", 0, **STEP).expected, 2) == 9.92          # [kv-math] example 5
    assert diagnose("nodes_for_memory", 9, **NODES).correct                            # [kv-math] section 8
    assert diagnose("crossover_context", 3829, rel_tol=0.001, weight_bytes=16.06e9, layers=32, kv_heads=8,
                    head_dim=128, dtype_bytes=2, batch_size=32).correct                  # [kv-math] example 4


def test_seed_000_block_waste_through_the_catalogue():
    # [chains]: 200 x 7.5 = 1,500 tokens in 16-token blocks
    assert diagnose("block_waste_tokens", 1500, num_seqs=200, block_size=16).correct


# --- determinism -------------------------------------------------------------------------
def test_same_seed_same_problem():
    for topic in TOPICS:
        assert generate(topic, 42) == generate(topic, 42)
    assert problem_set(7, 10) == problem_set(7, 10)
    assert [p.question for p in problem_set(7, 10)] != [p.question for p in problem_set(8, 10)]


def test_same_seed_same_problem_in_another_process():
    # no hash(): a different PYTHONHASHSEED must not change the questions
    code = "from kvcoach.drills import problem_set; print([p.question for p in problem_set(11, 11)])"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env=dict(os.environ, PYTHONHASHSEED=h)).stdout for h in ("0", "1", "12345")}
    assert len(outs) == 1


def test_seed_for_student():
    expected = int.from_bytes(hashlib.sha256(b"student-001").digest()[:8], "big")
    assert seed_for_student("student-001") == expected
    assert seed_for_student("student-002") != expected
    with pytest.raises(DrillError, match="student_id"):
        seed_for_student("")


@pytest.mark.parametrize("call, message", [
    (lambda: student_problem("ada", "nope"), f"unknown topic 'nope' (known: {KNOWN})"),
    (lambda: student_problem(" ", "pool"), "student_id must be a non-empty string, got ' '"),
    (lambda: student_problem(7, "pool"), "student_id must be a non-empty string, got 7"),
    (lambda: seed_for_student(7), "student_id must be a non-empty string, got 7"),
])
def test_student_input_messages_in_full(call, message):
    with pytest.raises(DrillError) as info:
        call()
    assert str(info.value) == message


@pytest.mark.parametrize("call, name", [
    (lambda: generate("nope", 1), "topic"),
    (lambda: generate("fp8", "x"), "seed"),
    (lambda: problem_set(1, 0), "count"),
    (lambda: problem_set(1, 3, topic="nope"), "topic"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(DrillError, match=name):
        call()


# --- kvlib drill ----------------------------------------------------------------------------
def drill(*args, stdin="", hashseed="0"):
    proc = subprocess.run([sys.executable, "-m", "kvlib", "drill", *args], input=stdin, capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONHASHSEED=hashseed))
    return proc.returncode, proc.stdout, proc.stderr


def test_cli_drill_piped_answers_are_checked_with_named_slips():
    problems = problem_set(3, 3, topic="kv_per_token")
    half = problems[1].answer // 2
    answers = f"{problems[0].answer}\n{half}\nnonsense\n"
    code, out, err = drill("--topic", "kv_per_token", "--count", "3", "--seed", "3", stdin=answers)
    assert code == 0 and err == ""
    assert out.count("Question ") == 3
    assert "correct:" in out and "[missing_kv_factor]" in out and "expected a number" in out
    assert f"answer (bytes)> {half}\n" in out  # piped answers are echoed after the prompt
    assert "score 1/3" in out and "slips: missing_kv_factor x1" in out
    assert "answered in" not in out and "time " not in out


def test_cli_drill_same_seed_and_answers_same_output():
    answers = "1\n131072\n2.5\n\n7\n"
    first = drill("--seed", "9", "--count", "5", stdin=answers, hashseed="1")
    second = drill("--seed", "9", "--count", "5", stdin=answers, hashseed="2")
    assert first == second and first[0] == 0


def test_cli_drill_end_of_input_exits_0():
    code, out, _ = drill("--count", "4", stdin="1\n")
    assert code == 0
    assert "score 0/1 (3 not answered)" in out


def test_cli_drill_timings_only_when_asked():
    code, out, _ = drill("--count", "2", "--timings", stdin="1\n2\n")
    assert code == 0 and out.count("answered in") == 2 and "\ntime " in out


@pytest.mark.parametrize("args", [["--topic", "nope"], ["--count", "0"], ["--seed", "abc"], ["--count", "x"]])
def test_cli_drill_bad_input_exits_2_with_one_line(args):
    code, out, err = drill(*args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_one_tolerance_whatever_the_notation():
    # Qwen3-0.6B per sequence at 2,048 tokens: 2^28 = 268,435,456 B = 268.435 MB; the tolerance is 0.5% however the
    # number is typed ([interview 2026 §1]: the digits typed no longer set it)
    p = generate("per_sequence", 2)
    assert p.answer == 2**28
    # 268.3 MB is 0.050% off, 267 MB 0.53% off (268,435,456 x 0.995 = 267,093,279 is the edge)
    for right in ("268.3 MB", "268300000", "2.683e8", "268,300,000", "0.2683 GB", "267.1e6"):
        assert p.check(right)[0], right
    for wrong in ("267 MB", "267000000", "2.67e8", "267,000,000", "0.267 GB", "0.27 GB"):
        assert not p.check(wrong)[0], wrong


# --- kvlib drill --student (ch09's graded drills, answers not shown) ---------------------------------
def test_cli_drill_student_asks_their_graded_questions_without_answers():
    # ada's first graded question: Llama 2 7B in bf16, 2 x 32 layers x 32 KV heads x 128 x 2 B = 524,288 B per token
    code, out, err = drill("--student", "ada", stdin="524288\n262144\n")
    assert code == 0 and err == ""
    assert "17 question(s) of student 'ada'" in out and out.count("Question ") == 3   # the third meets end of input
    assert "Llama-2-7b-hf" in out and "correct." in out and "score 1/2 (15 not answered)" in out
    assert "The answer is" not in out and "x too" not in out
    assert drill("--student", "ada", stdin="524288\n262144\n", hashseed="7") == (code, out, err)


def test_cli_drill_student_one_topic_names_the_slip():
    code, out, _ = drill("--student", "ada", "--topic", "kv_per_token", stdin="262144\n")
    assert code == 0 and out.count("Question ") == 1
    assert "not quite [missing_kv_factor] (within 0.5%)" in out and "524,288" not in out


@pytest.mark.parametrize("args", [["--student", "ada", "--seed", "1"], ["--student", " "]])
def test_cli_drill_student_bad_input_exits_2_with_one_line(args):
    code, out, err = drill(*args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# --- problems built by hand (Llama 3.1 8B's geometry), for the checker and the drill loop -------------------------
LLAMA_8B = dict(layers=32, kv_heads=8, head_dim=128, dtype_bytes=2, num_heads=32, hidden_size=4096)


def _hand_problem(quantity, answer, units, tolerance=0.0, topic="kv_per_token", **inputs):
    return Problem(topic=topic, seed=0, question="Q?", answer=answer, units=units, tolerance=tolerance,
                   quantity=quantity, params=MappingProxyType({"model": "Llama 3.1 8B"}),
                   inputs=MappingProxyType(inputs))


# 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token
PER_TOKEN = _hand_problem("kv_bytes_per_token", 131072, "bytes", **LLAMA_8B)


def test_public_keeps_the_question_and_drops_the_answer():
    q = PER_TOKEN.public()
    assert isinstance(q, Question) and not hasattr(q, "answer")
    assert (q.topic, q.question, q.units, q.tolerance) == ("kv_per_token", "Q?", "bytes", 0.0)
    assert isinstance(q.params, MappingProxyType) and dict(q.params) == {"model": "Llama 3.1 8B"}
    # the step-time drill is asked to 0.5% (its units line says so): 0.005 x 100 = 0.5
    step = generate("step_time", 0).public()
    assert (step.topic, step.units, step.tolerance, step.tolerance_text()) == ("step_time", "ms", 0.005,
                                                                             "within 0.5%")
    assert q.tolerance_text() == "exact"
    assert Question("t", "Q?", "ms", 0.01, MappingProxyType({})).tolerance_text() == "within 1%"


def test_feedback_shows_the_answer_with_its_precision():
    # whole numbers with thousands separators; floats from 100 up to one decimal; below 100, four figures
    assert PER_TOKEN.check(131072) == (True, "correct: 131,072 bytes.")
    assert PER_TOKEN.check(131072, reveal=False) == (True, "correct.")
    # Llama 3 8B, 16.06 GB of weights, batch 64: 16.06e9 / (131,072 x 64) = 1,914.50 tokens
    cross = _hand_problem("crossover_context", 16.06e9 / (131072 * 64), "tokens", 0.005, weight_bytes=16.06e9,
                          batch_size=64, **LLAMA_8B)
    assert cross.check(1914.5) == (True, "correct: 1,914.5 tokens.")
    # 13,107,200 B of weights at batch 1: 13,107,200 / 131,072 = 100.0 exactly, shown as '100.0'
    hundred = _hand_problem("crossover_context", 100.0, "tokens", 0.005, weight_bytes=13_107_200.0, batch_size=1,
                            **LLAMA_8B)
    assert hundred.check(100)[1] == "correct: 100.0 tokens."
    # [kv-math] example 5: (16.06e9 + 131,072 x 4,096 x 32) / 3.35e12 s = 9.922 ms
    step = _hand_problem("decode_step_ms", (16.06e9 + 131072 * 4096 * 32) / 3.35e12 * 1e3, "ms", 0.005,
                         weight_bytes=16.06e9, seq_len=4096, batch_size=32, bandwidth_bytes_per_s=3.35e12, **LLAMA_8B)
    assert step.check("9.92 ms") == (True, "correct: 9.922 ms.")


def test_hidden_feedback_names_the_slip_and_the_tolerance_only():
    ok, feedback = PER_TOKEN.check("65536", reveal=False)
    assert not ok and feedback == ("not quite [missing_kv_factor] (exact): the factor 2 for K and V is missing: "
                                   "every token stores a key and a value.")
    step = generate("step_time", 0)
    ok, feedback = step.check(step.answer * 1.5, reveal=False)   # 50% off, no slip of the catalogue
    assert not ok and feedback == "not quite (within 0.5%): it matches no known slip: recheck each step."
    assert PER_TOKEN.check("", reveal=False) == (False, "no answer.")
    assert PER_TOKEN.check("", reveal=True) == (False, "no answer. The answer is 131,072 bytes.")


def test_the_gb_gib_swap_is_named_by_check_and_slip_key():
    # 131,072 B is 128 KiB exactly; '128 KB' is 128,000 B -- the KiB figure labelled KB
    ok, feedback = PER_TOKEN.check("128 KB")
    assert not ok and feedback.startswith("not quite [gb_for_gib]: ") and feedback.endswith(
        "The answer is 131,072 bytes.")
    # the size of the mix-up typed, not GB's: 1,024 / 1,000 - 1 = 2.4% for KB
    assert "you mixed KB (10^3) and KiB (2^10): a 2.4% error." in feedback and "7.4%" not in feedback
    assert PER_TOKEN.slip_key("128 KB") == "gb_for_gib"
    assert PER_TOKEN.slip_key("128 KiB") is None and PER_TOKEN.check("128 KiB")[0]   # right: no slip
    assert PER_TOKEN.slip_key("65536") == "missing_kv_factor"
    assert PER_TOKEN.slip_key("5 parsecs") is None and PER_TOKEN.slip_key("12345") is None


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_run_drill_transcript_when_piped():
    # piped input: each answer is echoed after its prompt, so the transcript reads like a session
    out = io.StringIO()
    result = run_drill([PER_TOKEN] * 3, stdin=io.StringIO("131072\n 65536 \nnonsense\n"), stdout=out)
    assert result == (1, 3)
    lines = out.getvalue().split("\n")
    assert lines[:5] == ["", "Question 1/3 [kv_per_token]", "Q?", "answer (bytes)> 131072",
                         "correct: 131,072 bytes."]
    assert lines[5:9] == ["", "Question 2/3 [kv_per_token]", "Q?", "answer (bytes)> 65536"]
    assert lines[9].startswith("not quite [missing_kv_factor]: 2x too small") and lines[9].endswith(
        "The answer is 131,072 bytes.")
    assert lines[10:] == ["", "Question 3/3 [kv_per_token]", "Q?", "answer (bytes)> nonsense",
                          "expected a number, got 'nonsense'. The answer is 131,072 bytes.", "", "score 1/3",
                          "slips: missing_kv_factor x1", ""]


def test_run_drill_at_a_terminal_with_timings_and_hidden_answers():
    # a terminal echoes the answer itself; times from a fake clock: started at 100.0, question 1 asked at 101.0
    # and answered at 103.5 (2.5 s), question 2 asked 104.0 answered 104.5 (0.5 s), question 3 asked 105.0
    # answered 107.0 (2.0 s), question 4 asked at 108.0 meets the end of input; the whole drill: 110 - 100 = 10.0 s
    clock = iter([100.0, 101.0, 103.5, 104.0, 104.5, 105.0, 107.0, 108.0, 110.0]).__next__
    out = io.StringIO()
    result = run_drill([PER_TOKEN] * 4, stdin=_Terminal("65536\n524288\n65536\n"), stdout=out, timings=True,
                       clock=clock, reveal=False)
    assert result == (0, 3)
    text = out.getvalue()
    missing = "not quite [missing_kv_factor] (exact): the factor 2 for K and V is missing: every token stores a key " \
              "and a value."
    assert text.split("\n")[:5] == ["", "Question 1/4 [kv_per_token]", "Q?", "answer (bytes)> " + missing,
                                    "(answered in 2.5 s)"]
    assert "(answered in 0.5 s)" in text and "(answered in 2.0 s)" in text
    assert "The answer is" not in text and "65536" not in text
    assert text.endswith("Question 4/4 [kv_per_token]\nQ?\nanswer (bytes)> \n(end of input)\n\n"
                         "score 0/3 (1 not answered)\nslips: missing_kv_factor x2, query_heads x1\ntime 10.0 s\n")


def test_run_drill_reads_and_writes_the_console_by_default(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("131072\n"))
    assert run_drill([PER_TOKEN]) == (1, 1)
    out = capsys.readouterr().out
    assert out == "\nQuestion 1/1 [kv_per_token]\nQ?\nanswer (bytes)> 131072\ncorrect: 131,072 bytes.\n\nscore 1/1\n"


# --- what each generator draws from (the choices its question may state), over 60 seeds -----------------------------
DRAW_SEEDS = range(60)
# what each question asks for, read from its wording; the units line states the tolerance (0.5%, or exact for counts)
UNITS = {"kv_per_token": "bytes", "per_sequence": "bytes", "concurrency": "sequences", "pool": "tokens",
         "block_waste": "token slots", "mla_vs_gqa": "bytes", "tp_per_gpu": "bytes", "crossover": "tokens",
         "step_time": "ms", "fp8": "tokens", "plan_step": "nodes"}
CONTEXTS = {1024, 2048, 4096, 8192, 16384, 32768}


def _drawn(topic):
    return [generate(topic, s) for s in DRAW_SEEDS]


@pytest.mark.parametrize("topic", CACHE_TOPICS)
def test_units_tolerance_and_model_of_every_question(topic):
    for p in _drawn(topic):
        assert p.units == UNITS[topic]
        # one rule ([interview 2026 §1]): 0.5% for every figure, exact for the counts whose rounding is the question
        assert p.tolerance == (0.0 if topic in ("concurrency", "block_waste", "plan_step") else 0.005)
        assert p.units_line().startswith(f"answer in {p.units}, " + ("exact" if not p.tolerance else "within 0.5%"))
        assert p.params["model"] in p.question
        if topic != "block_waste":       # its deployment is framing only: any bundled model ([drills §6])
            assert p.params["model"] in {
                "Qwen/Qwen2.5-32B", "Qwen/Qwen2.5-7B", "Qwen/Qwen3-0.6B", "meta-llama/Llama-2-70b-chat-hf",
                "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.3-70B-Instruct",
                "mistralai/Mixtral-8x7B-v0.1", "openai-community/gpt2-large", "deepseek-ai/DeepSeek-V3"}


def test_block_waste_draws():
    problems = _drawn("block_waste")
    # 50 to 500 sequences in steps of 10; block sizes the powers of two from 8 to 256
    assert all(p.params["num_seqs"] % 10 == 0 and 50 <= p.params["num_seqs"] <= 500 for p in problems)
    assert {p.params["block_size"] for p in problems} == {8, 16, 32, 64, 128, 256}
    for p in problems:
        assert (f"runs {p.params['num_seqs']} sequences (up to " in p.question
                and f"with KV blocks of {p.params['block_size']} tokens" in p.question)


def test_mla_draws():
    # DeepSeek V3's config.json: 61 layers, qk_nope_head_dim 128 + qk_rope_head_dim 64 = a q/k head dim of 192
    problems = _drawn("mla_vs_gqa")
    assert {p.params["dtype_bytes"] for p in problems} == {1, 2}
    assert {p.params["layers"] for p in problems} == {61, 27, 60}
    for p in problems:
        assert p.params["qk_head_dim"] == 192 and "a query/key head dim of 192" in p.question
        assert p.params["num_heads"] == 128 and "128 heads" in p.question
        # read as multi-head attention: 2 x L x 128 heads x 192 x b, the slip the catalogue names mla_as_mha
        assert p.slip_key(2 * p.params["layers"] * 128 * 192 * p.params["dtype_bytes"]) == "mla_as_mha"
        dtype = {2: "KV cache in bf16 (2 byte(s) per element)", 1: "KV cache in fp8 (1 byte(s) per element)"}
        assert dtype[p.params["dtype_bytes"]] in p.question
        layers = p.params["layers"]
        if layers == 61:
            assert p.question.startswith("deepseek-ai/DeepSeek-V3 uses multi-head latent attention")
        else:
            assert p.question.startswith(f"A model shaped like deepseek-ai/DeepSeek-V3 but with {layers} layers uses")


def test_tp_draws_a_degree_that_divides_or_replicates_the_kv_heads():
    problems = _drawn("tp_per_gpu")
    for p in problems:
        kv, tp = p.params["kv_heads"], p.params["tp"]
        assert kv % tp == 0 or tp % kv == 0
        assert f"served with tensor parallelism over {tp} GPUs" in p.question
    # the 8-KV-head models take every degree: 2 and 4 split the heads, 8 gives one each, 16 replicates
    assert {p.params["tp"] for p in problems if p.params["kv_heads"] == 8} == {2, 4, 8, 16}


def test_context_batch_and_user_draws():
    assert {p.params["seq_len"] for p in _drawn("per_sequence")} == CONTEXTS
    assert {p.params["seq_len"] for p in _drawn("concurrency")} == CONTEXTS
    step = _drawn("step_time")
    assert {p.params["seq_len"] for p in step} == CONTEXTS
    assert {p.params["batch_size"] for p in step} == {1, 8, 16, 32, 64}
    assert {p.params["batch_size"] for p in _drawn("crossover")} == {8, 16, 32, 64, 128}
    plan = _drawn("plan_step")
    assert {p.params["users"] for p in plan} == {200, 500, 1000, 2000, 5000}
    assert {p.params["seq_len"] for p in plan} == {2048, 4096, 6000, 8192, 16384}
    assert {p.params["tp"] for p in plan} == {8}


def test_budgets_are_stated_to_the_hundredth_of_a_gb():
    # a budget is a whole number of 0.01 GB (10^7 B), in the range its question allows, and stated in GB;
    # over 200 seeds the draws reach within 1 GB of both ends of the range
    for topic, key, low, high in [("concurrency", "budget_bytes", 10e9, 70e9), ("fp8", "budget_bytes", 10e9, 70e9),
                                  ("plan_step", "pool_bytes_per_gpu", 40e9, 70e9)]:
        budgets = []
        for p in (generate(topic, s) for s in range(200)):
            budget = p.params[key]
            assert budget % 10**7 == 0 and low <= budget <= high
            assert f"{budget / 1e9:,.2f} GB (10^9 bytes)" in p.question
            budgets.append(budget)
        assert min(budgets) < low + 1e9 and max(budgets) > high - 1e9, topic
        if topic == "plan_step":   # 200 draws over 3,000 values: the lowest is within 1% (0.4 GB) of 40 GB
            assert min(budgets) < 1.01 * low


def test_pool_draws():
    problems = _drawn("pool")
    # vLLM's default gpu_memory_utilization: 0.9 before 0.20, 0.92 from 0.20; 2 or 3 GB of other allocations
    assert {p.params["utilization"] for p in problems} == {0.9, 0.92}
    assert {p.params["other_bytes"] for p in problems} == {2 * 10**9, 3 * 10**9}
    # every bundled GPU of 40 GB or more (the 24 GB and 16 GB cards hold too few of the bundled models)
    big = {"A100-40GB", "A100-80GB", "B200", "H100-PCIe", "H100-SXM", "H200", "L40S", "MI300X"}
    assert {p.params["gpu"] for p in problems} == big
    assert {p.params["gpu"] for p in _drawn("step_time")} == big
    for p in problems:
        # the weights are stated to 0.01 GB, and the model leaves room: weights under 60% of what CUDA reports
        assert p.params["weight_bytes"] % 10**7 == 0
        assert p.params["weight_bytes"] < 0.6 * p.params["gpu_bytes"] + 10**7
        assert f"CUDA reports {p.params['gpu_bytes'] / 2**30:.2f} GiB" in p.question


class _FlushRecorder(io.StringIO):
    flushed = 0

    def flush(self):
        self.flushed = len(self.getvalue())


class _Keyboard(_Terminal):
    """A terminal whose reader checks that the prompt was flushed to the screen before it waits."""

    def __init__(self, text, screen):
        super().__init__(text)
        self.screen = screen

    def readline(self, *args):
        assert self.screen.flushed == len(self.screen.getvalue()), "the prompt is not on the screen yet"
        return super().readline(*args)


def test_run_drill_shows_the_prompt_before_waiting_for_the_answer():
    screen = _FlushRecorder()
    assert run_drill([PER_TOKEN] * 2, stdin=_Keyboard("131072\n131072\n", screen), stdout=screen) == (2, 2)


# --- reading typed answers (the parser's corners), on Qwen3-0.6B at 2,048 tokens: 2^28 = 268,435,456 B ----------
def test_typed_figures_read_within_the_one_tolerance():
    p = generate("per_sequence", 2)
    assert p.answer == 2**28
    # 268,435,456 is 0.16% above 268e6: within 0.5%, so right
    assert p.check("268 MB")[0]
    # an exponent, in either case, beside a unit
    assert p.check("2.684e2 MB")[0] and p.check("2.684E2 MB")[0]
    # digit groups: commas and underscores are dropped before reading, in byte units too
    assert p.check("268_435_456")[0] and p.check("262_144 KiB")[0]
    # 0 MB is wrong at any tolerance
    assert p.check("0 MB") == (False, "not quite: wrong sign or zero, and it matches no known slip: recheck each "
                                      "factor. The answer is 268,435,456 bytes.")


def test_a_typed_slip_is_recognised_within_the_typed_precision():
    p = generate("per_sequence", 2)
    # half the answer (the missing 2 for K and V) is 134,217,728 B; '134.2 MB' is 0.013% off it, within 0.5%
    assert p.slip_key("134.2 MB") == "missing_kv_factor"
    # '268.4 MiB' is the MB figure labelled MiB: read as MB (268.4e6) it is within 0.5% of the answer
    assert p.slip_key("268.4 MiB") == "gb_for_gib"
    assert p.check("268.4 MiB")[1].startswith("not quite [gb_for_gib]: ")
    # 2^20 / 10^6 - 1 = 4.8576%: MB against MiB, printed to one decimal
    assert "you mixed MB (10^6) and MiB (2^20): a 4.9% error." in p.check("268.4 MiB")[1]


def test_an_exact_answer_is_exact_in_every_notation():
    # Llama 3.1 8B at 32,768 tokens: 131,072 x 32,768 = 4,294,967,296 B (4 GiB), asked exactly (a hand-made problem,
    # tolerance 0). One byte more is wrong however it is typed: the notation never loosens the rule ([interview 2026 §1])
    big = _hand_problem("kv_bytes_per_sequence", 2**32, "bytes", seq_len=32768, **LLAMA_8B)
    for right in ("4294967296", "4_294_967_296", "4,294,967,296", "4294967296.0", "4.294967296e9", "4.294967296 GB"):
        assert big.check(right)[0], right
    for wrong in ("4294967297", "4_294_967_297", "4294967297.0", "4.294967297e9", "4.294967297 GB"):
        assert not big.check(wrong)[0], wrong
    # half of 131,072, typed with a decimal point: a float, compared to 1e-9, still the missing factor 2
    assert PER_TOKEN.check("65536.0")[0] is False and PER_TOKEN.slip_key("65536.0") == "missing_kv_factor"


def test_answers_in_a_unit_other_than_the_question_asks():
    assert generate("concurrency", 1).check("12 parsecs", reveal=False) == (
        False, "the answer is asked in sequences, not 'parsecs'.")
    # a hand-made problem may ask in a unit the drills do not list: the unit itself is accepted
    flops = _hand_problem("kv_bytes_per_token", 131072, "flops", **LLAMA_8B)
    assert flops.check("131072 flops") == (True, "correct: 131,072 flops.")
    assert flops.check("131072 B", reveal=False) == (False, "the answer is asked in flops, not 'B'.")


def test_stated_weights_and_bandwidth():
    # bf16 weights to 0.01 GB: Llama 3.1 8B 8,030,261,248 x 2 B = 16.06 GB; Llama 3.3 70B 70,553,706,496 x 2 B =
    # 141.11 GB (parameter counts of the model cards' safetensors)
    for topic in ("crossover", "step_time"):
        stated = {p.params["model"]: p.params["weight_bytes"] for p in _drawn(topic)}
        assert stated["meta-llama/Llama-3.1-8B"] == 16_060_000_000
        assert stated["meta-llama/Llama-3.3-70B-Instruct"] == 141_110_000_000
    # bandwidth in TB/s as the data sheets give it: H100 SXM 3.35, L40S 0.864
    for p in _drawn("step_time"):
        shown = {"H100-SXM": "(3.35 TB/s, 10^12 bytes/s)", "L40S": "(0.864 TB/s, 10^12 bytes/s)"}
        if p.params["gpu"] in shown:
            assert shown[p.params["gpu"]] in p.question


def test_plan_step_models_split_or_replicate_over_8_gpus():
    drawn = {p.params["model"]: (p.params["num_heads"], p.params["kv_heads"]) for p in _drawn("plan_step")}
    # 32 KV heads (Llama 2 7B) split over 8 GPUs; GPT-2 large's 20 heads do neither; Qwen2.5-7B's 28 query heads
    # are not divisible by 8, so vLLM refuses it at TP 8 (verify_with_parallel_config) and it is never drawn
    assert drawn["meta-llama/Llama-2-7b-hf"] == (32, 32)
    assert "openai-community/gpt2-large" not in drawn and "Qwen/Qwen2.5-7B" not in drawn
    assert all(h % 8 == 0 and (k % 8 == 0 or 8 % k == 0) for h, k in drawn.values())


def test_the_config_a_question_states():
    # Qwen3-0.6B's config.json: 28 layers, 16 query heads, 8 KV heads, head_dim 128 (not 1,024 / 16 = 64), hidden 1,024
    p = generate("kv_per_token", 1)
    assert p.params["model"] == "Qwen/Qwen3-0.6B"
    assert (p.params["layers"], p.params["num_heads"], p.params["kv_heads"], p.params["head_dim"],
            p.params["hidden_size"]) == (28, 16, 8, 128, 1024)
    assert p.question.startswith("Qwen/Qwen3-0.6B (config.json: num_hidden_layers 28, num_attention_heads 16, "
                                 "num_key_value_heads 8, head_dim 128, hidden_size 1024), KV cache in bf16 "
                                 "(2 bytes per element). ")
    for p in _drawn("fp8"):
        assert "KV cache in fp8 (1 byte per element)" in p.question and p.params["dtype_bytes"] == 1


def test_pool_questions_state_the_gpu_as_its_data_sheet_and_cuda_do():
    # H100 SXM: 80 GB on the label, 79.18 GiB = 85,018,877,624 B as CUDA reports it (torch.cuda.mem_get_info)
    h100 = [p for p in _drawn("pool") if p.params["gpu"] == "H100-SXM"]
    assert h100 and all(p.params["gpu_bytes"] == 85_018_877_624 and p.params["label_bytes"] == 80 * 10**9
                        for p in h100)
    assert "on one H100-SXM (label 80 GB; CUDA reports 79.18 GiB)" in h100[0].question
    # a model is drawn for a GPU when its bf16 weights take under 60% of what CUDA reports: Qwen2.5-32B
    # (65.53 GB) fits an H200 (0.6 x 150.11 GB = 90.07 GB), Mixtral 8x7B (93.41 GB) a B200 (0.6 x 191.56 = 114.93)
    pairs = {(p.params["gpu"], p.params["model"]) for p in (generate("pool", s) for s in range(200))}
    assert ("H200", "Qwen/Qwen2.5-32B") in pairs and ("B200", "mistralai/Mixtral-8x7B-v0.1") in pairs
    assert ("H100-SXM", "Qwen/Qwen2.5-32B") not in pairs     # 65.53 GB > 0.6 x 85.02 GB = 51.01 GB


def test_defaults_and_sub_seeds_of_a_problem_set():
    assert generate("fp8") == generate("fp8", 0)
    assert problem_set() == problem_set(0, 5) and len(problem_set()) == 5
    assert len(problem_set(3, 1)) == 1
    # each problem's seed is the next 63 random bits of random.Random(seed) (one topic: nothing else is drawn)
    rng = random.Random(7)
    assert [p.seed for p in problem_set(7, 3, topic="fp8")] == [rng.getrandbits(63) for _ in range(3)]


@pytest.mark.parametrize("call, message", [
    (lambda: generate("nope"), f"unknown topic 'nope' (known: {KNOWN})"),
    (lambda: problem_set(1, 3, topic="nope"), f"unknown topic 'nope' (known: {KNOWN})"),
    (lambda: problem_set(1, True), "count must be a positive integer, got True"),
    (lambda: problem_set(1, "3"), "count must be a positive integer, got '3'"),
    (lambda: problem_set(1, 0), "count must be a positive integer, got 0"),
    (lambda: generate("fp8", 1.0), "seed must be an integer, got 1.0"),
])
def test_drill_input_messages_in_full(call, message):
    with pytest.raises(DrillError) as info:
        call()
    assert str(info.value) == message
