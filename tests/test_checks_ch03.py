"""Chapter 03's instant checks: right answers pass, each known slip gets its named message.

Reference functions are written by hand here (never through kvlib). Figures named in the
tests come from hand arithmetic on the published configs: DeepSeek-V3 61 x (512 + 64) x 2 B
= 70,272 B/token ([chains]'s worked example, and the DeepSeek-V3 config.json); the RoPE key
64 / 576 = 11.1% of it ([chains]: "understates the cache by 11%"); Llama 3.3 70B at TP 8:
2 x 80 x 1 x 128 x 2 = 40,960 B per GPU; Qwen2.5-3B (2 KV heads) at TP 8: one whole head per GPU,
2 x 36 x 1 x 128 x 2 = 18,432 B.
"""

from __future__ import annotations

import json
import re

import pytest

from autograder.checks import ch03, judge, runner
from chapter_checks import fails, passes_visible_and_hidden, source_points

SEEDS = (0, 1, 7, 2026, 123456)
Q1, Q2, Q3 = ch03.EXERCISES


# --- reference solutions, by hand -------------------------------------------
def _fields(config):
    return config.get("text_config") or config


def mla_bytes_per_token_from_config(config, dtype_bytes=2):
    f = _fields(config)
    return f["num_hidden_layers"] * (f["kv_lora_rank"] + f["qk_rope_head_dim"]) * dtype_bytes


def kv_bytes_per_token_per_gpu(config, tp, dtype_bytes=2):
    f = _fields(config)
    if f.get("kv_lora_rank") is not None:
        return mla_bytes_per_token_from_config(config, dtype_bytes)
    layers = f.get("num_hidden_layers") or f.get("n_layer")
    heads = f.get("num_attention_heads") or f.get("n_head")
    kv_heads = f.get("num_key_value_heads") or heads
    head_dim = f.get("head_dim") or (f.get("hidden_size") or f.get("n_embd")) // heads
    return 2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes


def name_the_slip(answer_bytes, layers, latent_dim, rope_dim, dtype_bytes):
    right = layers * (latent_dim + rope_dim) * dtype_bytes
    if answer_bytes == right:
        return "correct"
    if answer_bytes == 2 * right:
        return "extra_factor_2"
    if answer_bytes == layers * latent_dim * dtype_bytes:
        return "missing_rope"
    return "other"


REFERENCE = {Q1: mla_bytes_per_token_from_config, Q2: kv_bytes_per_token_per_gpu, Q3: name_the_slip}


# --- the contract with the pipeline ------------------------------------------
def test_grade_ids_and_points():
    assert list(ch03.EXERCISES) == list(source_points("ch03_mla"))
    assert source_points("ch03_mla") == {"ch03_q1_mla_bytes_per_token_from_config": 3,
                                "ch03_q2_kv_bytes_per_token_per_gpu": 2,
                                "ch03_q3_name_the_slip": 1}


def test_visible_cases_cover_every_variant_the_exercise_names():
    variants = {c["context"]["variant"].split(" (")[0] for c in ch03.EXERCISES[Q1].cases()}
    assert {"as published", "DeepSeek-V2-Lite attention fields", "other latent and rope widths",
            "head_dim and qk_head_dim written out", "nested under text_config"} <= variants
    q2 = ch03.EXERCISES[Q2].cases()
    assert {bool(_fields(c["kwargs"]["config"]).get("kv_lora_rank")) for c in q2} == {True, False}
    assert any(c["kwargs"]["tp"] > (_fields(c["kwargs"]["config"]).get("num_key_value_heads") or 99) for c in q2)
    kinds = {ch03.classify_answer(**c["kwargs"]) for c in ch03.EXERCISES[Q3].cases()}
    assert kinds == set(ch03.SLIP_CHOICES)


def test_hidden_variants_all_appear():
    seen = {c["context"]["variant"] for c in ch03.EXERCISES[Q1].cases(hidden=True, seed=5)}
    assert seen == set(ch03.MLA_VARIANTS)


def test_the_chapters_figures_by_hand():
    q1 = ch03.EXERCISES[Q1].cases()
    assert ch03.config_expected(q1[0]) == 61 * (512 + 64) * 2 == 70_272
    assert ch03.config_expected(q1[2]) == 27 * 576 * 2          # DeepSeek-V2-Lite's 27 layers
    assert ch03.config_expected(q1[3]) == 62 * (256 + 32) * 2
    assert ch03.config_expected(q1[5]) == 70_272 * 2            # fp32, nested under text_config
    by_label = {c["label"]: ch03.config_expected(c) for c in ch03.EXERCISES[Q2].cases()}
    assert by_label["DeepSeek-V3 config, dtype_bytes left at its default, tp=8"] == 70_272
    assert by_label["Llama-3.3-70B-Instruct config, dtype_bytes left at its default, tp=8"] == 40_960
    assert by_label["Qwen2.5-3B config, dtype_bytes left at its default, tp=8"] == 18_432


