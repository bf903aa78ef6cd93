"""Chapter 02's instant checks: right answers pass, each catalogued slip gets its named message.

Reference functions are written by hand here (never through kvlib). Figures checked by hand:
Llama 3.3 70B at TP 8 is 2 x 80 x 1 x 128 x 2 = 40,960 B per token per GPU ([kv-math], worked
example 2: "320/8 = 40 KiB"); Llama 3.1 8B has 32 query and 8 KV heads (its config.json), so a
query-head slip is 4x; vLLM replicates KV heads past TP = K (vllm/config/model.py get_num_kv_heads).
"""

from __future__ import annotations

import json
import math

import pytest

import kvcoach.slips
import kvlib
from autograder.checks import ch02
from chapter_checks import fails, passes_visible_and_hidden, source_points

SEEDS = (0, 1, 7, 2026)
H100_REPORTED = round(79.18 * 2**30)      # bytes CUDA reports on an H100 SXM ([chains]: 79.18 GiB)
LLAMA70_WEIGHTS = 141_107_412_992         # Llama 3.3 70B bf16 weights, the input of Question 3


# --- reference solutions, by hand -------------------------------------------
def kv_heads_and_group(config):
    heads = config.get("num_attention_heads") or config.get("n_head")
    kv_heads = config.get("num_key_value_heads") or heads
    return (kv_heads, heads // kv_heads)


def kv_bytes_per_token_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp):
    return 2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes


