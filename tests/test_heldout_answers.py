"""Held-out learner answers are told what they did ([learner screen] §2).

``tests/heldout/chNN.py`` holds wrong answers to chapters 01-05's exercises, written from the student
notebooks alone before the slip catalogue was read (each with what the learner did, in the chapter's words).
Each runs through the check its test cell calls, as a learner's notebook would, and the message must name what
the learner did: the catalogue key the one-message diagnosis names (``diagnosis.summary``), or, where the answer
raises on an edge or no catalogue slip applies (a ``(slip, phrase)`` with no key), a phrase of the rule it
breaks. A message that names a slip never falls back to "recheck" or "no known slip".
"""

from __future__ import annotations

import pytest

from autograder.checks import diagnosis, judge, registry, runner
from chapter_checks import fails
from heldout import ch01, ch02, ch03, ch04, ch05

ANSWERS = {(module.__name__.rsplit(".", 1)[-1], a.name): a for module in (ch01, ch02, ch03, ch04, ch05)
           for a in module.ANSWERS}

#: (chapter, answer) -> (the catalogue key the check names, or None; a phrase its message holds)
EXPECTED = {
    ("ch01", "null_kv_heads"): (None, "null means the same as absent: one KV head per query head"),
    ("ch01", "head_dim_from_hidden"): ("hidden_over_heads", "this config gives head_dim = 256 explicitly"),
    ("ch01", "no_factor_2"): ("missing_kv_factor", "the factor 2 for K and V is missing"),
    ("ch01", "one_layer"): ("missing_layers", "the number of layers (32) is missing"),
    ("ch01", "no_batch"): ("missing_batch", "the batch (32) is missing"),
    ("ch01", "no_seq_len"): ("missing_seq_len", "the sequence length (8192) is missing"),
    ("ch01", "ceil"): ("ceil_not_floor", "take the floor, not the ceiling"),
    ("ch01", "tokens_not_sequences"): ("tokens_not_sequences", "how many tokens fit, not how many sequences"),
    ("ch01", "gib_read_as_gb"): ("gb_for_gib", "you mixed GB (10^9) and GiB (2^30)"),
    ("ch01", "negative_not_zero"): ("negative_count", "not a negative count"),
    ("ch01", "h_figure_not_difference"): ("inflated_not_extra", "counted with the query heads"),
    ("ch01", "ratio_inverted"): ("inverted_ratio", "the ratio is upside down"),
    ("ch02", "gpt2_keyerror"): (None, "GPT-2 configs name the query heads n_head"),
    ("ch02", "absent_means_mqa"): ("absent_as_mqa", "not a single KV head (MQA)"),
    ("ch02", "no_max_one"): ("tp_floor_missing", "max(1, kv_heads // tp)"),
    ("ch02", "bytes_divided_by_tp"): ("split_replicated", "heads are replicated, not split"),
    ("ch02", "weights_not_split"): ("weights_not_split", "each GPU holds 1/8 of the weights"),
    ("ch02", "cache_not_split"): ("total_not_per_gpu", "each GPU holds only its own KV heads"),
    ("ch02", "guess_from_factor"): (None, "the factor is right and the slip wrong"),
    ("ch02", "true_figure_divided_by_tp"): (None, "the slip is right and the factor wrong"),
    ("ch03", "text_config_keyerror"): (None, "keeps the language model's fields under text_config"),
    ("ch03", "nope_for_rope"): ("nope_for_rope", "the decoupled RoPE key, qk_rope_head_dim = 64"),
    ("ch03", "latent_split"): ("mla_split_by_tp", "each GPU keeps a whole copy"),
    ("ch03", "gqa_no_max_one"): ("tp_floor_missing", "max(1, kv_heads // tp)"),
    ("ch03", "no_dtype_bytes"): ("reference_without_dtype", "leave out b, the bytes per number (dtype_bytes = 2)"),
    ("ch03", "factor_2_on_latent_only"): ("doubled_latent_only", "you doubled the latent alone"),
    ("ch04", "ceil"): ("ceil_not_floor", "take the floor, not the ceiling"),
    ("ch04", "utilization_after_weights"): ("utilization_after_weights", "(M u - W - O)"),
    ("ch04", "half_a_block"): ("block_size_not_minus_one", "the average is (bs - 1) / 2, not bs / 2"),
    ("ch04", "floor_division"): ("half_floored", "floor division (//) drops the half"),
    ("ch04", "window_always_full"): ("window_not_capped", "min(seq_len, window), not the whole window"),
    ("ch04", "window_minus_one"): ("window_minus_one", "not window - 1"),
    ("ch04", "no_factor_2"): ("missing_kv_factor", "the factor 2 for K and V is missing"),
    ("ch04", "no_whole_blocks"): ("tokens_not_blocks", "take the floor in blocks"),
    ("ch04", "oracle_wastes_nothing"): ("reservation_ignored", "tokens a sequence has yet to generate"),
    ("ch04", "paged_extra_block"): ("paged_whole_last_block", "a multiple of the block size wastes nothing"),
    ("ch05", "every_request"): ("every_copy_saved", "num_requests - 1 = 99 requests, not all 100"),
    ("ch05", "partial_block_shared"): ("partial_block_rounded_up", "round the prompt down to whole blocks"),
    ("ch05", "last_token_cap"): ("last_token_cap", "every full block of the 2,000-token prompt is hit"),
    ("ch05", "whole_prompt"): ("partial_block_shared", "only full blocks are shared"),
    ("ch05", "salt_every_block"): ("salt_on_every_block", "the salt goes into the first block's key only"),
    ("ch05", "partial_block_hashed"): ("partial_block_keyed", "a partial last block has no key"),
    ("ch05", "actions_not_cached"): ("output_not_cached", "the action a step generates is cached too"),
    ("ch05", "hits_in_tokens"): ("partial_block_shared", "only full blocks are shared"),
    ("ch05", "peak_not_mfu"): ("mfu_ignored", "not its peak"),
    ("ch05", "attention_d_not_2d"): ("attention_half_width", "in place of 2 D it is half as large"),
}


def learner_function(answer):
    """The answer cell run as a notebook runs it; the function it defines."""
    names: dict = {"__name__": "__main__"}
    exec(compile(answer.code, f"<{answer.name}>", "exec"), names)
    return names[answer.function]


def test_every_answer_has_an_expectation_and_each_exercise_two_answers():
    assert set(EXPECTED) == set(ANSWERS)
    for module in (ch01, ch02, ch03, ch04, ch05):
        chapter = module.__name__.rsplit(".", 1)[-1]
        exercises = registry.chapter_exercises(chapter)      # ch01 -> autograder/checks/ch01.py's exercises
        per_exercise = {grade_id: sum(a.check_id == grade_id for a in module.ANSWERS) for grade_id in exercises}
        assert all(n >= 2 for n in per_exercise.values()), (chapter, per_exercise)


@pytest.mark.parametrize("chapter, name", sorted(EXPECTED))
def test_held_out_answer_is_told_what_it_did(chapter, name):
    answer = ANSWERS[chapter, name]
    key, phrase = EXPECTED[chapter, name]
    fn = learner_function(answer)
    message = fails(answer.check_id, fn)
    assert phrase in message, (answer.intent, message)
    exercise = registry.exercise(answer.check_id)
    cases = exercise.cases()
    records = runner.run_cases(exercise, fn, cases, quiet=True)
    named = diagnosis.summary(exercise, cases, judge.verdicts(exercise, cases, records), records=records).slips
    if key is None:
        return
    assert named[:1] == (key,), (answer.intent, named, message)
    assert "recheck" not in message and "no known slip" not in message, message