def test_cases_are_json_safe():
    for ex in ch03.EXERCISES.values():
        for case in ex.cases() + ex.cases(hidden=True, seed=3):
            json.dumps(case)


def test_hidden_cases_are_seeded():
    for ex in ch03.EXERCISES.values():
        assert ex.cases(hidden=True, seed=11) == ex.cases(hidden=True, seed=11)
        assert ex.cases(hidden=True, seed=11) != ex.cases(hidden=True, seed=12)


@pytest.mark.parametrize("grade_id", [Q1, Q2, Q3])
def test_reference_passes_visible_and_hidden(grade_id, capsys):
    passes_visible_and_hidden(grade_id, REFERENCE[grade_id], SEEDS, capsys)


# --- slips: one wrong function per catalogued slip ---------------------------
def q1_factor_2(config, dtype_bytes=2):
    return 2 * mla_bytes_per_token_from_config(config, dtype_bytes)


def q1_missing_rope(config, dtype_bytes=2):
    f = _fields(config)
    return f["num_hidden_layers"] * f["kv_lora_rank"] * dtype_bytes


def q1_as_mha(config, dtype_bytes=2):
    """Chapter 01's function, unchanged, on an MLA config."""
    f = _fields(config)
    heads = f["num_attention_heads"]
    kv_heads = f.get("num_key_value_heads") or heads
    head_dim = f.get("head_dim") or f["hidden_size"] // heads
    return 2 * f["num_hidden_layers"] * kv_heads * head_dim * dtype_bytes


def q1_nope(config, dtype_bytes=2):
    f = _fields(config)
    return f["num_hidden_layers"] * (f["kv_lora_rank"] + f["qk_nope_head_dim"]) * dtype_bytes


def q1_query_latent(config, dtype_bytes=2):
    f = _fields(config)
    return f["num_hidden_layers"] * ((f.get("q_lora_rank") or f["kv_lora_rank"]) + f["qk_rope_head_dim"]) \
        * dtype_bytes


def q1_torch_dtype(config, dtype_bytes=2):
    return mla_bytes_per_token_from_config(config, 2)


def q1_in_kib(config, dtype_bytes=2):
    return mla_bytes_per_token_from_config(config, dtype_bytes) / 1024


def q2_split(config, tp, dtype_bytes=2):
    if _fields(config).get("kv_lora_rank") is not None:
        return mla_bytes_per_token_from_config(config, dtype_bytes) // tp
    return kv_bytes_per_token_per_gpu(config, tp, dtype_bytes)


def q2_total(config, tp, dtype_bytes=2):
    return kv_bytes_per_token_per_gpu(config, 1, dtype_bytes)


def q2_factor_2(config, tp, dtype_bytes=2):
    if _fields(config).get("kv_lora_rank") is not None:
        return 2 * mla_bytes_per_token_from_config(config, dtype_bytes)
    return kv_bytes_per_token_per_gpu(config, tp, dtype_bytes)


SLIP_CASES = [
    (Q1, q1_factor_2, "extra_factor_2", ("twice the right figure",)),
    (Q1, q1_missing_rope, "missing_rope", ("RoPE key is missing",)),
    (Q1, q1_as_mha, "mla_as_mha", ("treated MLA as ordinary attention",)),
    (Q1, q1_nope, "nope_for_rope", ("qk_nope_head_dim",)),
    (Q1, q1_query_latent, "query_latent", ("q_lora_rank",)),
    (Q1, q1_torch_dtype, "ignored_dtype_bytes", ("dtype_bytes",)),
    (Q1, q1_in_kib, "answer_in_kib", ("KiB",)),
    (Q2, q2_split, "mla_split_by_tp", ("each GPU keeps a whole copy",)),
    (Q2, q2_total, "total_not_per_gpu", ("each GPU holds only its own KV heads",)),
    (Q2, q2_factor_2, "extra_factor_2", ("twice the right figure",)),
]


@pytest.mark.parametrize("grade_id, fn, key, phrases", SLIP_CASES, ids=[c[2] + "-" + c[0][:5] for c in SLIP_CASES])
def test_visible_slip_is_named(grade_id, fn, key, phrases):
    message = fails(grade_id, fn)
    for phrase in phrases:
        assert phrase in message, message
    assert "matches no known slip" not in message


def test_missing_rope_names_the_cases_rope_width():
    # visible case 4 is 256 + 32: its verdict must say 32, not DeepSeek-V3's 64
    ex = ch03.EXERCISES[Q1]
    case = next(c for c in ex.cases() if "256 + 32" in c["label"])
    record = runner.run_cases(ex, q1_missing_rope, [case])[0]
    message = judge.judge(ex, case, record).message
    assert "the 32-wide decoupled RoPE key is missing" in message and "11.1%" in message, message