def sequences_per_gpu(cuda_memory_bytes, weight_bytes, reserve_bytes, layers, kv_heads, head_dim, dtype_bytes, tp,
                      seq_len):
    budget = cuda_memory_bytes - -(-weight_bytes // tp) - reserve_bytes
    return budget // (kv_bytes_per_token_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp) * seq_len)


def diagnose_colleague(claimed_bytes, layers, num_heads, kv_heads, head_dim, dtype_bytes, tp):
    right = kv_bytes_per_token_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp)
    candidates = {"query_heads": kv_bytes_per_token_per_gpu(layers, num_heads, head_dim, dtype_bytes, tp),
                  "total_not_per_gpu": 2 * layers * kv_heads * head_dim * dtype_bytes,
                  "fp32_bytes": kv_bytes_per_token_per_gpu(layers, kv_heads, head_dim, 4, tp) if dtype_bytes == 2 else None}
    return (claimed_bytes // right, next(k for k, v in candidates.items() if v == claimed_bytes))


REFERENCE = {
    "ch02_q1_kv_heads_and_group": kv_heads_and_group,
    "ch02_q2_kv_bytes_per_token_per_gpu": kv_bytes_per_token_per_gpu,
    "ch02_q3_sequences_per_gpu": sequences_per_gpu,
    "ch02_q4_diagnose_colleague": diagnose_colleague,
}


# --- the contract with the pipeline ------------------------------------------
def test_grade_ids_and_points():
    assert list(ch02.EXERCISES) == list(source_points("ch02_gqa_tp"))
    assert source_points("ch02_gqa_tp") == {"ch02_q1_kv_heads_and_group": 2, "ch02_q2_kv_bytes_per_token_per_gpu": 2,
                                "ch02_q3_sequences_per_gpu": 3, "ch02_q4_diagnose_colleague": 2}
    for ex in ch02.EXERCISES.values():
        assert ex.quantity is None or ex.quantity in kvcoach.slips.QUANTITIES


def test_cases_are_json_and_seeded():
    for ex in ch02.EXERCISES.values():
        for hidden in (False, True):
            cases = ex.cases(hidden, seed=3)
            restored = json.loads(json.dumps(cases))
            assert [ex.expected(c) for c in restored] == [ex.expected(c) for c in cases]
        assert ex.hidden_cases(5) == ex.hidden_cases(5) and ex.hidden_cases(5) != ex.hidden_cases(6)


def test_visible_cases_cover_every_variant_the_text_names():
    q1 = ch02.EXERCISES["ch02_q1_kv_heads_and_group"].visible_cases
    labels = " | ".join(c["label"] for c in q1)
    assert "gpt2-large" in labels and "null" in labels                  # absent (GPT-2), null
    assert any(c["kwargs"]["config"].get("num_key_value_heads") == c["kwargs"]["config"].get("num_attention_heads")
               for c in q1)                                              # equal to the query heads
    q2 = ch02.EXERCISES["ch02_q2_kv_bytes_per_token_per_gpu"].visible_cases
    assert any(c["kwargs"]["tp"] > c["kwargs"]["kv_heads"] for c in q2)  # replication
    assert any(c["kwargs"]["tp"] == 1 for c in q2) and any(c["kwargs"]["kv_heads"] == 1 for c in q2)
    q3 = ch02.EXERCISES["ch02_q3_sequences_per_gpu"].visible_cases
    assert any(c["kwargs"]["tp"] > c["kwargs"]["kv_heads"] for c in q3)
    q4 = ch02.EXERCISES["ch02_q4_diagnose_colleague"].visible_cases
    assert {c["context"]["slip"] for c in q4} == set(ch02.Q4_SLIPS)


def test_hidden_cases_run_only_engine_splits_and_every_q4_slip():
    for seed in SEEDS:
        for c in ch02.EXERCISES["ch02_q2_kv_bytes_per_token_per_gpu"].hidden_cases(seed):
            k, tp, h = c["kwargs"]["kv_heads"], c["kwargs"]["tp"], c["context"]["num_heads"]
            assert h % tp == 0 and (k % tp == 0 or tp % k == 0)
        q4 = ch02.EXERCISES["ch02_q4_diagnose_colleague"].hidden_cases(seed)
        assert {c["context"]["slip"] for c in q4} == set(ch02.Q4_SLIPS)
        for c in q4:   # exactly one listed slip reproduces the colleague's figure
            a = dict(c["kwargs"])
            claimed = a.pop("claimed_bytes")
            assert [s for s in ch02.Q4_SLIPS if ch02.colleague_bytes(s, **a) == claimed] == [c["context"]["slip"]]


def test_the_visible_figures_by_hand():
    q2 = ch02.EXERCISES["ch02_q2_kv_bytes_per_token_per_gpu"]
    assert q2.expected(q2.visible_cases[0]) == 40 * 1024                 # [kv-math]: 320 KiB / 8
    assert q2.expected(q2.visible_cases[3]) == 2 * 32 * 1 * 128 * 1      # 8B at TP 16, fp8: one head per GPU
    q3 = ch02.EXERCISES["ch02_q3_sequences_per_gpu"]
    case = q3.visible_cases[0]
    assert case["kwargs"]["weight_bytes"] == LLAMA70_WEIGHTS
    by_hand = (H100_REPORTED - -(-LLAMA70_WEIGHTS // 8) - 5 * 10**9) // (40_960 * 8192)
    assert q3.expected(case) == by_hand == 185
    assert q3.expected(q3.visible_cases[4]) == by_hand                   # MQA at TP 8 = GQA-8 at TP 8
    q4 = ch02.EXERCISES["ch02_q4_diagnose_colleague"]
    assert q4.expected(q4.visible_cases[0]) == (4, "query_heads")       # Llama 3.1 8B: H / K = 32 / 8
    assert q4.expected(q4.visible_cases[1]) == (8, "query_heads")       # Llama 3.3 70B: 64 / 8


# --- right answers pass -------------------------------------------------------
@pytest.mark.parametrize("grade_id", list(REFERENCE))
def test_reference_passes_visible_and_hidden(grade_id, capsys):
    passes_visible_and_hidden(grade_id, REFERENCE[grade_id], SEEDS, capsys)


# --- each catalogued slip is named ------------------------------------------------
def q1_absent_as_one(config):
    heads = config.get("num_attention_heads") or config.get("n_head")
    kv_heads = config.get("num_key_value_heads") or 1
    return (kv_heads, heads // kv_heads)


def q2_total(layers, kv_heads, head_dim, dtype_bytes, tp):
    return 2 * layers * kv_heads * head_dim * dtype_bytes


def q2_split_past_k(layers, kv_heads, head_dim, dtype_bytes, tp):
    return 2 * layers * kv_heads * head_dim * dtype_bytes // tp


def q2_missing_two(layers, kv_heads, head_dim, dtype_bytes, tp):
    return kv_bytes_per_token_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp) // 2


def q2_float(layers, kv_heads, head_dim, dtype_bytes, tp):
    return float(kv_bytes_per_token_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp))


def q3_weights_whole(cuda_memory_bytes, weight_bytes, reserve_bytes, layers, kv_heads, head_dim, dtype_bytes, tp,
                     seq_len):
    return sequences_per_gpu(cuda_memory_bytes, weight_bytes * tp, reserve_bytes, layers, kv_heads, head_dim,
                             dtype_bytes, tp, seq_len)


def q3_kv_whole(cuda_memory_bytes, weight_bytes, reserve_bytes, layers, kv_heads, head_dim, dtype_bytes, tp, seq_len):
    return sequences_per_gpu(cuda_memory_bytes, weight_bytes, reserve_bytes, layers, kv_heads * tp, head_dim,
                             dtype_bytes, tp, seq_len)


def q3_ceil(cuda_memory_bytes, weight_bytes, reserve_bytes, layers, kv_heads, head_dim, dtype_bytes, tp, seq_len):
    budget = cuda_memory_bytes - -(-weight_bytes // tp) - reserve_bytes
    return math.ceil(budget / (kv_bytes_per_token_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp) * seq_len))


def q3_tokens(cuda_memory_bytes, weight_bytes, reserve_bytes, layers, kv_heads, head_dim, dtype_bytes, tp, seq_len):
    return sequences_per_gpu(cuda_memory_bytes, weight_bytes, reserve_bytes, layers, kv_heads, head_dim,
                             dtype_bytes, tp, 1)


SLIPS = [
    ("ch02_q2_kv_bytes_per_token_per_gpu", q2_total, "total_not_per_gpu", ["8x too large", "its own KV heads"]),
    ("ch02_q2_kv_bytes_per_token_per_gpu", q2_missing_two, "missing_kv_factor", ["2x too small", "factor 2"]),
    ("ch02_q3_sequences_per_gpu", q3_weights_whole, "weights_not_split", ["1/8 of the weights"]),
    ("ch02_q3_sequences_per_gpu", q3_kv_whole, "total_not_per_gpu", ["its own KV heads"]),
    ("ch02_q3_sequences_per_gpu", q3_ceil, "ceil_not_floor", ["floor, not the ceiling"]),
    ("ch02_q3_sequences_per_gpu", q3_tokens, "tokens_not_sequences", ["how many tokens fit"]),
]


@pytest.mark.parametrize("grade_id,fn,key,phrases", SLIPS, ids=[s[2] + "-" + s[0][:7] for s in SLIPS])
def test_visible_slip_is_named(grade_id, fn, key, phrases):
    message = fails(grade_id, fn)
    assert message.startswith(f"✗ {grade_id}") and "on case" in message and "expected" in message
    for phrase in phrases:
        assert phrase in message, (phrase, message)


@pytest.mark.parametrize("grade_id,fn,key,phrases", SLIPS, ids=[s[2] + "-" + s[0][:7] for s in SLIPS])
def test_hidden_slip_is_named_in_general_words(grade_id, fn, key, phrases):
    message = fails(grade_id, fn, hidden=True)
    assert kvcoach.slips.general(key) in message, message


def test_splitting_past_k_is_named():
    message = fails("ch02_q2_kv_bytes_per_token_per_gpu", q2_split_past_k)
    assert "TP 16 (more GPUs than KV heads)" in message and "replicated, not split" in message
    assert "2x too small" in message


def test_absent_kv_heads_read_as_one_gets_the_hint():
    message = fails("ch02_q1_kv_heads_and_group", q1_absent_as_one)
    assert "gpt2-large" in message and "K = H" in message and "expected (20, 1)" in message


def test_q4_wrong_slip_and_wrong_types():
    def always_query(claimed_bytes, layers, num_heads, kv_heads, head_dim, dtype_bytes, tp):
        return (diagnose_colleague(claimed_bytes, layers, num_heads, kv_heads, head_dim, dtype_bytes, tp)[0],
                "query_heads")

    message = fails("ch02_q4_diagnose_colleague", always_query)
    assert "expected (8, 'total_not_per_gpu')" in message
    message = fails("ch02_q4_diagnose_colleague", lambda *a: (diagnose_colleague(*a)[0], "query heads"))
    assert "not one of the choices" in message or "element 1" in message
    message = fails("ch02_q4_diagnose_colleague", lambda *a: (float(diagnose_colleague(*a)[0]), diagnose_colleague(*a)[1]))
    assert "element 0 is float" in message
    message = fails("ch02_q2_kv_bytes_per_token_per_gpu", q2_float)
    assert "returned a float" in message and "The value itself is right" in message


def test_hidden_failures_reveal_no_inputs():
    for grade_id, fn in (("ch02_q2_kv_bytes_per_token_per_gpu", q2_total),
                         ("ch02_q3_sequences_per_gpu", q3_weights_whole),
                         ("ch02_q4_diagnose_colleague", lambda *a: (0, "fp32_bytes"))):
        ex = ch02.EXERCISES[grade_id]
        message = fails(grade_id, fn, hidden=True)
        for case in ex.cases(hidden=True):
            assert case["label"] not in message
            for value in case["kwargs"].values():
                if isinstance(value, int) and value > 100:
                    assert f"{value:,}" not in message and str(value) not in message


# --- slips through the shared mechanism ([diagnosis]) ------------------------------------------------
def test_no_offered_slip_contradicts_a_case():
    """Every catalogued slip, made by a learner: each alternative offered fits every visible case."""
    from chapter_checks import offered_slips_contradicting_a_case
    assert offered_slips_contradicting_a_case(ch02.EXERCISES, hidden_seed=20261130) == []


def test_generic_slips_are_named():
    """Off by one, s/ms, per GPU/node, the next unit, KB/GB/TB mix-ups: named in every numeric exercise."""
    from chapter_checks import generic_slips_unnamed
    assert generic_slips_unnamed(ch02.EXERCISES) == []


# --- topic slips ([diagnosis §3]) ------------------------------------------------------------------------
def test_tp_floor_of_one_missing_is_named():
    # kv_heads // tp without max(1, ...): 0 bytes on the TP 16 > K = 8 case (hand: 8 // 16 = 0)
    def no_floor(layers, kv_heads, head_dim, dtype_bytes, tp):
        return 2 * layers * (kv_heads // tp) * head_dim * dtype_bytes
    message = fails("ch02_q2_kv_bytes_per_token_per_gpu", no_floor)
    assert "kv_heads // tp is 0" in message and "max(1, kv_heads // tp)" in message, message
    assert "Or:" not in message


def test_query_heads_split_over_tp_is_named():
    # the query heads split over the GPUs: Llama 3.3 70B at TP 8 gives 2 x 80 x 64/8 x 128 x 2 = 327,680 B
    def query_heads(layers, kv_heads, head_dim, dtype_bytes, tp):
        # each visible model's query heads: the 70B's 64, Qwen2.5 7B's 28, GPT-2 large's 20, else 32
        heads = 64 if layers == 80 else 28 if kv_heads == 4 else 20 if layers == 36 else 32
        return 2 * layers * max(1, heads // tp) * head_dim * dtype_bytes
    message = fails("ch02_q2_kv_bytes_per_token_per_gpu", query_heads)
    assert "327,680" in message and "query heads" in message, message


def test_reserve_times_tp_and_clamped_weights_are_named():
    def reserve_times_tp(cuda_memory_bytes, weight_bytes, reserve_bytes, layers, kv_heads, head_dim, dtype_bytes,
                         tp, seq_len):
        budget = cuda_memory_bytes - -(-weight_bytes // tp) - reserve_bytes * tp
        return max(0, budget // (kv_bytes_per_token_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp) * seq_len))

    def weights_whole_clamped(cuda_memory_bytes, weight_bytes, reserve_bytes, layers, kv_heads, head_dim,
                              dtype_bytes, tp, seq_len):
        budget = cuda_memory_bytes - weight_bytes - reserve_bytes
        return max(0, budget // (kv_bytes_per_token_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp) * seq_len))
    assert "do not multiply it by tp" in fails("ch02_q3_sequences_per_gpu", reserve_times_tp)
    assert "1/" in fails("ch02_q3_sequences_per_gpu", weights_whole_clamped)      # "holds 1/tp of the weights"


# --- figures the chapter's worked problems state --------------------------------------------------------
CONTEXTS = (4096, 8192, 32768, 131072)


def test_question3_erratum_counts_from_the_sheets_own_budget():
    # [kv-math]'s worked example 2: a 57.35 GB budget per GPU and 40 KiB per token per GPU (2 x 80 x 1 x 128 x 2).
    # 40 KiB x 8,192 = 40,960 x 8,192 = 335,544,320 B (335.5 MB); the sheet's "327.7 MB" is 40,000 x 8,192.
    # By hand: 57.35e9 / 335,544,320 = 170.9 -> 170; / 167,772,160 = 341.8 -> 341; / 1,342,177,280 = 42.7 -> 42;
    # / 5,368,709,120 = 10.7 -> 10. With the KiB-as-kB slip: / 327.68e6 = 175.0 -> 175, 350, 43, 10 (its own counts).
    budget = 57_350_000_000
    per_token = kvlib.load_model("llama-3.3-70b").kv_bytes_per_token(tp=8)
    assert per_token == 40 * 1024 and kvlib.kv_bytes_per_sequence(per_token, 8192) == 335_544_320
    right = {c: kvlib.max_concurrency(budget, kvlib.kv_bytes_per_sequence(per_token, c)) for c in CONTEXTS}
    assert right == {4096: 341, 8192: 170, 32768: 42, 131072: 10}
    slipped = {c: kvlib.max_concurrency(budget, kvlib.kv_bytes_per_sequence(per_token // kvlib.KiB * kvlib.KB, c))
               for c in CONTEXTS}
    assert slipped == {4096: 350, 8192: 175, 32768: 43, 131072: 10}
    # From what CUDA reports (79.18 GiB), kvlib's weights (141,107,412,992 B / 8) and 5 GB: 185 at 8,192.
    budget3 = H100_REPORTED - -(-LLAMA70_WEIGHTS // 8) - 5 * 10**9
    assert kvlib.max_concurrency(budget3, kvlib.kv_bytes_per_sequence(per_token, 8192)) == budget3 // 335_544_320


def test_chapter_says_which_kv_head_fields_kvlib_reads():
    # Section 2: kvlib reads Falcon's multi_query / num_kv_heads and GPT-BigCode's multi_query, not ChatGLM's
    # multi_query_group_num nor MPT/DBRX's attn_config.kv_n_heads (vLLM's get_total_num_kv_heads reads all four).
    # If kvlib learns one of them, this fails: update section 2 of ch02 with it.
    base = {"hidden_size": 4096, "num_hidden_layers": 2, "vocab_size": 1000, "intermediate_size": 8192,
            "max_position_embeddings": 2048, "num_attention_heads": 32}
    heads = lambda extra: kvlib.parse_config({**base, **extra}).num_kv_heads        # noqa: E731
    assert heads({"model_type": "falcon", "multi_query": True}) == 1
    assert heads({"model_type": "falcon", "new_decoder_architecture": True, "num_kv_heads": 8}) == 8
    assert heads({"model_type": "gpt_bigcode", "multi_query": True}) == 1
    assert heads({"model_type": "chatglm", "multi_query_attention": True, "multi_query_group_num": 2}) == 32
    assert heads({"model_type": "mpt", "attn_config": {"kv_n_heads": 8}}) == 32
    assert heads({"model_type": "dbrx", "attn_config": {"kv_n_heads": 8}}) == 32
