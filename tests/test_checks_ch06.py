"""Chapter 06's instant checks: right answers pass, each catalogued slip gets its named message.

Reference functions are written by hand here (never through kvlib). Expected figures are
hand arithmetic on the published configs and datasheets: Llama 3.1 8B has 8,030,261,248
parameters (its config: 32 layers, 8 KV heads of 128, 131,072 B/token in bf16), so bf16
weights 16,060,522,496 B, of which an untied 128,256 x 4,096 input embedding (1,050,673,152 B):
a step of B sequences reads only B of its rows, so it reads 16,060,522,496 - (128,256 - B) x
4,096 x 2 B (the chapter's W_r); H100 SXM 3.35e12 B/s (NVIDIA datasheet). [kv-math] sections 6-7
(crossover at batch 32 "3,830", step "9.92 ms") count the whole table: with what a step reads
they are 3,579 and 9.61 ms.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from autograder.checks import ch06, check, diagnosis, judge, runner
from chapter_checks import fails, passes_visible_and_hidden, source_points

SEEDS = (0, 1, 7, 2026)
W8 = 8_030_261_248 * 2          # Llama 3.1 8B bf16 weights, by hand
C8 = 2 * 32 * 8 * 128 * 2       # its bytes per token
H100_BW = 3.35e12


def read8(batch):
    """What a decode step of ``batch`` sequences reads of the 8B's weights: all but 128,256 - B embedding rows."""
    return W8 - (128_256 - batch) * 4096 * 2


# --- reference solutions, by hand -------------------------------------------
def _per_token(layers, kv_heads, head_dim, dtype_bytes):
    return 2 * layers * kv_heads * head_dim * dtype_bytes