def test_a_slip_the_passing_cases_rule_out_is_not_named():
    # the rope left out on the 256 + 32 case only: every other case passes, and each of them rules the slip out
    # (leaving out their 64-wide key would have made them wrong), so no slip is named: the case, how far off
    # (256 of 288 columns: 11.1% too small) and that no one slip explains every case
    def only_that_case_wrong(config, dtype_bytes=2):
        f = _fields(config)
        if f["qk_rope_head_dim"] == 32:
            return q1_missing_rope(config, dtype_bytes)
        return mla_bytes_per_token_from_config(config, dtype_bytes)
    message = fails(Q1, only_that_case_wrong)
    assert "RoPE" not in message and "11.1% too small" in message and "256 + 32" in message, message
    assert "no one known slip explains every case" in message


@pytest.mark.parametrize("grade_id, fn, key, phrases", SLIP_CASES[:3] + SLIP_CASES[7:8])
def test_hidden_slip_is_named_in_general_words(grade_id, fn, key, phrases, capsys):
    message = fails(grade_id, fn, hidden=True, seed=4)
    assert "on a hidden case" in message
    record = json.dumps(ch03.EXERCISES[grade_id].cases(hidden=True, seed=4))
    for number in set(re.findall(r"\d{3,}", message)):
        assert number not in record, f"hidden message reveals {number}: {message}"
    assert capsys.readouterr().out == ""


def test_name_the_slip_wrong_choice_and_type():
    def always_correct(*args):
        return "correct"
    message = fails(Q3, always_correct)
    assert "expected 'extra_factor_2'" in message and "count it twice" in message
    message = fails(Q3, lambda *a: "factor_2")
    assert "not one of the choices" in message


def test_wrong_types_are_rejected():
    message = fails(Q1, lambda config, dtype_bytes=2: float(mla_bytes_per_token_from_config(config, dtype_bytes)))
    assert "returned a float" in message
    message = fails(Q1, lambda config, dtype_bytes=2: None)
    assert "return statement" in message


def test_calling_kvlib_is_refused():
    import kvlib

    def via_kvlib(config, dtype_bytes=2):
        return kvlib.parse_config(config).kv_bytes_per_token(dtype_bytes)
    assert "must not call" in fails(Q1, via_kvlib)


def test_judge_works_from_json_records():
    ex = ch03.EXERCISES[Q2]
    cases = ex.cases()
    records = json.loads(json.dumps(runner.run_cases(ex, q2_split, cases)))
    verdicts = judge.verdicts(ex, cases, records)
    assert [v.ok for v in verdicts] == [ch03.config_expected(c) == q2_split(**c["kwargs"]) for c in cases]
    assert "mla_split_by_tp" in verdicts[0].slips


# --- slips through the shared mechanism ([diagnosis]) ------------------------------------------------
def test_no_offered_slip_contradicts_a_case():
    """Every catalogued slip, made by a learner: each alternative offered fits every visible case."""
    from chapter_checks import offered_slips_contradicting_a_case
    assert offered_slips_contradicting_a_case(ch03.EXERCISES, hidden_seed=20261130) == []


def test_generic_slips_are_named():
    """Off by one, s/ms, per GPU/node, the next unit, KB/GB/TB mix-ups: named in every numeric exercise."""
    from chapter_checks import generic_slips_unnamed
    assert generic_slips_unnamed(ch03.EXERCISES) == []


# --- topic slips ([diagnosis §3]) ------------------------------------------------------------------------
def test_mtp_layer_and_qk_head_dim_are_named():
    # DeepSeek-V3: 61 layers + 1 MTP layer (num_nextn_predict_layers); qk_head_dim = 128 + 64 added to 512
    def counts_mtp(config, dtype_bytes=2):
        f = _fields(config)
        layers = f["num_hidden_layers"] + f.get("num_nextn_predict_layers", 0)
        return layers * (f["kv_lora_rank"] + f["qk_rope_head_dim"]) * dtype_bytes

    def adds_qk_head_dim(config, dtype_bytes=2):
        f = _fields(config)
        return f["num_hidden_layers"] * (f["kv_lora_rank"] + f["qk_nope_head_dim"] + f["qk_rope_head_dim"]) * dtype_bytes
    assert "multi-token-prediction layer" in fails(Q1, counts_mtp)
    message = fails(Q1, adds_qk_head_dim)
    assert "query/key head width" in message, message


def test_counts_add_up_when_a_case_raises():
    # the latent without its rope key, and the fields read at the top level only: the config nested under
    # text_config raises KeyError, every other case is 512 of 576 columns
    def missing_rope_top_level(config, dtype_bytes=2):
        return config["num_hidden_layers"] * config["kv_lora_rank"] * dtype_bytes
    message = fails(Q1, missing_rope_top_level)
    exercise = ch03.EXERCISES[Q1]
    cases = exercise.cases()
    results = judge.verdicts(exercise, cases, runner.run_cases(exercise, missing_rope_top_level, cases))
    wrong = sum(not v.ok and v.kind == "value" for v in results)
    assert sum(v.kind == "error" for v in results) == 1 and wrong > 1
    assert f"explains all {wrong} cases that returned a wrong number" in message, message
    assert "more visible case" not in message
    assert re.search(r'On "[^"]*text_config[^"]*", mla_bytes_per_token_from_config raised KeyError', message)
