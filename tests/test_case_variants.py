"""Visible cases show every variant the text names, and sit on the edges the text decides.

* An answer that ignores an argument the text names fails a visible case: for every function
  exercise and each of ``dtype_bytes``, ``tp`` and ``head_dim`` it takes, the source's solution with
  that argument pinned to its usual value (2, 1, 128: what a learner who never read it would assume)
  must fail at least one visible case. (ch06 Exercise 5 once passed every case ignoring dtype_bytes.)
* ch02 Exercise 4's slip cannot be guessed from the factor alone.
* ch08 Practice A (ungraded): the window formula that treats the open upper edge as closed fails a visible case.
* Every checks module lists its exercises' edges (``EDGES``), and each listed edge names a visible case;
  an edge with ``side(case)`` also has hidden cases on each of its sides, for every seed tried.

In-process: a few seconds.
"""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest

from autograder.checks import chapter_exercises, chapter_module, judge, runner
from test_seed_sweep import GRADED, _source, answer_namespace

#: the value a learner who ignores the argument would assume
PINNED = {"dtype_bytes": 2, "tp": 1, "head_dim": 128}


def _namespace(assignment: str) -> dict:
    return answer_namespace(_source(assignment), chapter_exercises(assignment))


def _visible_fails(ex, fn) -> bool:
    cases = list(ex.cases(False, None, "ada"))
    records = runner.run_cases(ex, fn, cases, quiet=True)
    return not all(v.ok for v in judge.verdicts(ex, cases, records))


def _pinned(fn, index: int, value):
    def answer(*args):
        args = list(args)
        args[index] = copy.deepcopy(value)
        return fn(*args)
    return answer


NAMED = [(assignment, gid, name) for assignment in GRADED for gid, ex in chapter_exercises(assignment).items()
         if not ex.value for name in PINNED if name in ex.params]


@pytest.mark.parametrize("assignment, grade_id, name", NAMED, ids=[f"{g}-{n}" for _, g, n in NAMED])
def test_an_answer_ignoring_a_named_argument_fails_a_visible_case(assignment, grade_id, name):
    ex = chapter_exercises(assignment)[grade_id]
    fn = _namespace(assignment)[ex.function_name]
    assert not _visible_fails(ex, fn), "the solution itself must pass"
    assert _visible_fails(ex, _pinned(fn, ex.params.index(name), PINNED[name])), (
        f"{grade_id}: an answer that takes {name} = {PINNED[name]} whatever it is given passes every visible case")


def test_the_named_arguments_are_covered():
    # the sweep above is not empty, and covers the exercises the issue names
    ids = {(g, n) for _, g, n in NAMED}
    assert {("ch06_q5_optimisation", "dtype_bytes"), ("ch02_q4_diagnose_colleague", "tp"),
            ("ch02_q4_diagnose_colleague", "head_dim"), ("ch01_q2_kv_bytes_per_sequence", "dtype_bytes"),
            ("ch08_q3_block_range", "tp")} <= ids
    assert len(NAMED) > 40


def test_ch02_q4_slip_is_not_guessed_from_the_factor():
    ex = chapter_exercises("ch02_gqa_tp")["ch02_q4_diagnose_colleague"]

    def right_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp):
        return 2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes

    def guess(claimed, layers, num_heads, kv_heads, head_dim, dtype_bytes, tp):
        factor = claimed // right_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp)
        if factor == 2:
            return factor, "fp32_bytes"
        return factor, "total_not_per_gpu" if factor == tp else "query_heads"

    def guess_by_group(claimed, layers, num_heads, kv_heads, head_dim, dtype_bytes, tp):
        factor = claimed // right_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp)
        if factor == num_heads // kv_heads:
            return factor, "query_heads"
        return factor, "fp32_bytes" if factor == 2 else "total_not_per_gpu"

    assert _visible_fails(ex, guess) and _visible_fails(ex, guess_by_group)