def crossover_context(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, batch_size):
    return -(-weight_bytes // (_per_token(layers, kv_heads, head_dim, dtype_bytes) * batch_size))


def _step_s(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size, bw):
    return (weight_bytes + _per_token(layers, kv_heads, head_dim, dtype_bytes) * seq_len * batch_size) / bw


def decode_step_ms(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size, bandwidth_bytes_per_s):
    return _step_s(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size,
                   bandwidth_bytes_per_s) * 1e3


def tokens_per_second(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size,
                      bandwidth_bytes_per_s, efficiency):
    step = _step_s(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size, bandwidth_bytes_per_s)
    return batch_size * efficiency / step


def fp8_kv_speedups(weight_bytes, layers, kv_heads, head_dim, batch_size, short_context, long_context):
    def step(b, t):
        return weight_bytes + _per_token(layers, kv_heads, head_dim, b) * t * batch_size
    return (step(2, short_context) / step(1, short_context), step(2, long_context) / step(1, long_context))


def optimisation_for(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size):
    cache = _per_token(layers, kv_heads, head_dim, dtype_bytes) * seq_len * batch_size
    return "quantise_weights" if 3 * weight_bytes >= 2 * cache else "shrink_kv_cache"   # 3/4 W >= 1/2 cache


def expert_bytes_read(num_experts, top_k, batch_size, moe_layers, expert_params, dtype_bytes):
    return moe_layers * num_experts * (1 - (1 - top_k / num_experts) ** batch_size) * expert_params * dtype_bytes


REFERENCE = {
    "ch06_q1_crossover_context": crossover_context,
    "ch06_q2_decode_step_ms": decode_step_ms,
    "ch06_q3_tokens_per_second": tokens_per_second,
    "ch06_q4_fp8_speedups": fp8_kv_speedups,
    "ch06_q5_optimisation": optimisation_for,
    "ch06_q6_expert_bytes_read": expert_bytes_read,
}


# --- the contract with the pipeline ------------------------------------------
def test_grade_ids_and_points():
    assert list(ch06.EXERCISES) == list(source_points("ch06_crossover")) == list(REFERENCE)
    assert sum(source_points("ch06_crossover").values()) == 11        # 2 + 2 + 2 + 2 + 1 + 2


def test_cases_are_json_and_hidden_cases_are_seeded():
    for ex in ch06.EXERCISES.values():
        json.dumps(ex.cases())
        json.dumps(ex.cases(hidden=True, seed=3))
        assert ex.cases(hidden=True, seed=3) == ex.cases(hidden=True, seed=3)
        assert ex.cases(hidden=True, seed=3) != ex.cases(hidden=True, seed=4)


# --- right answers pass -------------------------------------------------------
@pytest.mark.parametrize("grade_id", list(REFERENCE))
def test_reference_passes_visible_and_hidden(grade_id, capsys):
    passes_visible_and_hidden(grade_id, REFERENCE[grade_id], SEEDS, capsys)


def test_the_visible_figures_are_the_chapters():
    ex = ch06.EXERCISES["ch06_q1_crossover_context"]
    first = ex.visible_cases[0]
    assert read8(32) == 15_010_111_488 and first["kwargs"]["weight_bytes"] == read8(32)
    # [kv-math] section 6 says "batch 32 -> 3,830" with the whole table; a step of 32 reads 15,010,111,488 B:
    # 3,578 tokens' cache is 3,578 x 4,194,304 = 15,007,113,216 B, short of it; 3,579 tokens reach it
    assert 3578 * C8 * 32 < read8(32) <= 3579 * C8 * 32 and ex.expected_for(first) == 3579
    assert ex.expected_for(ex.visible_cases[1]) == math.ceil(read8(128) / (C8 * 128)) == 895
    ex = ch06.EXERCISES["ch06_q2_decode_step_ms"]
    # [kv-math] section 7's 9.92 ms reads the whole table; (15,010,111,488 + 17,179,869,184) B / 3.35e12 B/s
    assert round(ex.expected_for(ex.visible_cases[0]), 2) == 9.61
    ex = ch06.EXERCISES["ch06_q3_tokens_per_second"]
    # 8 x 32,768 (the chapter's Question 2; 32 x 32,768 needs 137 GB of cache, more than one H100's pool)
    assert abs(ex.expected_for(ex.visible_cases[1]) - 8 / ((read8(8) + C8 * 32768 * 8) / H100_BW)) < 1e-9
    assert round(ex.expected_for(ex.visible_cases[1])) == 543           # 8 / 14.74 ms
    ex = ch06.EXERCISES["ch06_q4_fp8_speedups"]
    short, long = ex.expected_for(ex.visible_cases[0])
    assert abs(short - (read8(32) + C8 * 1024 * 32) / (read8(32) + C8 // 2 * 1024 * 32)) < 1e-12
    assert abs(long - (read8(32) + C8 * 32768 * 32) / (read8(32) + C8 // 2 * 32768 * 32)) < 1e-12
    assert 1.1 < short < 1.2 and 1.8 < long < 1.9


def test_q1_rounding_edge_by_hand():
    # 3,579 tokens x 32 sequences x 131,072 B = 15,011,414,016 B: weights exactly that, one byte less, one more
    ex = ch06.EXERCISES["ch06_q1_crossover_context"]
    edges = {c["kwargs"]["weight_bytes"]: ex.expected_for(c) for c in ex.visible_cases if "geometry" in c["label"]}
    assert edges == {15_011_414_016: 3579, 15_011_414_015: 3579, 15_011_414_017: 3580}
    for seed in SEEDS:      # and hidden cases on a drawn geometry, on the edge and one byte either side
        hidden = [c for c in ex.cases(hidden=True, seed=seed) if "whole context" in c["label"]]
        assert len(hidden) == 3
        per = [_per_token(*(c["kwargs"][n] for n in ("layers", "kv_heads", "head_dim", "dtype_bytes")))
               * c["kwargs"]["batch_size"] for c in hidden]
        assert [c["kwargs"]["weight_bytes"] % p for c, p in zip(hidden, per)] == [0, per[1] - 1, 1]


def test_q1_edge_answers_on_the_wrong_side_fail_and_are_told_the_rule():
    # floor: right exactly on the edge, one token short one byte past it
    message = fails("ch06_q1_crossover_context", q1_floor)
    assert "round up (ceil)" in message

    def rounds(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, batch_size):
        return round(weight_bytes / (_per_token(layers, kv_heads, head_dim, dtype_bytes) * batch_size))
    assert "round up (ceil)" in fails("ch06_q1_crossover_context", rounds)

    def float_ceil_then_minus(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, batch_size):
        # "the cache must exceed the weights": one token too many exactly on the edge
        return weight_bytes // (_per_token(layers, kv_heads, head_dim, dtype_bytes) * batch_size) + 1
    message = fails("ch06_q1_crossover_context", float_ceil_then_minus)
    assert "weights exactly a whole context's cache read" in message and "expected 3,579 tokens" in message


def test_q5_tie_edge_by_hand():
    # 131,072 B x 12,288 tokens x 16 = 25,769,803,776 B of cache; int4 saves 3/4 W, fp8 half the cache: they tie
    # at W = 2/3 x 25,769,803,776 = 17,179,869,184 B, and one byte of weights either side
    ex = ch06.EXERCISES["ch06_q5_optimisation"]
    ties = {c["kwargs"]["weight_bytes"]: ex.expected_for(c) for c in ex.visible_cases if "1.5 x the weights" in c["label"]}
    assert ties == {17_179_869_184: "quantise_weights", 17_179_869_183: "shrink_kv_cache",
                    17_179_869_185: "quantise_weights"}
    for seed in SEEDS:
        hidden = [c for c in ex.cases(hidden=True, seed=seed) if "1.5 x the weights" in c["label"]]
        assert [ex.expected_for(c) for c in hidden] == ["quantise_weights", "shrink_kv_cache", "quantise_weights"]


def test_q5_a_strict_comparison_fails_the_tie_and_is_told_the_rule():
    def strict(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size):
        cache = _per_token(layers, kv_heads, head_dim, dtype_bytes) * seq_len * batch_size
        return "quantise_weights" if 3 * weight_bytes > 2 * cache else "shrink_kv_cache"
    message = fails("ch06_q5_optimisation", strict)
    # the tie alone fails, and the case says what it is and what the rule gives there
    assert "cache read exactly 1.5 x the weights" in message and "expected 'quantise_weights'" in message
    assert "more visible case" not in message
    fails("ch06_q5_optimisation", strict, hidden=True)      # a hidden tie fails it too


def test_q5_hidden_workloads_are_clear_of_the_tie():
    ex = ch06.EXERCISES["ch06_q5_optimisation"]
    for case in ex.cases(hidden=True, seed=11):
        if "1.5 x the weights" in case["label"]:
            continue            # the tie and one byte either side (EDGES): on the crossover on purpose
        k = case["kwargs"]
        ratio = _per_token(k["layers"], k["kv_heads"], k["head_dim"], k["dtype_bytes"]) * k["seq_len"] * \
            k["batch_size"] / k["weight_bytes"]
        assert ratio < 0.75 or ratio > 3          # a factor 2 either side of the 1.5 x tie
    assert {ex.expected_for(c) for c in ex.cases()} == set(ch06.OPTIONS)


# --- each catalogued slip is named -------------------------------------------
def q1_floor(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, batch_size):
    return weight_bytes // (_per_token(layers, kv_heads, head_dim, dtype_bytes) * batch_size)


def q1_missing_two(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, batch_size):
    return math.ceil(weight_bytes / (layers * kv_heads * head_dim * dtype_bytes * batch_size))


def q1_not_divided(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, batch_size):
    return math.ceil(weight_bytes / _per_token(layers, kv_heads, head_dim, dtype_bytes))


def q1_batch_multiplied(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, batch_size):
    return math.ceil(weight_bytes / _per_token(layers, kv_heads, head_dim, dtype_bytes) * batch_size)


def q2_kv_only(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size, bandwidth_bytes_per_s):
    return decode_step_ms(0, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size, bandwidth_bytes_per_s)


def q2_seconds(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size, bandwidth_bytes_per_s):
    return decode_step_ms(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size,
                          bandwidth_bytes_per_s) / 1e3


def q2_missing_batch(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size, bandwidth_bytes_per_s):
    return decode_step_ms(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, 1, bandwidth_bytes_per_s)


def q3_ignored_efficiency(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size,
                          bandwidth_bytes_per_s, efficiency):
    return tokens_per_second(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size,
                             bandwidth_bytes_per_s, 1.0)


def q3_efficiency_inverted(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size,
                           bandwidth_bytes_per_s, efficiency):
    step = _step_s(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size, bandwidth_bytes_per_s)
    return batch_size / (step * efficiency)


def q3_per_sequence(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size,
                    bandwidth_bytes_per_s, efficiency):
    return tokens_per_second(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size,
                             bandwidth_bytes_per_s, efficiency) / batch_size


def q3_weights_only(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size,
                    bandwidth_bytes_per_s, efficiency):
    return batch_size * efficiency / (weight_bytes / bandwidth_bytes_per_s)


SLIPS = [
    ("ch06_q1_crossover_context", q1_floor, "crossover_rounded_down", ["round up (ceil)", "expected 3,579 tokens"]),
    ("ch06_q1_crossover_context", q1_missing_two, "missing_kv_factor", ["factor 2 for K and V"]),
    ("ch06_q1_crossover_context", q1_not_divided, "crossover_not_divided", ["token-slots", "divide by the batch (32)"]),
    ("ch06_q1_crossover_context", q1_batch_multiplied, "batch_multiplied", ["multiplied by the batch (32)"]),
    ("ch06_q2_decode_step_ms", q2_kv_only, "kv_only_step", ["the weights are missing"]),
    ("ch06_q2_decode_step_ms", q2_seconds, "seconds_for_ms", ["1000x too small", "seconds"]),
    ("ch06_q2_decode_step_ms", q2_missing_batch, "missing_batch", ["the batch (32) is missing"]),
    ("ch06_q3_tokens_per_second", q3_ignored_efficiency, "ignored_efficiency", ["efficiency is not applied", "0.7"]),
    ("ch06_q3_tokens_per_second", q3_efficiency_inverted, "efficiency_inverted", ["wrong way round"]),
    ("ch06_q3_tokens_per_second", q3_per_sequence, "per_sequence_rate", ["32x too small", "one sequence's rate"]),
    ("ch06_q3_tokens_per_second", q3_weights_only, "weights_only_step", ["KV reads are missing"]),
]


@pytest.mark.parametrize("grade_id,fn,key,phrases", SLIPS, ids=[s[2] for s in SLIPS])
def test_visible_slip_is_named(grade_id, fn, key, phrases):
    message = fails(grade_id, fn)
    assert message.startswith(f"✗ {grade_id}")
    assert "on case" in message and "expected" in message
    for phrase in phrases:
        assert phrase in message, (phrase, message)


@pytest.mark.parametrize("grade_id,fn,key,phrases", SLIPS, ids=[s[2] for s in SLIPS])
def test_hidden_slip_is_named_in_general_words(grade_id, fn, key, phrases):
    message = fails(grade_id, fn, hidden=True)
    assert judge.GENERIC_SLIPS[key] in message, message


@pytest.mark.parametrize("grade_id,fn,key,phrases", SLIPS, ids=[s[2] for s in SLIPS])
def test_hidden_messages_reveal_no_inputs(grade_id, fn, key, phrases):
    message = fails(grade_id, fn, hidden=True).replace(grade_id, "")
    ex = ch06.EXERCISES[grade_id]
    for case in ex.cases(True):
        for value in case["kwargs"].values():
            if isinstance(value, int) and value >= 100:
                assert str(value) not in message and f"{value:,}" not in message, (value, message)
    assert not re.search(r"\d{3,}", message), message


def test_fp8_speedup_weights_forgotten_is_named_and_the_hint_follows_the_slip():
    # the weights forgotten, the very slip of the chapter's erratum: 2 x halved cache, so (2.0, 2.0) exactly
    def halves_the_whole_step(weight_bytes, layers, kv_heads, head_dim, batch_size, short_context, long_context):
        return (2.0, 2.0)
    message = fails("ch06_q4_fp8_speedups", halves_the_whole_step)
    # (read8(32) + 131,072 x 1,024 x 32) / (read8(32) + 65,536 x 1,024 x 32) = 19,305,078,784 / 17,157,595,136
    short = (15_010_111_488 + 4_294_967_296) / (15_010_111_488 + 2_147_483_648)
    long = (15_010_111_488 + 137_438_953_472) / (15_010_111_488 + 68_719_476_736)
    assert f"expected ({short:.6g}, {long:.6g})" == "expected (1.12516, 1.82073)"
    assert "the weights are missing" in message and "expected (1.12516, 1.82073)" in message
    assert "Hint:" not in message          # the named slip's words are the advice, not the first case's hint


def test_fp8_speedup_no_slip_gets_the_case_hint():
    message = fails("ch06_q4_fp8_speedups", lambda *args: (1.5, 1.5))
    assert "matches no known slip" in message and "the weights stay bf16" in message


def test_fp8_speedups_as_a_list_is_a_type_error():
    def as_list(*args):
        return list(fp8_kv_speedups(*args))
    assert "return a tuple (float, float)" in fails("ch06_q4_fp8_speedups", as_list)


def test_optimisation_wrong_choice_and_unknown_string():
    def always_weights(*args):
        return "quantise_weights"
    message = fails("ch06_q5_optimisation", always_weights)
    assert "busy API" in message and "expected 'shrink_kv_cache'" in message and "larger" in message
    def misspelt(*args):
        return "quantize weights"
    assert "not one of the choices" in fails("ch06_q5_optimisation", misspelt)


def test_int_required_for_the_crossover():
    def as_float(*args):
        return float(crossover_context(*args))
    message = fails("ch06_q1_crossover_context", as_float)
    assert "returned a float" in message and "The value itself is right" in message


def test_calling_kvlib_is_refused():
    import kvlib as kv

    def via_kvlib(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, batch_size):
        return math.ceil(kv.crossover_tokens(weight_bytes, kv.kv_bytes_per_token(layers, kv_heads, head_dim,
                                                                                  dtype_bytes)) / batch_size)
    assert "must not call" in fails("ch06_q1_crossover_context", via_kvlib)


# --- slips through the shared mechanism ([diagnosis]) ------------------------------------------------
def test_no_offered_slip_contradicts_a_case():
    """Every catalogued slip, made by a learner: each alternative offered fits every visible case."""
    from chapter_checks import offered_slips_contradicting_a_case
    assert offered_slips_contradicting_a_case(ch06.EXERCISES, hidden_seed=20261130) == []


def test_generic_slips_are_named():
    """Off by one, s/ms, per GPU/node, the next unit, KB/GB/TB mix-ups: named in every numeric exercise."""
    from chapter_checks import generic_slips_unnamed
    assert generic_slips_unnamed(ch06.EXERCISES) == []


def _summary(grade_id, fn, hidden=False):
    """diagnosis.summary of ``fn`` on the exercise's visible (or default hidden) cases: the slips it names."""
    ex = ch06.EXERCISES[grade_id]
    cases = ex.cases(hidden)
    records = runner.run_cases(ex, fn, cases, quiet=True)
    return diagnosis.summary(ex, cases, judge.verdicts(ex, cases, records, hidden=hidden), hidden=hidden, records=records)


def test_q5_forgotten_batch_is_named_not_the_layers():
    """[diagnosis §3]: the batch forgotten in Question 5 (cache = bpt x T, one sequence) is named. By hand: 64 x 8,192
    tokens of Llama 3.1 8B read 68.7 GB of cache against the 15.0 GB of weights a step reads, one sequence 1.07 GB;
    the long-document case (4 x 131,072) still reads 17.2 GB for one sequence, so forgotten layers (it flips there)
    are ruled out."""
    def no_batch(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size):
        return optimisation_for(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, 1)
    s = _summary("ch06_q5_optimisation", no_batch)
    assert s.slips[0] == "missing_batch" and "missing_layers" not in s.slips, s.message
    assert "wrong choice: the batch (64) is missing" in s.message and "Hint:" not in s.message
    assert "the batch size is missing" in _summary("ch06_q5_optimisation", no_batch, hidden=True).message


def test_q5_choices_made_the_other_way_are_named():
    # the smaller read chosen: every case wrong, named as such; the same choice on every case: its own words
    def inverted(*args):
        return "shrink_kv_cache" if optimisation_for(*args) == "quantise_weights" else "quantise_weights"
    assert _summary("ch06_q5_optimisation", inverted).slips[0] == "other_fix_chosen"
    s = _summary("ch06_q5_optimisation", lambda *args: "shrink_kv_cache")
    assert s.slips[:1] == ("always_shrink_kv_cache",) and "the larger saving wins" in s.message


def test_q5_the_larger_read_rule_is_named():
    """ch06 §7 against the old Exercise 5: shrinking the larger read (W >= cache) is right far from the crossover
    but wrong between 1x and 1.5x. By hand: 16 x 8,192 tokens of Llama 3.1 8B read 17,179,869,184 B of cache
    against 15,009,980,416 B of weights (1.14 x): cache-dominated, yet int4 saves 11.26 GB against fp8's 8.59 GB."""
    def larger_read(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size):
        cache = _per_token(layers, kv_heads, head_dim, dtype_bytes) * seq_len * batch_size
        return "quantise_weights" if weight_bytes >= cache else "shrink_kv_cache"
    s = _summary("ch06_q5_optimisation", larger_read)
    assert s.slips[:1] == ("larger_read_rule",), s.message
    assert "busy team" in s.message and "1.5 x the weights" in s.message
    assert _summary("ch06_q5_optimisation", larger_read, hidden=True).slips[:1] == ("larger_read_rule",)


def _q5_strict(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size):
    """'>' written for '>=': right off the tie, 'shrink_kv_cache' exactly on it."""
    cache = 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len * batch_size
    return "quantise_weights" if 3 * weight_bytes > 2 * cache else "shrink_kv_cache"


def test_q5_tie_taken_the_other_way_is_named():
    """[diagnosis §6]: '>' for '>=' fails only the tie (weights 17,179,869,184 B = 2/3 x 131,072 B x 12,288 x 16 of cache;
    one byte either side passes), and the check says the tie goes the other way, with the text's rule; never
    "always 'shrink_kv_cache'", which every case answered 'quantise_weights' rules out."""
    s = _summary("ch06_q5_optimisation", _q5_strict)
    assert s.slips == ("tie_other_way",), s.message
    assert 'cache read exactly 1.5 x the weights"' in s.message and "returned 'shrink_kv_cache'" in s.message
    assert "the tie goes the other way: at equality the text says int4 weights win when" in s.message
    assert "whatever the workload" not in s.message and "Or:" not in s.message
    hidden = _summary("ch06_q5_optimisation", _q5_strict, hidden=True)
    assert hidden.slips == ("tie_other_way",) and "the tie goes the other way" in hidden.message
    assert "whatever the workload" not in hidden.message


def test_q5_unexplained_failures_name_no_slip_and_state_the_edge():
    """No one slip explains the tie wrong AND a clear case wrong: no slip is named (not "always ..."), the failing
    cases are listed by label and the tie's rule (EDGES) is stated."""
    def strict_and_one_more(*args):
        wrong = _q5_strict(*args)
        if args[5] == 2048 and args[6] == 1:       # the workstation case (batch 1, 2,048 tokens) flipped as well
            return "shrink_kv_cache"
        return wrong
    s = _summary("ch06_q5_optimisation", strict_and_one_more)
    assert s.slips == () and "whatever the workload" not in s.message and "Or:" not in s.message, s.message
    assert "no one known slip explains every case" in s.message
    assert 'Failing cases: "Llama 3.1 8B, one user chatting' in s.message and "cache read exactly 1.5 x" in s.message
    assert "a tie (int4 saves exactly what fp8 saves: cache read = 1.5 x the weights) is 'quantise_weights'" in s.message
    hidden = _summary("ch06_q5_optimisation", strict_and_one_more, hidden=True)
    assert hidden.slips == () or hidden.slips == ("tie_other_way",), hidden.message
    assert "whatever the workload" not in hidden.message


@pytest.mark.parametrize("grade_id", ["ch06_q2_decode_step_ms", "ch06_q3_tokens_per_second"])
def test_the_stated_tolerance_is_the_edge(grade_id, capsys):
    # "within 0.1%": 0.09% off on every case passes, 0.11% off fails
    fn = REFERENCE[grade_id]
    check(grade_id, lambda *args: fn(*args) * 1.0009)
    assert capsys.readouterr().out.startswith("✓")
    fails(grade_id, lambda *args: fn(*args) * 1.0011)


def test_q6_expert_bytes_by_hand_and_its_slips():
    """L_e E (1 - (1 - k/E)^B) P_e b by hand: Mixtral (8 experts, k = 2, 32 MoE layers of 3 x 4,096 x 14,336 =
    176,160,768-parameter experts, bf16) reads 32 x 2 x 176,160,768 x 2 = 22,548,578,304 B at B = 1 and
    32 x 8 (1 - 0.75^6) x 176,160,768 x 2 at B = 6. A learner who counts one token's experts (forgetting the
    batch's coverage), every expert (total for active) or k B experts (no overlap) is named."""
    ex = ch06.EXERCISES["ch06_q6_expert_bytes_read"]
    got = {c["label"]: ex.expected_for(c) for c in ex.visible_cases}
    assert got["Mixtral-8x7B-v0.1 (E = 8, k = 2), batch 1"] == 32 * 2 * 176_160_768 * 2 == 22_548_578_304
    six = got["Mixtral 8x7B (E = 8, k = 2), a 6-token speculative verify"]
    assert abs(six - 32 * 8 * (1 - 0.75**6) * 176_160_768 * 2) < 1e-3
    per = {c["label"]: c["kwargs"]["moe_layers"] * c["kwargs"]["expert_params"] * 2 for c in ex.visible_cases}

    def by(count):
        return lambda e, k, b, layers, params, dtype: float(count(e, k, b) * layers * params * dtype)
    assert _summary("ch06_q6_expert_bytes_read", by(lambda e, k, b: k)).slips[:1] == ("active_experts_only",)
    assert _summary("ch06_q6_expert_bytes_read", by(lambda e, k, b: e)).slips[:1] == ("total_experts",)
    assert _summary("ch06_q6_expert_bytes_read", by(lambda e, k, b: min(e, k * b))).slips[:1] == \
        ("no_expert_overlap",)
    message = _summary("ch06_q6_expert_bytes_read", by(lambda e, k, b: e * (1 - k / e) ** b)).message
    assert "experts *no* token picked" in message and "the experts read are the rest" in message
    assert per and all(v > 0 for v in per.values())
    for seed in SEEDS:                 # every seed's hidden cases hold batch 1 and a covering batch
        batches = [c["kwargs"]["batch_size"] for c in ex.cases(hidden=True, seed=seed)]
        assert 1 in batches and 1024 in batches
