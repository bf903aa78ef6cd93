"""Chapter 07's instant checks: a plan's steps, right answers pass, each slip is named, steps build on q1.

Reference functions are written by hand here (never through kvlib). Hand-worked figures for
the first visible case, Exercise D (Qwen2.5-32B config: 64 layers, 8 KV heads of 128, bf16;
A100-80GB: 79.15 GiB as CUDA reports it, 2,039 GB/s; TP 8):
one sequence of 16,384 tokens per GPU = 2 x 64 x 1 x 128 x 2 x 16,384 = 536,870,912 B.
"""

from __future__ import annotations

import json
import math

import pytest

from autograder.checks import ch07, judge, runner, schema
from chapter_checks import passes_visible_and_hidden, source_points

SEEDS = (0, 1, 7, 2026)
EX = ch07.EXERCISES


# --- reference solutions, by hand -------------------------------------------
def kv_per_sequence_per_gpu(layers, kv_heads, head_dim, dtype_bytes, context, tp):
    heads = max(1, kv_heads // tp)
    return 2 * layers * heads * head_dim * dtype_bytes * context


def sequences_by_memory(gpu_memory_bytes, utilization, weight_bytes, overhead_bytes, layers, kv_heads, head_dim,
                        dtype_bytes, context, tp):
    pool = math.ceil(gpu_memory_bytes * utilization) - math.ceil(weight_bytes / tp) - overhead_bytes
    return pool // kv_per_sequence_per_gpu(layers, kv_heads, head_dim, dtype_bytes, context, tp)


def _slow(tp, tp_overhead, efficiency):
    return (1 + (tp_overhead if tp > 1 else 0)) / efficiency


def itl_ms(sequences, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, layers, kv_heads, head_dim,
           dtype_bytes, context):
    step = weight_bytes / tp + sequences * kv_per_sequence_per_gpu(layers, kv_heads, head_dim, dtype_bytes, context, tp)
    return step / bandwidth_bytes_per_s * _slow(tp, tp_overhead, efficiency) * 1000


def sequences_by_itl(itl_target_ms, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, layers,
                     kv_heads, head_dim, dtype_bytes, context):
    readable = itl_target_ms / 1000 / _slow(tp, tp_overhead, efficiency) * bandwidth_bytes_per_s
    per_seq = kv_per_sequence_per_gpu(layers, kv_heads, head_dim, dtype_bytes, context, tp)
    return max(0, math.floor((readable - math.ceil(weight_bytes / tp)) / per_seq))    # 0: nothing meets it


def nodes(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor, redundancy_nodes):
    per_node = gpus_per_node // tp * min(sequences_by_memory, sequences_by_itl)
    base = -(-users // per_node)
    return math.ceil(round(base * spike_factor, 9)) + redundancy_nodes


def ttft_ms(prompt_tokens, token_budget, decode_tokens, step_ms, queue_ms):
    return queue_ms + math.ceil(prompt_tokens / (token_budget - decode_tokens)) * step_ms


def requests_in_flight(rate_per_s, ttft_ms, output_tokens, itl_ms):
    return rate_per_s * (ttft_ms + output_tokens * itl_ms) / 1000


REFERENCE = {
    "ch07_q1_kv_per_sequence_per_gpu": kv_per_sequence_per_gpu,
    "ch07_q2_sequences_by_memory": sequences_by_memory,
    "ch07_q3_itl_ms": itl_ms,
    "ch07_q4_sequences_by_itl": sequences_by_itl,
    "ch07_q5_nodes": nodes,
    "ch07_q6_ttft_ms": ttft_ms,
    "ch07_q7_in_flight": requests_in_flight,
}


def fails(grade_id, fn, **kwargs) -> str:
    with pytest.raises(AssertionError) as info:
        runner.check(EX[grade_id], fn, **kwargs)
    return str(info.value)


def test_grade_ids_and_points():
    assert list(EX) == list(source_points("ch07_capacity_plan"))
    assert source_points("ch07_capacity_plan") == {"ch07_q1_kv_per_sequence_per_gpu": 1, "ch07_q2_sequences_by_memory": 2,
                                "ch07_q3_itl_ms": 2, "ch07_q4_sequences_by_itl": 2, "ch07_q5_nodes": 2,
                                "ch07_q6_ttft_ms": 2, "ch07_q7_in_flight": 1}


def test_exercise_d_by_hand():
    k = ch07.VISIBLE[0]["kwargs"]
    assert kv_per_sequence_per_gpu(64, 8, 128, 2, 16384, 8) == 536_870_912
    assert EX["ch07_q1_kv_per_sequence_per_gpu"].expected_for(ch07.VISIBLE[0]) == 536_870_912
    # pool: ceil(0.92 x 79.15 GiB) - ceil(W / 8) - 3 GB; 124.8 sequences of 536,870,912 B -> 124
    cuda = round(79.15 * 2**30)
    assert k["gpu_memory_bytes"] == cuda
    pool = math.ceil(cuda * 0.92) - math.ceil(k["weight_bytes"] / 8) - 3 * 10**9
    assert pool // 536_870_912 == 124 == EX["ch07_q2_sequences_by_memory"].expected_for(ch07.VISIBLE[0])
    # ITL at 124: (8.19e9 + 124 x 0.5369e9) / 2.039e12 x 1.3 / 0.7 = 68.1 ms; 80 ms allows 148; memory binds
    assert round(itl_ms(124, k["weight_bytes"], 8, 2.039e12, 0.3, 0.7, 64, 8, 128, 2, 16384), 1) == 68.1
    assert EX["ch07_q4_sequences_by_itl"].expected_for(ch07.VISIBLE[0]) == 148
    # 500 / 124 = 4.03 -> 5 nodes; ceil(5 x 1.3) + 1 = 8
    assert nodes(500, 8, 8, 124, 148, 1.3, 1) == 8 == EX["ch07_q5_nodes"].expected_for(ch07.VISIBLE[0])


def test_visible_cases_cover_each_variant():
    kinds = {(c["kwargs"]["tp"] == 1, c["kwargs"]["tp"] > c["kwargs"]["kv_heads"],
              c["kwargs"]["gpus_per_node"] // c["kwargs"]["tp"] > 1,
              c["kwargs"]["sequences_by_memory"] <= c["kwargs"]["sequences_by_itl"]) for c in ch07.VISIBLE}
    assert any(k[0] for k in kinds) and any(k[1] for k in kinds) and any(k[2] for k in kinds)
    assert any(k[3] for k in kinds) and any(not k[3] for k in kinds)     # memory binds in some, ITL in others


def test_cases_are_json_and_hidden_are_seeded():
    json.dumps(ch07.VISIBLE)
    assert ch07.hidden_plans(1) == ch07.hidden_plans(1)
    assert [c["kwargs"] for c in ch07.hidden_plans(1)] != [c["kwargs"] for c in ch07.hidden_plans(2)]


@pytest.mark.parametrize("grade_id", list(REFERENCE))
def test_reference_passes_visible_and_hidden(grade_id, capsys):
    passes_visible_and_hidden(grade_id, REFERENCE[grade_id], SEEDS, capsys)


# --- slips: one wrong function each ------------------------------------------
def q1_total(layers, kv_heads, head_dim, dtype_bytes, context, tp):
    return 2 * layers * kv_heads * head_dim * dtype_bytes * context


def q1_split_replicated(layers, kv_heads, head_dim, dtype_bytes, context, tp):
    return 2 * layers * kv_heads * head_dim * dtype_bytes * context // tp


def q1_gb(layers, kv_heads, head_dim, dtype_bytes, context, tp):
    return kv_per_sequence_per_gpu(layers, kv_heads, head_dim, dtype_bytes, context, tp) / 1e9


def q2_label(gpu_memory_bytes, utilization, weight_bytes, overhead_bytes, layers, kv_heads, head_dim, dtype_bytes,
             context, tp):
    label = 40 * 10**9 if gpu_memory_bytes < 50 * 2**30 else 80 * 10**9   # the visible GPUs' labels
    return sequences_by_memory(label, utilization, weight_bytes, overhead_bytes, layers, kv_heads, head_dim,
                               dtype_bytes, context, tp)


def q2_weights_whole(gpu_memory_bytes, utilization, weight_bytes, overhead_bytes, layers, kv_heads, head_dim,
                     dtype_bytes, context, tp):
    pool = math.ceil(gpu_memory_bytes * utilization) - weight_bytes - overhead_bytes
    return pool // kv_per_sequence_per_gpu(layers, kv_heads, head_dim, dtype_bytes, context, tp)


def q2_no_utilization(gpu_memory_bytes, utilization, weight_bytes, overhead_bytes, layers, kv_heads, head_dim,
                      dtype_bytes, context, tp):
    return sequences_by_memory(gpu_memory_bytes, 1, weight_bytes, overhead_bytes, layers, kv_heads, head_dim,
                               dtype_bytes, context, tp)


def q3_times_efficiency(sequences, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, *geometry):
    bound = itl_ms(sequences, weight_bytes, tp, bandwidth_bytes_per_s, 0, 1, *geometry)
    return bound * (1 + (tp_overhead if tp > 1 else 0)) * efficiency


def q3_seconds(sequences, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, *geometry):
    return itl_ms(sequences, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, *geometry) / 1000


def q3_weights_whole(sequences, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, *geometry):
    return itl_ms(sequences, weight_bytes * tp, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, *geometry)


def q4_no_overhead(itl_target_ms, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, *geometry):
    return sequences_by_itl(itl_target_ms, weight_bytes, tp, bandwidth_bytes_per_s, 0, efficiency, *geometry)


def q4_bound_only(itl_target_ms, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, *geometry):
    return sequences_by_itl(itl_target_ms, weight_bytes, tp, bandwidth_bytes_per_s, 0, 1, *geometry)


def q5_larger_limit(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor, redundancy_nodes):
    return nodes(users, gpus_per_node, tp, max(sequences_by_memory, sequences_by_itl), 10**9, spike_factor,
                 redundancy_nodes)


def q5_no_headroom(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor, redundancy_nodes):
    return nodes(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, 1, 0)


def q5_one_replica(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor, redundancy_nodes):
    return nodes(users, tp, tp, sequences_by_memory, sequences_by_itl, spike_factor, redundancy_nodes)


def q5_spares_scaled(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor,
                     redundancy_nodes):
    base = nodes(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, 1, 0)
    return math.ceil(round((base + redundancy_nodes) * spike_factor, 9))


def q5_gpus(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor, redundancy_nodes):
    return gpus_per_node * nodes(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor,
                                 redundancy_nodes)


SLIPS = [
    ("ch07_q1_kv_per_sequence_per_gpu", q1_total, "total_not_per_gpu", ("each GPU holds only its own KV heads",)),
    ("ch07_q1_kv_per_sequence_per_gpu", q1_split_replicated, "split_replicated", ("replicated, not split",)),
    ("ch07_q1_kv_per_sequence_per_gpu", q1_gb, "answer_in_gb", ("looks like GB",)),
    ("ch07_q2_sequences_by_memory", q2_label, "label_memory", ("memory on the label",)),
    ("ch07_q2_sequences_by_memory", q2_weights_whole, "weights_not_split", ("W / tp",)),
    ("ch07_q2_sequences_by_memory", q2_no_utilization, "no_utilization", ("utilization cap",)),
    ("ch07_q3_itl_ms", q3_times_efficiency, "efficiency_multiplied", ("divide by the efficiency",)),
    ("ch07_q3_itl_ms", q3_seconds, "seconds_for_ms", ("looks like seconds",)),
    ("ch07_q3_itl_ms", q3_weights_whole, "weights_not_split", ("W / tp per GPU",)),
    ("ch07_q4_sequences_by_itl", q4_no_overhead, "no_tp_overhead", ("all-reduce overhead",)),
    ("ch07_q4_sequences_by_itl", q4_bound_only, "bound_only", ("bandwidth bound",)),
    ("ch07_q5_nodes", q5_larger_limit, "non_binding_constraint", ("smaller of the",)),
    ("ch07_q5_nodes", q5_no_headroom, "no_headroom", ("before headroom", "headroom")),
    ("ch07_q5_nodes", q5_one_replica, "missing_replicas", ("replicas",)),
    ("ch07_q5_nodes", q5_spares_scaled, "spares_scaled", ("after scaling for the spike",)),
    ("ch07_q5_nodes", q5_gpus, "gpus_not_nodes", ("counts GPUs",)),
]


@pytest.mark.parametrize("grade_id, fn, key, phrases", SLIPS, ids=[s[2] + "-" + s[0][5:7] for s in SLIPS])
def test_visible_slip_is_named(grade_id, fn, key, phrases):
    message = fails(grade_id, fn)
    assert phrases[0] in message, message


@pytest.mark.parametrize("grade_id, fn, key, phrases", SLIPS, ids=[s[2] + "-" + s[0][5:7] for s in SLIPS])
def test_hidden_slip_is_named_in_general_words(grade_id, fn, key, phrases, capsys):
    # the hidden message names the slip (in general words) and none of the case's numbers
    hidden = fails(grade_id, fn, hidden=True)
    from kvcoach import slips
    assert slips.general(key) in hidden, hidden
    for case in EX[grade_id].cases(hidden=True):
        for name, value in case["kwargs"].items():
            if isinstance(value, int) and value > 1000:
                assert f"{value:,}" not in hidden and str(value) not in hidden, (name, hidden)
        assert case["label"] not in hidden


@pytest.fixture(autouse=True)
def _no_earlier_answers():
    """Each test starts with no q1 answers on record (a later step is judged on the learner's own q1)."""
    runner._ANSWERS.clear()
    yield
    runner._ANSWERS.clear()


# --- steps that build on q1: an early slip is charged once --------------------
def test_a_q1_slip_is_not_charged_again():
    """A learner whose q1 forgets the TP split, and whose later steps call it, fails q1 only."""
    def q2(gpu_memory_bytes, utilization, weight_bytes, overhead_bytes, layers, kv_heads, head_dim, dtype_bytes,
           context, tp):
        pool = math.ceil(gpu_memory_bytes * utilization) - math.ceil(weight_bytes / tp) - overhead_bytes
        return pool // q1_total(layers, kv_heads, head_dim, dtype_bytes, context, tp)

    def q3(sequences, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, layers, kv_heads, head_dim,
           dtype_bytes, context):
        step = weight_bytes / tp + sequences * q1_total(layers, kv_heads, head_dim, dtype_bytes, context, tp)
        return step / bandwidth_bytes_per_s * _slow(tp, tp_overhead, efficiency) * 1000

    runner._ANSWERS.clear()
    assert "each GPU holds only its own KV heads" in fails("ch07_q1_kv_per_sequence_per_gpu", q1_total)
    runner.check(EX["ch07_q2_sequences_by_memory"], q2)         # right, given the learner's own q1
    runner.check(EX["ch07_q3_itl_ms"], q3)
    # and the same q2 with a right q1 behind it is wrong: the slip is named
    runner._ANSWERS.clear()
    runner.check(EX["ch07_q1_kv_per_sequence_per_gpu"], kv_per_sequence_per_gpu)
    assert "each GPU holds only its own KV heads" in fails("ch07_q2_sequences_by_memory", q2)
    runner._ANSWERS.clear()


# --- types --------------------------------------------------------------------
def test_wrong_types_are_rejected():
    def q1_float(*args):
        return float(kv_per_sequence_per_gpu(*args))

    def q3_int(*args):
        return round(itl_ms(*args))

    assert "int" in fails("ch07_q1_kv_per_sequence_per_gpu", q1_float)
    assert "float" in fails("ch07_q3_itl_ms", q3_int)
    assert "must be a function" in fails("ch07_q5_nodes", 8)


def test_release_stub_says_not_written_yet():
    def stub(*args):
        raise NotImplementedError

    assert "not written yet" in fails("ch07_q5_nodes", stub)


# --- slips through the shared mechanism ([diagnosis]) ------------------------------------------------
def test_no_offered_slip_contradicts_a_case():
    """Every catalogued slip, made by a learner: each alternative offered fits every visible case."""
    from chapter_checks import offered_slips_contradicting_a_case
    assert offered_slips_contradicting_a_case(ch07.EXERCISES) == []


def test_generic_slips_are_named():
    """Off by one, s/ms, per GPU/node, the next unit, KB/GB/TB mix-ups: named in every numeric exercise."""
    from chapter_checks import generic_slips_unnamed
    assert generic_slips_unnamed(ch07.EXERCISES) == []


# --- topic slips ([diagnosis §3]) ------------------------------------------------------------------------
def test_itl_target_as_seconds_and_weights_forgotten_are_named():
    def target_as_seconds(itl_target_ms, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, layers,
                          kv_heads, head_dim, dtype_bytes, context):
        return sequences_by_itl(itl_target_ms * 1000, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead,
                                efficiency, layers, kv_heads, head_dim, dtype_bytes, context)

    def no_weights(itl_target_ms, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, layers,
                   kv_heads, head_dim, dtype_bytes, context):
        readable = itl_target_ms / 1000 / _slow(tp, tp_overhead, efficiency) * bandwidth_bytes_per_s
        return math.floor(readable / kv_per_sequence_per_gpu(layers, kv_heads, head_dim, dtype_bytes, context, tp))
    assert "used it as seconds" in fails("ch07_q4_sequences_by_itl", target_as_seconds)
    assert "the weights are missing" in fails("ch07_q4_sequences_by_itl", no_weights)


def test_a_float_q1_is_charged_once():
    """q1 returned as a float of the right value: q1 fails on its type, q2 is judged on that value and passes."""
    def q1_float(*args):
        return float(kv_per_sequence_per_gpu(*args))

    def q2(gpu_memory_bytes, utilization, weight_bytes, overhead_bytes, layers, kv_heads, head_dim, dtype_bytes,
           context, tp):
        pool = math.ceil(gpu_memory_bytes * utilization) - math.ceil(weight_bytes / tp) - overhead_bytes
        return int(pool // q1_float(layers, kv_heads, head_dim, dtype_bytes, context, tp))
    assert "float" in fails("ch07_q1_kv_per_sequence_per_gpu", q1_float)
    runner.check(EX["ch07_q2_sequences_by_memory"], q2)


def test_a_q1_of_zero_is_not_charged_again():
    """kv_heads // tp without max(1, ...): q1 names the slip; a q2 dividing by that 0 is excused, not failed."""
    def q1_no_floor(layers, kv_heads, head_dim, dtype_bytes, context, tp):
        return 2 * layers * (kv_heads // tp) * head_dim * dtype_bytes * context

    def q2(gpu_memory_bytes, utilization, weight_bytes, overhead_bytes, layers, kv_heads, head_dim, dtype_bytes,
           context, tp):
        pool = math.ceil(gpu_memory_bytes * utilization) - math.ceil(weight_bytes / tp) - overhead_bytes
        return pool // q1_no_floor(layers, kv_heads, head_dim, dtype_bytes, context, tp)
    assert "kv_heads // tp is 0" in fails("ch07_q1_kv_per_sequence_per_gpu", q1_no_floor)
    runner.check(EX["ch07_q2_sequences_by_memory"], q2)


def test_q4_returns_zero_when_the_weights_alone_miss_the_target():
    """Exercise 4's text ([corrections 05-09]): no sequence meets the target -> 0. Llama 3.1 8B on one H100: 16.06 GB of
    weights / 3.35 TB/s / 0.7 = 6.85 ms already, so a 5 ms target leaves nothing (the formula gives a negative)."""
    from autograder.checks import ch07
    case = ch07.VISIBLE[2]
    assert case["kwargs"]["tp"] == 1 and case["kwargs"]["weight_bytes"] / 3.35e12 / 0.7 > 0.005
    tight = dict(case, kwargs=dict(case["kwargs"], itl_target_ms=5))
    assert ch07._sequences_by_itl(tight) == 0


# --- a later step accepts the learner's q1 whatever its type, and never charges its slip again ---------
def _q2_on(q1):
    def q2(gpu_memory_bytes, utilization, weight_bytes, overhead_bytes, layers, kv_heads, head_dim, dtype_bytes,
           context, tp):
        pool = math.ceil(gpu_memory_bytes * utilization) - math.ceil(weight_bytes / tp) - overhead_bytes
        return pool // q1(layers, kv_heads, head_dim, dtype_bytes, context, tp)
    return q2


def _q3_on(q1):
    def q3(sequences, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, layers, kv_heads, head_dim,
           dtype_bytes, context):
        step = weight_bytes / tp + sequences * q1(layers, kv_heads, head_dim, dtype_bytes, context, tp)
        return step / bandwidth_bytes_per_s * _slow(tp, tp_overhead, efficiency) * 1000
    return q3


def _q4_on(q1):
    def q4(itl_target_ms, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, layers, kv_heads,
           head_dim, dtype_bytes, context):
        readable = itl_target_ms / 1000 / _slow(tp, tp_overhead, efficiency) * bandwidth_bytes_per_s
        per_seq = q1(layers, kv_heads, head_dim, dtype_bytes, context, tp)
        return max(0, math.floor((readable - math.ceil(weight_bytes / tp)) / per_seq))
    return q4


def _q1_numpy_total(*args):
    import numpy as np
    return np.int64(q1_total(*args))           # the TP slip, in a numpy integer


def _q1_numpy_right(*args):
    import numpy as np
    return np.int64(kv_per_sequence_per_gpu(*args))


def _q1_float(*args):
    return float(kv_per_sequence_per_gpu(*args))


def _q1_no_floor(layers, kv_heads, head_dim, dtype_bytes, context, tp):
    return 2 * layers * (kv_heads // tp) * head_dim * dtype_bytes * context


def _q1_raises_past_k(layers, kv_heads, head_dim, dtype_bytes, context, tp):
    if tp > kv_heads:
        raise ValueError("tp > kv_heads")
    return kv_per_sequence_per_gpu(layers, kv_heads, head_dim, dtype_bytes, context, tp)


def _q1_bool_past_k(layers, kv_heads, head_dim, dtype_bytes, context, tp):
    # a bool where the TP rule should be (True == 1 byte per sequence): q2-q4 are judged on 1
    return True if tp > kv_heads else kv_per_sequence_per_gpu(layers, kv_heads, head_dim, dtype_bytes, context, tp)


#: (q1, the phrase q1's check names): each later step that calls the same q1 passes (or is excused).
CARRIED = [
    (_q1_numpy_total, "each GPU holds only its own KV heads"),     # a numpy int of a wrong value
    (_q1_numpy_right, "numpy.int64"),                              # a numpy int of the right value
    (_q1_float, "returned a float"),                               # a float of the right value
    (_q1_no_floor, "kv_heads // tp is 0"),                         # 0: q2 and q4 divide by it
    (_q1_raises_past_k, "raised ValueError"),                      # raised: q2-q4 raise on the same case
    (_q1_bool_past_k, "returned a bool"),
]


@pytest.mark.parametrize("q1, phrase", CARRIED, ids=[c[0].__name__ for c in CARRIED])
@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
def test_a_q1_answer_of_any_type_is_built_on_and_charged_once(q1, phrase, hidden, capsys):
    message = fails("ch07_q1_kv_per_sequence_per_gpu", q1, hidden=hidden)
    if not hidden:
        assert phrase in message, message
    for gid, make in (("ch07_q2_sequences_by_memory", _q2_on), ("ch07_q3_itl_ms", _q3_on),
                      ("ch07_q4_sequences_by_itl", _q4_on)):
        runner.check(EX[gid], make(q1), hidden=hidden)        # no second charge: passes
    assert capsys.readouterr().out.count("✓") == 3


def test_the_excused_case_is_the_one_q1_broke():
    """q1 without max(1, ...): q2's two cases past Qwen2.5 3B's 2 KV heads (TP 8 and TP 4: 2 // 4 = 0) are
    excused (0 to divide by), the others are judged."""
    ex = EX["ch07_q2_sequences_by_memory"]
    q1 = EX["ch07_q1_kv_per_sequence_per_gpu"]
    cases = ex.cases()
    earlier = runner.learner_answers(q1, runner.run_cases(q1, _q1_no_floor, cases))
    assert [e.number for e in earlier if e.number == 0] == [0, 0]       # 36 x (2 // 8) x ... = 0, and 2 // 4
    results = judge.verdicts(ex, cases, runner.run_cases(ex, _q2_on(_q1_no_floor), cases), earlier=earlier)
    excused = [c["label"] for c, v in zip(cases, results) if v.kind == "excused"]
    assert excused == ["Qwen2.5 3B (2 KV heads), 2,000 users at 8,192 tokens, 40 ms, 8 x H100, TP 8",
                       "Qwen2.5 3B, the same plan with two TP-4 replicas per node"]
    assert all(v.ok for v in results)
    # a q2 that is wrong besides (the weights not split) is still charged on the cases it can be judged on
    results = judge.verdicts(ex, cases, runner.run_cases(ex, q2_weights_whole, cases), earlier=earlier)
    assert any(not v.ok and "weights_not_split" in v.slips for v in results)


def test_earlier_answers_keep_their_number_whatever_the_type():
    import numpy as np
    q1 = EX["ch07_q1_kv_per_sequence_per_gpu"]
    records = [runner.describe_result(v) for v in (np.int64(7), 7.5, True, False, None, "7")]
    records.append({"error": "ZeroDivisionError", "error_message": "division by zero"})
    got = runner.learner_answers(q1, records)
    assert [e.number for e in got] == [7, 7.5, 1, 0, None, None, None]
    assert [e.right_type for e in got] == [False] * 7
    assert got[-1].raised and got[-1].did() == "raised ZeroDivisionError"
    assert got[4].did() == "returned None"
    assert runner.learner_answers(q1, [runner.describe_result(5)])[0] == schema.Earlier(5, "builtins.int")


def test_a_step_whose_every_case_is_excused_is_not_passed():
    """q1 returns None everywhere: q2 raises on it everywhere. Nothing of q2 was judged, so q2 is not passed
    (an excused case is neither passed nor failed), and its message sends the learner back to q1."""
    def q1_none(*args):
        return None

    assert "forget the return" in fails("ch07_q1_kv_per_sequence_per_gpu", q1_none)
    message = fails("ch07_q2_sequences_by_memory", _q2_on(q1_none))
    assert "not judged" in message and "returned None" in message and "fix ch07_q1" in message


def test_a_step_not_built_on_is_judged_against_kvlib():
    """No q1 on record (never checked), or q1 raised where this step still returns a number: the right value."""
    runner._ANSWERS.clear()
    assert "W / tp" in fails("ch07_q2_sequences_by_memory", q2_weights_whole)
    fails("ch07_q1_kv_per_sequence_per_gpu", _q1_raises_past_k)
    message = fails("ch07_q2_sequences_by_memory", q2_weights_whole)
    assert "W / tp" in message


def test_the_outside_check_builds_on_q1_the_same_way():
    """autograder.verdict judges q2 on the records q1 left (JSON), as the instant check does."""
    from autograder import verdict as V
    q1, q2 = EX["ch07_q1_kv_per_sequence_per_gpu"], EX["ch07_q2_sequences_by_memory"]
    cases = list(q1.cases()) + list(q1.cases(hidden=True))
    r1 = json.loads(json.dumps(runner.run_cases(q1, _q1_numpy_total, cases)))
    r2 = json.loads(json.dumps(runner.run_cases(q2, _q2_on(_q1_numpy_total), cases)))
    v1, given = V._judge_exercise(q1, q1.grade_id, 1, cases, len(q1.cases()), r1)
    v2, _ = V._judge_exercise(q2, q2.grade_id, 2, cases, len(q1.cases()), r2, given)
    assert not v1.passed and v2.passed, v2.feedback


# --- the edges the text decides ([diagnosis §6]): the other side of each fails and is told the rule -------------
def q2_budget_floored(gpu_memory_bytes, utilization, weight_bytes, overhead_bytes, layers, kv_heads, head_dim,
                      dtype_bytes, context, tp):
    pool = int(gpu_memory_bytes * utilization) - math.ceil(weight_bytes / tp) - overhead_bytes
    return pool // kv_per_sequence_per_gpu(layers, kv_heads, head_dim, dtype_bytes, context, tp)


def q4_unclamped(*args):
    readable = args[0] / 1000 / _slow(args[2], args[4], args[5]) * args[3]
    per_seq = kv_per_sequence_per_gpu(*args[6:11], args[2])
    return math.floor((readable - math.ceil(args[1] / args[2])) / per_seq)


def q5_plain_ceil(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor, redundancy_nodes):
    per_node = gpus_per_node // tp * min(sequences_by_memory, sequences_by_itl)
    return math.ceil(-(-users // per_node) * spike_factor) + redundancy_nodes


def q5_floor_plus_one(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor,
                      redundancy_nodes):
    per_node = gpus_per_node // tp * min(sequences_by_memory, sequences_by_itl)
    return math.ceil(round((users // per_node + 1) * spike_factor, 9)) + redundancy_nodes


EDGE_SLIPS = [
    # Llama 3.1 8B on one H100: 0.92 x 85,018,877,624 = 78,217,367,414.08 B; rounded up ...415, the pool is exactly
    # 110 sequences of 4,096 x 131,072 B; rounded down it is one byte short: 109
    ("ch07_q2_sequences_by_memory", q2_budget_floored, "budget_rounded_down", "rounded up to a whole byte",
     "1 sequence too small"),
    ("ch07_q4_sequences_by_itl", q4_unclamped, "negative_count", "not a negative count", ""),
    # 6,200 users at 124 a node: 50 nodes; 50 x 1.1 = 55 exactly, stored as 55.00000000000001; + 1 spare = 56
    ("ch07_q5_nodes", q5_plain_ceil, "spike_float_noise", "floating point stores the product", "1 node too large"),
    # 1,240 users at 124 a node: 10 nodes, not 11; x 1.3 = 13, + 1 = 14 (11 x 1.3 = 14.3 -> 15, + 1 = 16)
    ("ch07_q5_nodes", q5_floor_plus_one, "ceil_as_floor_plus_one", "take the ceiling", "2 nodes too large"),
]


@pytest.mark.parametrize("grade_id, fn, key, phrase, size", EDGE_SLIPS, ids=[e[2] for e in EDGE_SLIPS])
def test_the_other_side_of_an_edge_is_named(grade_id, fn, key, phrase, size):
    from kvcoach import slips
    message = fails(grade_id, fn)
    assert phrase in message and size in message, message
    edge_labels = {label for e in ch07.EDGES[grade_id] for label in e["visible"]}
    assert any(label in message for label in edge_labels), message      # the failing case is an edge's
    for seed in SEEDS:
        assert slips.general(key) in fails(grade_id, fn, hidden=True, seed=seed)


def test_edge_figures_by_hand():
    by_label = {c["label"]: c for c in EX["ch07_q2_sequences_by_memory"].cases()}
    exact = by_label["Llama 3.1 8B, 4,096 tokens, TP 1, an overhead of 3,101,044,599 B: the pool is exactly a whole "
                     "number of sequences"]
    k = exact["kwargs"]
    assert k["gpu_memory_bytes"] == 85_018_877_624 and k["weight_bytes"] == 16_060_522_496
    per_seq = 2 * 32 * 8 * 128 * 2 * 4096            # 131,072 B a token x 4,096 tokens = 536,870,912 B
    pool = math.ceil(85_018_877_624 * 0.92) - 16_060_522_496 - 3_101_044_599
    assert pool == 110 * per_seq and EX["ch07_q2_sequences_by_memory"].expected_for(exact) == 110
    nodes_cases = {c["label"]: c for c in EX["ch07_q5_nodes"].cases()}
    six = nodes_cases["Qwen2.5 32B, TP 8, 6,200 users: exactly 50 nodes' worth (124 sequences a node), spike x 1.1"]
    assert 50 * 1.1 == 55.00000000000001 and EX["ch07_q5_nodes"].expected_for(six) == 56


# --- the slips the chapter's text warns about are the slips named ([learner screen §2]) ---------------------------
def q4_ceil(itl_target_ms, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, *geometry):
    readable = itl_target_ms / 1000 / _slow(tp, tp_overhead, efficiency) * bandwidth_bytes_per_s
    per_seq = kv_per_sequence_per_gpu(*geometry, tp)
    return max(0, math.ceil((readable - math.ceil(weight_bytes / tp)) / per_seq))


def q5_each_gpu_a_replica(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor,
                          redundancy_nodes):
    return nodes(users, gpus_per_node, 1, sequences_by_memory, sequences_by_itl, spike_factor, redundancy_nodes)


def q5_spike_before_rounding(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor,
                             redundancy_nodes):
    per_node = gpus_per_node // tp * min(sequences_by_memory, sequences_by_itl)
    return math.ceil(users * spike_factor / per_node) + redundancy_nodes


@pytest.mark.parametrize("grade_id, fn, key, phrases", [
    # Qwen2.5 32B at TP 8 on A100s, 80 ms: 148.x sequences meet it, the ceiling 149
    ("ch07_q4_sequences_by_itl", q4_ceil, "ceil_not_floor", ("returned 149; expected 148", "take the floor")),
    # 500 users, one TP-8 replica of min(124, 148) a node: 5 nodes x 1.3 -> 7, + 1 = 8; each of the 8 GPUs a
    # replica: 992 a node -> 1 node -> ceil(1.3) + 1 = 3
    ("ch07_q5_nodes", q5_each_gpu_a_replica, "gpu_as_replica", ("returned 3; expected 8", "each GPU as a replica")),
    # 500 x 1.3 / 124 = 5.24 -> 6, + 1 = 7
    ("ch07_q5_nodes", q5_spike_before_rounding, "spike_before_rounding",
     ("returned 7; expected 8", "round the users up to whole nodes first")),
])
def test_warned_slip_is_named(grade_id, fn, key, phrases):
    from kvcoach import slips
    message = fails(grade_id, fn)
    for phrase in phrases:
        assert phrase in message, message
    assert "no one known slip" not in message and "matches no known slip" not in message
    assert slips.general(key) in fails(grade_id, fn, hidden=True)


def test_q6_ttft_by_hand_and_its_slips():
    """The queue, then ceil(T_p / (C - n)) steps: 6,144 tokens beside 64 decodes under 512 take ceil(6,144 / 448) = 14
    steps of 20 ms after 150 ms queued, 430 ms; 4,320 tokens beside 80 take exactly 10 chunks of 432 (360 ms with 60
    queued), 4,321 take 11 (390 ms). TTFT without the queue, the decodes not subtracted and the chunks rounded
    down are each named."""
    ex = EX["ch07_q6_ttft_ms"]
    got = [ex.expected_for(c) for c in ex.visible_cases]
    assert got[1] == 150 + 14 * 20 == 430 and got[-2:] == [60 + 10 * 30, 60 + 11 * 30]
    named = {}
    for key, fn in (("ttft_without_queue", lambda t, c, n, s, q: ttft_ms(t, c, n, s, 0.0)),
                    ("decodes_not_subtracted", lambda t, c, n, s, q: ttft_ms(t, c, 0, s, q)),
                    ("chunks_rounded_down", lambda t, c, n, s, q: q + t // (c - n) * s)):
        message = fails("ch07_q6_ttft_ms", fn)
        named[key] = message
    assert "the time in the queue is missing" in named["ttft_without_queue"]
    assert "running decodes take their tokens" in named["decodes_not_subtracted"]
    assert "round the number of chunks up" in named["chunks_rounded_down"]


def test_q7_in_flight_by_hand_and_its_slips():
    """Little's law, N = rate x time in system: section 8's service, 10 requests/s each staying 1,000 ms + 300 x
    50 ms = 16 s, holds 160 on average; 0.2/s staying 0.3 s + 50 x 12 ms = 0.9 s holds 0.18 (a fraction, kept);
    1.1/s staying 2 s + 600 x 80 ms = 50 s holds 55 (stored as 55.00000000000001, within the tolerance). Inverted
    (10 / 16 = 0.625, or 16 / 10 = 1.6), the times in milliseconds (10 x 16,000 = 160,000), the decode left out
    (10 x 1 s = 10) and the TTFT left out (10 x 15 s = 150) are each named."""
    ex = EX["ch07_q7_in_flight"]
    got = {c["label"].split(":")[0]: ex.expected_for(c) for c in ex.visible_cases}
    assert got["section 8's service"] == 160 and math.isclose(got["fewer than one in flight on average"], 0.18)
    assert math.isclose(got["1.1 requests/s after a long queue"], 55) and 1.1 * 50 != 55
    assert runner.check(ex, lambda r, t, n, i: 55.00000000000001 if r == 1.1 else requests_in_flight(r, t, n, i)) \
        is None
    slipped = {"littles_law_inverted": lambda r, t, n, i: r / ((t + n * i) / 1000),
               "time_in_system_in_ms": lambda r, t, n, i: r * (t + n * i),
               "decode_time_left_out": lambda r, t, n, i: r * t / 1000,
               "ttft_left_out": lambda r, t, n, i: r * n * i / 1000}
    named = {key: fails("ch07_q7_in_flight", fn) for key, fn in slipped.items()}
    assert "returned 0.625; expected 160" in named["littles_law_inverted"], named["littles_law_inverted"]
    assert "Little's law multiplies" in named["littles_law_inverted"]
    assert "the times are in milliseconds" in named["time_in_system_in_ms"]
    assert "until its last token" in named["decode_time_left_out"]
    assert "the time to first token (1 s) counts" in named["ttft_left_out"]
    # time / rate: the same slip, told apart from rate / time by the cases (equal at 1 request/s)
    message = fails("ch07_q7_in_flight", lambda r, t, n, i: (t + n * i) / 1000 / r)
    assert "returned 1.6; expected 160" in message and "Little's law multiplies" in message, message
    # rounded to whole requests: 22.25 -> 22, the 0.18 under one -> 0 are named
    message = fails("ch07_q7_in_flight", lambda r, t, n, i: float(round(requests_in_flight(r, t, n, i))))
    assert "returned 22; expected 22.25" in message and "not rounded to whole requests" in message, message
    # rounded up: 160 and 8 stay, 0.18 -> 1, and 55.00000000000001 -> 56
    message = fails("ch07_q7_in_flight", lambda r, t, n, i: float(math.ceil(requests_in_flight(r, t, n, i))))
    assert "not rounded to whole requests" in message, message


def test_in_flight_rounded_to_an_int_is_told_the_rounding_before_the_type():
    """The value is checked before the type: Exercise 7 answered with round(...) returns right ints on the cases
    whose mean is whole and wrong ones elsewhere. By hand, the eight visible cases: 10 x (1 + 300 x 0.05) = 160,
    40 x (0.18 + 0.02) = 8, 500 x (0.4 + 3) = 1,700 and 1.1 x (2 + 48) = 55 are whole (right but an int);
    0.5 x (2.5 + 42) = 22.25, 1 x (0.8 + 10) = 10.8, 0.2 x (0.3 + 0.6) = 0.18 and 150 x (0.45 + 1.62) = 310.5
    are not. The message leads with 22.25 (the first wrong number), names the rounding, and its counts add up:
    4 cases with a wrong number, 4 more wrong in their type alone."""
    def rounded(rate_per_s, ttft_ms, output_tokens, itl_ms):
        return round(rate_per_s * (ttft_ms + output_tokens * itl_ms) / 1000)

    message = fails("ch07_q7_in_flight", rounded)
    assert "returned 22; expected 22.25 requests" in message
    assert "not rounded to whole requests" in message
    assert "returned an int; this answer is a float" in message
    assert "the value itself is right" not in message.lower()
    assert "explains all 4 cases that returned a wrong number" in message
    assert "(4 more visible cases fail on the type alone.)" in message