def test_ch08_window_with_a_closed_upper_edge_fails_a_visible_case():
    ex = chapter_exercises("ch08_vllm_lab")["ch08_q3_block_range"]

    def floors_of_the_real_edges(available_gib, layers, kv_heads, head_dim, dtype_bytes, block_size, tp):
        per_block = 2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * block_size
        x = Fraction(available_gib)
        return (int((x - Fraction(1, 200)) * 2**30 // per_block), int((x + Fraction(1, 200)) * 2**30 // per_block))

    assert _visible_fails(ex, floors_of_the_real_edges)
    # 53.375 GiB / 2 MiB = 27,328 exactly: "53.37" allows at most 27,327, "53.38" at least 27,328
    by_label = {c["kwargs"]["available_gib"]: ex.expected_for(c) for c in ex.cases()}
    assert by_label["53.37"][1] == 27_327 and by_label["53.38"][0] == 27_328


@pytest.mark.parametrize("assignment", GRADED)
def test_every_edge_is_listed_and_visible(assignment):
    module = chapter_module(assignment)
    edges = getattr(module, "EDGES", None)
    assert isinstance(edges, dict), f"autograder/checks/{assignment[:4]}.py lists no EDGES"
    exercises = chapter_exercises(assignment)
    assert set(edges) <= set(exercises)
    for gid, listed in edges.items():
        labels = [c["label"] for c in exercises[gid].cases(False, None, "ada")]
        for edge in listed:
            assert set(edge) in ({"rule", "visible"}, {"rule", "visible", "side"}), edge
            for label in edge["visible"]:
                assert label in labels, f"{gid}: edge {edge['rule']!r} names no visible case {label!r}"


#: the seeds whose hidden cases must show each side of an edge: the default one and three others
EDGE_SEEDS = (None, 0, 1, 2026)
SIDED = [(a, gid, n) for a in GRADED for gid, listed in getattr(chapter_module(a), "EDGES", {}).items()
         for n, edge in enumerate(listed) if "side" in edge]


@pytest.mark.parametrize("assignment, grade_id, n", SIDED, ids=[f"{g}-{n}" for _, g, n in SIDED])
def test_hidden_cases_sit_on_each_side_of_the_edge(assignment, grade_id, n):
    """An edge with ``side(case)`` (which side of it a case sits on, None off it): the visible cases it names sit on
    the sides, and every seed's hidden cases show each side the visible ones show ([diagnosis §6])."""
    edge = chapter_module(assignment).EDGES[grade_id][n]
    ex = chapter_exercises(assignment)[grade_id]
    by_label = {c["label"]: c for c in ex.cases(False, None, "ada")}
    sides = {edge["side"](by_label[label]) for label in edge["visible"]}
    assert None not in sides, f"{grade_id}: a case named on {edge['rule']!r} is off the edge"
    for seed in EDGE_SEEDS:
        shown = {edge["side"](c) for c in ex.cases(True, seed, "ada")}
        assert sides <= shown, f"{grade_id}, seed {seed}: hidden cases miss {sides - shown} of {edge['rule']!r}"


def test_the_sided_edges_include_ch01_to_ch08():
    ids = {g for _, g, _ in SIDED}
    assert {"ch07_q1_kv_per_sequence_per_gpu", "ch07_q2_sequences_by_memory", "ch07_q4_sequences_by_itl",
            "ch07_q5_nodes", "ch08_q3_block_range", "ch08_q4_mismatch_cause", "ch01_q4_sequences_that_fit"} <= ids
    # [diagnosis §6] in ch02-ch06: TP below / at / past K, the whole-block and window edges, N vs N - 1, the tie
    assert {"ch02_q2_kv_bytes_per_token_per_gpu", "ch02_q3_sequences_per_gpu", "ch02_q4_diagnose_colleague",
            "ch03_q2_kv_bytes_per_token_per_gpu", "ch03_q3_name_the_slip", "ch04_q2_block_waste",
            "ch04_q3_hybrid_sequence_bytes", "ch04_q4_fp8_pool_tokens", "ch04_q5_allocator_waste",
            "ch05_q1_prefix_bytes_saved", "ch05_q2_prefill_tokens_saved", "ch05_q3_prefix_key",
            "ch05_q4_agent_prefill_tokens", "ch06_q1_crossover_context", "ch06_q5_optimisation"} <= ids


def test_the_sides_are_exact_edges_by_hand():
    """The side functions place cases by hand-computed numbers: Llama 3.1 8B at TP 2/8/16 (K = 8); gpt-oss-20b's
    128-token window at 127/128/129 tokens; 1,000 MiB of fp8 16-token blocks (65,536 B x 16 = 1 MiB each) and a
    byte either side; 2,000 = 125 x 16 tokens and a token either side."""
    from autograder.checks import ch02, ch04, ch05
    tp = {c["kwargs"]["tp"]: ch02.tp_side(c) for c in ch02.Q2_VISIBLE if c["kwargs"]["kv_heads"] == 8}
    assert tp[2] == "tp < K" and tp[8] == "tp = K" and tp[16] == "tp > K"
    window = {c["kwargs"]["seq_len"]: ch04.window_side(c) for c in ch04.Q3_VISIBLE[:5]}
    assert window == {131072: None, 100: "shorter than the window", 128: "exactly the window",
                      127: "one token short of the window", 129: "one token past the window"}
    mib = 2 ** 20
    blocks = {c["kwargs"]["available_bytes"] - 1000 * mib: ch04.block_side(c) for c in ch04.Q4_VISIBLE[-3:]}
    assert blocks == {0: "exactly whole blocks", -1: "one byte short of whole blocks", 1: "one byte over whole blocks"}
    prompts = {c["kwargs"]["prompt_tokens"]: ch05.prompt_side(c) for c in ch05.Q1_VISIBLE}
    assert prompts[2000] == "whole blocks" and prompts[2001] == "one token past a block"
    assert prompts[1999] == "one token short of a block" and prompts[10] == "under one block"
    # ch05 Exercise 4: 48 + 16 tokens a step, 16-token blocks, so every history keeps the system prompt's remainder
    agent = {c["kwargs"]["system_tokens"]: ch05.agent_side(c) for c in ch05.Q4_VISIBLE if c["kwargs"]["steps"] == 5}
    assert agent == {1024: "history in whole blocks", 1025: "history a token past a block",
                     1023: "history a token short of a block"}


def test_pinned_answers_are_a_real_mutation():
    # the pinning wrapper changes what the solution sees (it could otherwise pass vacuously)
    seen = []

    def spy(a, b):
        seen.append((a, b))
        return a + b
    assert _pinned(spy, 1, 128)(1, 2) == 129 and seen == [(1, 128)]


@pytest.mark.parametrize("topic", ["crossover", "step_time"])
def test_drill_batches_are_never_the_layer_count(topic):
    # L = B = 32 made a forgotten batch read as forgotten layers (ch09 Exercises 5 and 6)
    from kvcoach.drills import student_problem
    problems = [student_problem(f"learner-{k}", topic) for k in range(400)]
    assert all(p.inputs["batch_size"] != p.inputs["layers"] for p in problems)
    assert any(p.inputs["layers"] == 32 for p in problems)     # the case that used to collide is drawn


def _traits(case: dict) -> set:
    """The input variants of a case: its config variant and spelling, a dtype of 1 or 4, TP past the KV heads."""
    k, context = case["kwargs"], case.get("context", {})
    out = set()
    if "variant" in context:
        out.add(("variant", context["variant"].split(" (")[0]))
    if k.get("dtype_bytes") in (1, 4):
        out.add(("dtype_bytes", k["dtype_bytes"]))
    if "tp" in k and "kv_heads" in k and k["tp"] > k["kv_heads"]:
        out.add(("tp past the KV heads", True))
    if isinstance(k.get("config"), dict):
        fields = k["config"].get("text_config") or k["config"]
        out.add(("spelling", "GPT-2" if "n_layer" in fields else "Hugging Face"))
    return out


#: hidden variants with no visible twin, and why that is acceptable (none today)
VARIANT_GAPS: dict = {}

FUNCTION_EXERCISES = [(a, gid) for a in GRADED for gid, ex in chapter_exercises(a).items() if not ex.value]


@pytest.mark.parametrize("assignment, grade_id", FUNCTION_EXERCISES, ids=[g for _, g in FUNCTION_EXERCISES])
def test_every_hidden_variant_is_also_visible(assignment, grade_id):
    ex = chapter_exercises(assignment)[grade_id]
    visible = set().union(*(_traits(c) for c in ex.cases(False, None, "ada")))
    hidden = set()
    for seed in range(40):
        hidden |= set().union(set(), *(_traits(c) for c in ex.cases(True, seed, "ada")))
    assert hidden - visible <= VARIANT_GAPS.get(grade_id, set()), f"{grade_id}: hidden only: {hidden - visible}"
