"""Chapter 04's instant checks: right answers pass, each catalogued slip gets its named message.

Reference functions are written by hand here (never through kvlib); expected values come
from kvlib inside the checks. Independent figures below: [chains]'s pool example (85.02 GB
reported, u 0.92, 16.06 GB weights, 3.0 GB other, 131,072 B/token -> 451,342 tokens by hand:
floor((78,218,400,000 - 19,060,000,000) / 131,072)); its block waste (200 x 7.5 = 1,500 slots
at 16, 25,500 at 256); its sliding-window arithmetic (2,048 B per layer per token for gpt-oss);
the vLLM CPU engine's log of a Gemma 2 hybrid (tests/fixtures/vllm_cpu/gemma2_hybrid); the
allocator docstring example in kvlib/alloc_sim.py (two 10 + 6 requests, max_seq_len 20: 10
reserved + 8 internal slots; blocks of 4: 1 slot each).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvcoach.slips
import kvlib as kv
import kvlib.alloc_sim
from autograder.checks import ch04, runner
from autograder.checks import exercise as find_exercise
from chapter_checks import passes_visible_and_hidden

REPO = Path(__file__).resolve().parents[1]
SEEDS = (0, 1, 7, 2026)


# --- reference solutions, by hand ---------------------------------------------
def pool_tokens(label_bytes, reported_bytes, utilization, weight_bytes, other_bytes, bytes_per_token):
    return int((reported_bytes * utilization - weight_bytes - other_bytes) // bytes_per_token)


def expected_block_waste(num_seqs, block_size):
    return num_seqs * (block_size - 1) / 2


def hybrid_kv_bytes_per_sequence(config, seq_len, dtype_bytes=2):
    per = 2 * config["num_key_value_heads"] * config["head_dim"] * dtype_bytes
    return sum(per * (min(seq_len, config["sliding_window"]) if k == "sliding_attention" else seq_len)
               for k in config["layer_types"])


def fp8_pool_tokens(available_bytes, layers, kv_heads, head_dim, block_size):
    return available_bytes // (block_size * 2 * layers * kv_heads * head_dim) * block_size


def allocator_waste(requests, policy, block_size, max_seq_len):
    total = 0
    for prompt, output in requests:
        held = prompt + 1
        size = {"max_reservation": max_seq_len, "oracle": prompt + output}.get(policy, -(-held // block_size) * block_size)
        total += size - held
    return total


REFERENCE = {
    "ch04_q1_pool_tokens": pool_tokens,
    "ch04_q2_block_waste": expected_block_waste,
    "ch04_q3_hybrid_sequence_bytes": hybrid_kv_bytes_per_sequence,
    "ch04_q4_fp8_pool_tokens": fp8_pool_tokens,
    "ch04_q5_allocator_waste": allocator_waste,
}


def run(grade_id, fn, hidden=False, seed=None):
    runner.check(find_exercise(grade_id), fn, hidden=hidden, seed=seed)


def fails(grade_id, fn, hidden=False, seed=None) -> str:
    with pytest.raises(AssertionError) as info:
        run(grade_id, fn, hidden=hidden, seed=seed)
    return str(info.value)


# --- the exercises, their cases ----------------------------------------------------
def test_grade_ids_and_points_in_the_source():
    nb = json.loads((REPO / "course/source/ch04_pool_paging/ch04_pool_paging.ipynb").read_text(encoding="utf-8"))
    points = {c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"].get("points")
              for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")}
    assert list(points) == list(ch04.EXERCISES)
    assert points == {"ch04_q1_pool_tokens": 2, "ch04_q2_block_waste": 1, "ch04_q3_hybrid_sequence_bytes": 2,
                      "ch04_q4_fp8_pool_tokens": 1, "ch04_q5_allocator_waste": 3}


@pytest.mark.parametrize("grade_id", list(REFERENCE))
def test_reference_passes_visible_and_hidden(grade_id, capsys):
    passes_visible_and_hidden(grade_id, REFERENCE[grade_id], SEEDS, capsys)


def test_cases_are_json():
    for ex in ch04.EXERCISES.values():
        for hidden in (False, True):
            json.dumps(ex.cases(hidden))


def test_hidden_cases_are_seeded():
    for ex in ch04.EXERCISES.values():
        assert ex.cases(True, 5) == ex.cases(True, 5)
        assert ex.cases(True, 5) != ex.cases(True, 6)


def test_seed_000_pool_to_the_token():
    # [chains]: 85.02 GB reported, 0.92, 16.06 GB weights, 3.0 GB other; 451,342 by hand (kvlib footnote:
    # the seed prints 451,355 after rounding the budget to 78.22 GB).
    assert pool_tokens(80 * 10**9, 85_020_000_000, 0.92, 16_060_000_000, 3_000_000_000, 131_072) == 451_342
    assert kv.kv_pool_tokens(85.02e9, 0.92, 16.06e9, 3.0e9, 131_072) == 451_342


def test_visible_figures_against_hand_arithmetic():
    q2 = {tuple(c["kwargs"].values()): ch04.EXERCISES["ch04_q2_block_waste"].expected_for(c)
          for c in ch04.Q2_VISIBLE}
    assert q2[(200, 16)] == 1500.0 and q2[(200, 256)] == 25500.0 and q2[(1, 16)] == 7.5   # [chains]
    gpt_oss = ch04.EXERCISES["ch04_q3_hybrid_sequence_bytes"].expected_for(ch04.Q3_VISIBLE[0])
    assert gpt_oss == 2048 * (12 * 131_072 + 12 * 128)          # 12 full + 12 window-128 layers, 2,048 B each
    q5 = [ch04.EXERCISES["ch04_q5_allocator_waste"].expected_for(c) for c in ch04.Q5_VISIBLE[:2]]
    assert q5 == [18, 2]                                         # kvlib/alloc_sim.py's docstring example
    assert ch04.EXERCISES["ch04_q5_allocator_waste"].expected_for(ch04.Q5_VISIBLE[3]) == 0 + 15 + 0 + 7


def test_simulator_and_hand_allocator_agree_on_hidden_lists():
    ex = ch04.EXERCISES["ch04_q5_allocator_waste"]
    for seed in SEEDS:
        for case in ex.cases(True, seed):
            assert ex.expected_for(case) == allocator_waste(**case["kwargs"])
            assert ex.expected_for(case) == kv.alloc_sim.allocator_waste(**case["kwargs"])


def test_the_cpu_engine_run_matches_its_fixture():
    run = kv.vllm.read_cpu_engine_run("gemma2_hybrid", "kv1g_len6000")
    fixture = json.loads((REPO / "tests/fixtures/vllm_cpu/gemma2_hybrid/kv1g_len6000.json").read_text())
    assert run.record == fixture and run.record["engine_reported"]["kv_cache_size_tokens"] == 299_707
    assert (REPO / "tests/fixtures/vllm_cpu/gemma2_hybrid/kv1g_len6000.log").read_text() == run.log
    # the tiny Gemma 2: 3 full + 4 window-256 layers, 2 KV heads of 64, bf16: 512 B per layer per token
    assert hybrid_kv_bytes_per_sequence(run.config, 6000) == 512 * (3 * 6000 + 4 * 256)


# --- slips: each catalogued one named -------------------------------------------------
def _pool_label(label_bytes, reported_bytes, u, w, o, bpt):
    return pool_tokens(0, label_bytes, u, w, o, bpt)


def _pool_gb(label_bytes, reported_bytes, u, w, o, bpt):
    return pool_tokens(0, reported_bytes / 2**30 * 10**9, u, w, o, bpt)


SLIP_CASES = [
    ("ch04_q1_pool_tokens", _pool_label, "label_memory", "instead of what CUDA reports"),
    ("ch04_q1_pool_tokens", _pool_gb, "gb_for_gib", "mixed GB"),
    ("ch04_q1_pool_tokens", lambda lb, m, u, w, o, bpt: pool_tokens(0, m, 1, w, o, bpt), "ignored_utilization",
     "utilization"),
    ("ch04_q1_pool_tokens", lambda lb, m, u, w, o, bpt: pool_tokens(0, m, u, w, 0, bpt), "ignored_other_bytes",
     "other allocations"),
    ("ch04_q2_block_waste", lambda n, bs: n * bs / 2, "block_size_not_minus_one", "(bs - 1) / 2"),
    ("ch04_q2_block_waste", lambda n, bs: float(n * (bs - 1)), "worst_case_waste", "worst case"),
    ("ch04_q2_block_waste", lambda n, bs: (bs - 1) / 2, "one_sequence_waste", "one sequence"),
    ("ch04_q3_hybrid_sequence_bytes",
     lambda c, t, b=2: 2 * c["num_key_value_heads"] * c["head_dim"] * b * t * len(c["layer_types"]),
     "windowed_as_full", "counted them at the full context"),
    ("ch04_q3_hybrid_sequence_bytes",
     lambda c, t, b=2: 2 * c["num_key_value_heads"] * c["head_dim"] * b * t * c["layer_types"].count("full_attention"),
     "sliding_layers_dropped", "left out"),
    ("ch04_q3_hybrid_sequence_bytes",
     lambda c, t, b=2: hybrid_kv_bytes_per_sequence(c, t, b) // 2, "missing_kv_factor", "factor 2"),
    ("ch04_q4_fp8_pool_tokens",
     lambda a, L, K, D, bs: a // (bs * 2 * L * K * D * 2) * bs, "wrong_16bit_vs_fp8", "fp8 is 1 byte"),
    ("ch04_q4_fp8_pool_tokens", lambda a, L, K, D, bs: a // (2 * L * K * D), "tokens_not_blocks", "whole blocks"),
    ("ch04_q4_fp8_pool_tokens", lambda a, L, K, D, bs: a // (bs * 2 * L * K * D), "answer_in_blocks",
     "number of blocks"),
    ("ch04_q5_allocator_waste",
     lambda r, p, bs, m: sum(p0 + 1 for p0, _ in r), "tokens_not_waste", "slots holding tokens"),
    ("ch04_q5_allocator_waste",
     lambda r, p, bs, m: allocator_waste([[p0 - 1, o] for p0, o in r], p, bs, m), "prompt_without_first_token",
     "prompt + 1"),
]


@pytest.mark.parametrize("grade_id,fn,key,phrase", SLIP_CASES, ids=[c[2] for c in SLIP_CASES])
def test_visible_slip_is_named(grade_id, fn, key, phrase):
    message = fails(grade_id, fn)
    assert phrase in message, message


def test_paged_whole_last_block_is_named():
    def whole(requests, policy, block_size, max_seq_len):
        if policy != "paged":
            return allocator_waste(requests, policy, block_size, max_seq_len)
        return sum(block_size - (p + 1) % block_size for p, _ in requests)
    assert "multiple of the block size" in fails("ch04_q5_allocator_waste", whole)


def test_reservation_ignored_is_named():
    def no_reservation(requests, policy, block_size, max_seq_len):
        if policy == "paged":
            return allocator_waste(requests, policy, block_size, max_seq_len)
        size = lambda p, o: max_seq_len if policy == "max_reservation" else p + o  # noqa: E731
        return sum(size(p, o) - (p + o) for p, o in requests)
    assert "yet to generate" in fails("ch04_q5_allocator_waste", no_reservation)


@pytest.mark.parametrize("grade_id,fn,key,phrase", SLIP_CASES[:8], ids=[c[2] for c in SLIP_CASES[:8]])
def test_hidden_slip_in_general_words_reveals_no_inputs(grade_id, fn, key, phrase):
    message = fails(grade_id, fn, hidden=True, seed=3)
    assert kvcoach.slips.general(key) in message, message
    for case in find_exercise(grade_id).cases(True, 3):
        for value in case["kwargs"].values():
            if isinstance(value, int) and value > 1000:
                assert f"{value:,}" not in message and str(value) not in message


def test_wrong_type_is_rejected():
    assert "float" in fails("ch04_q2_block_waste", lambda n, bs: n * (bs - 1) // 2)
    message = fails("ch04_q1_pool_tokens", lambda *a: float(pool_tokens(*a)))
    assert "int" in message


def test_calling_kvlib_trips():
    def cheat(requests, policy, block_size, max_seq_len):
        r = kv.alloc_sim.simulate(kv.alloc_sim.trace_workload(requests, max_seq_len), policy=policy,
                                  capacity_tokens=10**7, block_size=block_size)
        return r.reservation_slot_steps + r.internal_slot_steps
    assert "must not call" in fails("ch04_q5_allocator_waste", cheat)


# --- slips through the shared mechanism ([diagnosis]) ------------------------------------------------
def test_no_offered_slip_contradicts_a_case():
    """Every catalogued slip, made by a learner: each alternative offered fits every visible case."""
    from chapter_checks import offered_slips_contradicting_a_case
    assert offered_slips_contradicting_a_case(ch04.EXERCISES, hidden_seed=20261130) == []


def test_generic_slips_are_named():
    """Off by one, s/ms, per GPU/node, the next unit, KB/GB/TB mix-ups: named in every numeric exercise."""
    from chapter_checks import generic_slips_unnamed
    assert generic_slips_unnamed(ch04.EXERCISES) == []


# --- topic slips ([diagnosis §3]) ------------------------------------------------------------------------
def test_window_not_capped_on_short_sequences_is_named():
    # sliding layers held at the whole window even when the sequence is shorter than it
    def whole_window(config, seq_len, dtype_bytes=2):
        per = 2 * config["num_key_value_heads"] * config["head_dim"] * dtype_bytes
        return sum(per * (config["sliding_window"] if k == "sliding_attention" else seq_len)
                   for k in config["layer_types"])
    message = fails("ch04_q3_hybrid_sequence_bytes", whole_window)
    assert "min(seq_len, window)" in message, message


def test_paged_floor_is_named():
    # floor(held / block_size) blocks: a negative waste, clamped or not, is named as the floor for the ceiling
    def paged_floor(requests, policy, block_size, max_seq_len):
        if policy != "paged":
            return allocator_waste(requests, policy, block_size, max_seq_len)
        return sum((p + 1) // block_size * block_size - (p + 1) for p, _ in requests)
    message = fails("ch04_q5_allocator_waste", paged_floor)
    assert "ceil(held / block_size)" in message, message


def test_oracle_extra_slot_is_named():
    def extra_slot(requests, policy, block_size, max_seq_len):
        if policy != "oracle":
            return allocator_waste(requests, policy, block_size, max_seq_len)
        return sum(p + o + 1 - (p + 1) for p, o in requests)
    message = fails("ch04_q5_allocator_waste", extra_slot)
    assert "no extra slot" in message, message


# --- the slips the chapter's text warns about are the slips named ([learner screen §2]) ---------------------------
def q1_rounded(label_bytes, reported_bytes, utilization, weight_bytes, other_bytes, bytes_per_token):
    return round((reported_bytes * utilization - weight_bytes - other_bytes) / bytes_per_token)


def q4_two_bytes(available_bytes, layers, kv_heads, head_dim, block_size):
    return available_bytes // (block_size * 2 * layers * kv_heads * head_dim * 2) * block_size


def test_round_for_floor_is_named():
    # Llama 3.1 8B on an H100: (85,018,877,624 x 0.92 - 16,060,522,496 - 3e9) / 131,072 = 451,330.6: floor 451,330,
    # round() 451,331
    message = fails("ch04_q1_pool_tokens", q1_rounded)
    assert "returned 451,331; expected 451,330" in message, message
    assert "not to the nearest whole number" in message and "recheck each factor" not in message


def test_two_byte_elements_are_told_as_two():
    # 59,156,844,918 B // (16 x 2 x 32 x 8 x 128 x 2 = 2,097,152 B a block) = 28,208 blocks: 451,328 tokens
    message = fails("ch04_q4_fp8_pool_tokens", q4_two_bytes)
    assert "returned 451,328; expected 902,656" in message and "(you used 2)" in message, message
