"""Chapter 05's instant checks: right answers pass, each catalogued slip gets its named message.

Reference functions are written by hand here (q3 builds on kvlib's one-block hash, as the
exercise allows; nothing else calls kvlib); expected values come from kvlib inside the checks.
Hand figures: [chains] "A shared system prompt" (100 x 2,000 tokens x 131,072 B unshared,
2,000 x 131,072 B shared: 99 x 2,000 x 131,072 = 25,952,256,000 B saved; 2,007 tokens share 125
blocks and recompute 7) and "Fetch from host memory or recompute" (8,192 tokens of Llama 3.1 8B:
21.5 ms fetch against 251 ms recompute, so "fetch").
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

import kvcoach.slips
import kvlib as kv
import kvlib.prefix_cache as pc
from autograder.checks import ch05, check, diagnosis, judge, runner
from chapter_checks import fails, passes_visible_and_hidden, source_points

SEEDS = (0, 1, 7, 2026)
SOURCE = Path(__file__).resolve().parents[1] / "course/source/ch05_prefix_reuse/ch05_prefix_reuse.ipynb"


# --- reference solutions, by hand ------------------------------------------------------
def prefix_bytes_saved(prompt_tokens, num_requests, bytes_per_token, block_size):
    return (num_requests - 1) * (prompt_tokens // block_size) * block_size * bytes_per_token


def prefill_tokens_saved(prompt_tokens, num_requests, block_size):
    return (num_requests - 1) * (prompt_tokens // block_size) * block_size


def prefix_key(token_ids, block_size, cache_salt):
    key = pc.NONE_HASH
    for i in range(len(token_ids) // block_size):
        extra = (("cache_salt", cache_salt),) if cache_salt is not None and i == 0 else None
        key = pc.hash_block(key, token_ids[i * block_size:(i + 1) * block_size], extra)
    return key


def agent_prefill_tokens(system_tokens, observation_tokens, action_tokens, steps, block_size):
    total = cached = 0
    for k in range(1, steps + 1):
        prompt = system_tokens + k * observation_tokens + (k - 1) * action_tokens
        total += prompt - cached
        cached = (prompt + action_tokens) // block_size * block_size
    return total


def fetch_or_recompute(kv_bytes_per_token, num_params, layers, num_heads, head_dim, tokens, link_bytes_per_s,
                       peak_flop_per_s, mfu, fetch_overhead_s):
    fetch = fetch_overhead_s + tokens * kv_bytes_per_token / link_bytes_per_s
    flops = 2 * num_params * tokens + 2 * layers * num_heads * 2 * head_dim * tokens * (tokens + 1) // 2
    return "fetch" if fetch <= flops / (mfu * peak_flop_per_s) else "recompute"


REFERENCE = {
    "ch05_q1_prefix_bytes_saved": prefix_bytes_saved,
    "ch05_q2_prefill_tokens_saved": prefill_tokens_saved,
    "ch05_q3_prefix_key": prefix_key,
    "ch05_q4_agent_prefill_tokens": agent_prefill_tokens,
    "ch05_q5_fetch_or_recompute": fetch_or_recompute,
}


# --- the contract ------------------------------------------------------------------------
def test_grade_ids_and_points():
    assert list(ch05.EXERCISES) == list(source_points("ch05_prefix_reuse")) == list(REFERENCE)
    assert source_points("ch05_prefix_reuse") == {"ch05_q1_prefix_bytes_saved": 2, "ch05_q2_prefill_tokens_saved": 1,
                                "ch05_q3_prefix_key": 3, "ch05_q4_agent_prefill_tokens": 2,
                                "ch05_q5_fetch_or_recompute": 2}


def test_cases_are_json_and_seeded():
    for ex in ch05.EXERCISES.values():
        for hidden in (False, True):
            cases = ex.cases(hidden, seed=3)
            assert json.loads(json.dumps(cases)) == list(cases)
        assert ex.cases(True, seed=5) == ex.cases(True, seed=5) != ex.cases(True, seed=6)


@pytest.mark.parametrize("grade_id", list(REFERENCE))
def test_reference_passes_visible_and_hidden(grade_id, capsys):
    passes_visible_and_hidden(grade_id, REFERENCE[grade_id], SEEDS, capsys)


def test_the_visible_figures_are_the_seeds():
    ex1 = ch05.EXERCISES["ch05_q1_prefix_bytes_saved"]
    first, tail = ex1.cases()[:2]
    assert ex1.expected_for(first) == ex1.expected_for(tail) == 99 * 2000 * 131_072 == 25_952_256_000
    ex5 = ch05.EXERCISES["ch05_q5_fetch_or_recompute"]
    assert ex5.expected_for(ex5.cases()[0]) == "fetch"          # 21.5 ms against 251 ms
    # 8B at 50 GB/s with 5 ms per fetch: break-even 204 tokens (kvlib.offload docstring), so 100 recomputes
    assert ex5.expected_for(ex5.cases()[1]) == "recompute"
    # the agent, by hand: step 1 prefills 1,400; step k > 1 prefills 500 + the partial-block remainder
    ex4 = ch05.EXERCISES["ch05_q4_agent_prefill_tokens"]
    assert ex4.expected_for(ex4.cases()[3]) == 1400
    assert ex4.expected_for(ex4.cases()[0]) == 1400 + sum(
        (1000 + k * 400 + (k - 1) * 100) - (1000 + (k - 1) * 500) // 16 * 16 for k in range(2, 21))
    # the whole-block edge, 5 steps of 48 + 16 tokens in 16-token blocks: step 1 prefills system + 48; each later
    # step its 48 new tokens plus the history's partial block (0, 1 or 15 tokens)
    by_system = {c["kwargs"]["system_tokens"]: ex4.expected_for(c) for c in ex4.cases()[4:]}
    assert by_system == {1024: 1072 + 4 * 48, 1025: 1073 + 4 * 49, 1023: 1071 + 4 * 63}


def test_both_choices_occur_in_visible_and_hidden_cases():
    ex = ch05.EXERCISES["ch05_q5_fetch_or_recompute"]
    assert {ex.expected_for(c) for c in ex.cases()} == {"fetch", "recompute"}
    hidden = {ex.expected_for(c) for seed in SEEDS for c in ex.cases(True, seed)}
    assert hidden == {"fetch", "recompute"}


# --- catalogued slips, one wrong function each -----------------------------------------
def q1_tail_shared(p, n, b, bs):
    return (n - 1) * p * b


def q1_every_copy(p, n, b, bs):
    return n * (p // bs) * bs * b


def q1_tokens(p, n, b, bs):
    return (n - 1) * (p // bs) * bs


def q1_gb(p, n, b, bs):
    return prefix_bytes_saved(p, n, b, bs) / 1e9


def q2_tail_shared(p, n, bs):
    return (n - 1) * p


def q2_every_copy(p, n, bs):
    return n * (p // bs) * bs


def q2_blocks(p, n, bs):
    return (n - 1) * (p // bs)


def q4_no_cache(system, obs, act, steps, bs):
    return sum(system + k * obs + (k - 1) * act for k in range(1, steps + 1))


def q4_output_not_cached(system, obs, act, steps, bs):
    total = cached = 0
    for k in range(1, steps + 1):
        prompt = system + k * obs + (k - 1) * act
        total += prompt - cached
        cached = prompt // bs * bs
    return total


def q4_token_level(system, obs, act, steps, bs):
    return agent_prefill_tokens(system, obs, act, steps, 1)


SLIPS = [
    ("ch05_q1_prefix_bytes_saved", q1_tail_shared, "partial_block_shared", ["only full blocks are shared"]),
    ("ch05_q1_prefix_bytes_saved", q1_every_copy, "every_copy_saved", ["one copy of the shared blocks", "99"]),
    ("ch05_q1_prefix_bytes_saved", q1_tokens, "tokens_not_bytes", ["count of tokens", "131,072"]),
    ("ch05_q1_prefix_bytes_saved", q1_gb, "answer_in_gb", ["looks like GB"]),
    ("ch05_q2_prefill_tokens_saved", q2_tail_shared, "partial_block_shared", ["only full blocks are shared"]),
    ("ch05_q2_prefill_tokens_saved", q2_every_copy, "every_copy_saved", ["num_requests - 1"]),
    ("ch05_q2_prefill_tokens_saved", q2_blocks, "blocks_not_tokens", ["that counts blocks"]),
    ("ch05_q4_agent_prefill_tokens", q4_no_cache, "no_cache", ["no prefix cache at all"]),
    ("ch05_q4_agent_prefill_tokens", q4_output_not_cached, "output_not_cached", ["action a step generates"]),
    ("ch05_q4_agent_prefill_tokens", q4_token_level, "partial_block_shared", ["only full blocks are shared"]),
]


@pytest.mark.parametrize("grade_id,fn,key,phrases", SLIPS, ids=[f"{s[0][:7]}-{s[2]}" for s in SLIPS])
def test_visible_slip_is_named(grade_id, fn, key, phrases):
    message = fails(grade_id, fn)
    for phrase in phrases:
        assert phrase in message, message
    ex = ch05.EXERCISES[grade_id]
    records = runner.run_cases(ex, fn, ex.cases())
    verdicts = judge.verdicts(ex, ex.cases(), records)
    assert diagnosis.common_slip(verdicts) == key


@pytest.mark.parametrize("grade_id,fn,key,phrases", SLIPS, ids=[f"{s[0][:7]}-{s[2]}" for s in SLIPS])
def test_hidden_slip_is_named_in_general_words(grade_id, fn, key, phrases):
    message = fails(grade_id, fn, hidden=True)
    assert kvcoach.slips.general(key) in message, message


# q3 and q5 answer with bytes and a choice: each visible case is built to catch one slip, and its hint names it.
def q3_unchained(token_ids, bs, salt):
    extra = (("cache_salt", salt),) if salt is not None else None
    blocks = len(token_ids) // bs
    return pc.hash_block(pc.NONE_HASH, token_ids[(blocks - 1) * bs:blocks * bs], extra) if blocks else pc.NONE_HASH


def q3_hashes_the_tail(token_ids, bs, salt):
    key = prefix_key(token_ids, bs, salt)
    rest = token_ids[len(token_ids) // bs * bs:]
    return pc.hash_block(key, rest) if rest else key


def q3_salt_on_every_block(token_ids, bs, salt):
    key = pc.NONE_HASH
    for i in range(len(token_ids) // bs):
        key = pc.hash_block(key, token_ids[i * bs:(i + 1) * bs], (("cache_salt", salt),) if salt else None)
    return key


def q3_salt_ignored(token_ids, bs, salt):
    return prefix_key(token_ids, bs, None)


def q3_empty_for_no_block(token_ids, bs, salt):
    return prefix_key(token_ids, bs, salt) if len(token_ids) >= bs else b""


def q5_no_attention(bpt, params, layers, heads, head_dim, tokens, link, peak, mfu, overhead):
    return fetch_or_recompute(bpt, params, 0, heads, head_dim, tokens, link, peak, mfu, overhead)


def q5_no_overhead(bpt, params, layers, heads, head_dim, tokens, link, peak, mfu, overhead):
    return fetch_or_recompute(bpt, params, layers, heads, head_dim, tokens, link, peak, mfu, 0.0)


def q5_peak_not_achieved(bpt, params, layers, heads, head_dim, tokens, link, peak, mfu, overhead):
    return fetch_or_recompute(bpt, params, layers, heads, head_dim, tokens, link, peak, 1.0, overhead)


def q5_attention_with_d(bpt, params, layers, heads, head_dim, tokens, link, peak, mfu, overhead):
    """D per query-key pair in the attention term, not 2 D (head_dim enters nothing else here)."""
    return fetch_or_recompute(bpt, params, layers, heads, head_dim // 2, tokens, link, peak, mfu, overhead)


HINTED = [
    ("ch05_q3_prefix_key", q3_unchained, "the previous block's key as the parent"),
    ("ch05_q3_prefix_key", q3_hashes_the_tail, "a partial last block has no key"),
    ("ch05_q3_prefix_key", q3_salt_on_every_block, "the first block's key only"),
    ("ch05_q3_prefix_key", q3_salt_ignored, "the first block's key only"),
    ("ch05_q3_prefix_key", q3_empty_for_no_block, "return NONE_HASH"),
    ("ch05_q5_fetch_or_recompute", q5_no_attention, "attention term"),
    ("ch05_q5_fetch_or_recompute", q5_no_overhead, "fixed cost"),
    ("ch05_q5_fetch_or_recompute", q5_peak_not_achieved, "mfu x peak"),
]


@pytest.mark.parametrize("grade_id,fn,phrase", HINTED, ids=[f.__name__ for _, f, _ in HINTED])
def test_each_slip_fails_the_case_built_for_it(grade_id, fn, phrase):
    message = fails(grade_id, fn)
    assert phrase in message, message
    if grade_id == "ch05_q5_fetch_or_recompute":
        # Q5's slips are recomputed (kvcoach.slips fetch_choice): the slip's words, and no case's hint under them
        assert "wrong choice: " in message and "Hint:" not in message, message
    elif fn in (q3_unchained, q3_salt_on_every_block, q3_salt_ignored):
        # Q3's keys are recomputed with each slip (kvcoach.slips prefix_key_hex): the slip's words, no hint
        assert "another key: " in message and "Hint:" not in message, message
    else:
        assert "Hint:" in message


def test_calling_the_whole_chain_trips_but_the_one_block_hash_does_not():
    def whole_chain(token_ids, bs, salt):
        keys = kv.prefix_cache.block_hashes(token_ids, bs, cache_salt=salt)
        return keys[-1] if keys else kv.prefix_cache.NONE_HASH
    assert "must not call kvlib.prefix_cache.block_hashes" in fails("ch05_q3_prefix_key", whole_chain)
    check("ch05_q3_prefix_key", prefix_key)           # hash_block itself is allowed
    assert kv.prefix_cache.block_hashes([1, 2], 2)    # and restored afterwards


def test_calling_kvlib_offload_trips():
    def via_kvlib(bpt, params, layers, heads, head_dim, tokens, link, peak, mfu, overhead):
        return kv.offload.fetch_or_recompute("llama-3.1-8b", tokens).winner
    assert "must not call kvlib" in fails("ch05_q5_fetch_or_recompute", via_kvlib)


# --- wrong types -------------------------------------------------------------------------
def test_wrong_types_are_rejected():
    assert "returned a float" in fails("ch05_q2_prefill_tokens_saved",
                                       lambda p, n, bs: float(prefill_tokens_saved(p, n, bs)))
    # the key as hex text (the chapter prints keys so): told to return the bytes, not .hex() -- not to "encode it"
    hexed = fails("ch05_q3_prefix_key", lambda t, bs, s: prefix_key(t, bs, s).hex())
    assert "return the bytes, not .hex()" in hexed and "encode" not in hexed, hexed
    message = fails("ch05_q5_fetch_or_recompute", lambda *a: fetch_or_recompute(*a) == "fetch")
    assert "'fetch', 'recompute'" in message
    assert "not one of the choices" in fails("ch05_q5_fetch_or_recompute", lambda *a: fetch_or_recompute(*a).upper())


# --- hidden failures keep the hidden cases hidden -----------------------------------------
@pytest.mark.parametrize("grade_id,fn", [(s[0], s[1]) for s in SLIPS] + [(h[0], h[1]) for h in HINTED],
                         ids=[s[1].__name__ for s in SLIPS] + [h[1].__name__ for h in HINTED])
def test_hidden_messages_reveal_no_inputs(grade_id, fn):
    ex = ch05.EXERCISES[grade_id]
    for seed in (None, 4):
        try:
            check(grade_id, fn, hidden=True, seed=seed)
        except AssertionError as exc:
            message = str(exc).replace(grade_id, "")
        else:
            continue
        digits = set(re.findall(r"\d+", message))
        assert digits <= {"10", "9", "2", "30", "1"}, message      # 10^9, 2^30, num_requests - 1
        assert "label" not in message and "hidden" in message
        for case in ex.cases(True, seed):
            assert repr(case["kwargs"].get("cache_salt")) not in message or case["kwargs"].get("cache_salt") is None


# --- slips through the shared mechanism ([diagnosis]) ------------------------------------------------
def test_no_offered_slip_contradicts_a_case():
    """Every catalogued slip, made by a learner: each alternative offered fits every visible case."""
    from chapter_checks import offered_slips_contradicting_a_case
    assert offered_slips_contradicting_a_case(ch05.EXERCISES, hidden_seed=20261130) == []


def test_generic_slips_are_named():
    """Off by one, s/ms, per GPU/node, the next unit, KB/GB/TB mix-ups: named in every numeric exercise."""
    from chapter_checks import generic_slips_unnamed
    assert generic_slips_unnamed(ch05.EXERCISES) == []


# --- topic slips ([diagnosis §3]) ------------------------------------------------------------------------
def test_partial_block_rounded_up_is_named():
    # (N - 1) x ceil(P / bs) x bs tokens shared: the partial last block counted as a whole one
    def rounds_up(prompt_tokens, num_requests, bytes_per_token, block_size):
        return (num_requests - 1) * -(-prompt_tokens // block_size) * block_size * bytes_per_token
    message = fails("ch05_q1_prefix_bytes_saved", rounds_up)
    assert "round the prompt down to whole blocks" in message, message


def _q5_summary(fn):
    ex = ch05.EXERCISES["ch05_q5_fetch_or_recompute"]
    cases = ex.cases()
    records = runner.run_cases(ex, fn, cases, quiet=True)
    return diagnosis.summary(ex, cases, judge.verdicts(ex, cases, records), records=records)


@pytest.mark.parametrize("slip, fn", [
    ("attention_term_missing", q5_no_attention),
    ("fetch_overhead_ignored", q5_no_overhead),
    ("mfu_ignored", q5_peak_not_achieved),
    # bits for bytes: 8 x the copy's time; by hand 200,000 x 131,072 B over 2 GB/s is 13.1 s to fetch, 104.9 s
    # as bits, against 33.5 s to recompute (the attention term's hint was shown before, [diagnosis §4])
    ("link_as_bits", lambda bpt, p, layers, h, d, t, link, peak, mfu, over:
        fetch_or_recompute(bpt * 8, p, layers, h, d, t, link, peak, mfu, over)),
    # D per pair, not 2 D (head_dim halved in the attention term alone): by hand, 160,000 tokens of Llama 3.1 8B
    # over 2 GB/s fetch in 160,000 x 131,072 B / 2e9 = 10.49 s; recomputing at 0.6 x 989 TFLOP/s takes
    # (2 x 7,504,924,672 x 160,000 = 2.40e15, + 2 x 32 x 32 x 256 x 160,000 x 160,001 / 2 = 6.71e15) / 5.93e14 =
    # 15.4 s (fetch), but with half the attention term (2.40e15 + 3.36e15) / 5.93e14 = 9.7 s (recompute)
    ("attention_half_width", q5_attention_with_d),
])
def test_q5_slips_are_named_and_their_hint_follows_the_slip(slip, fn):
    """[diagnosis §3-4]: Question 5's slips are recomputed (kvcoach.slips fetch_choice) and named on every case they
    fail; no case's hint (written for another slip) appears under the named one."""
    s = _q5_summary(fn)
    assert s.slips[0] == slip and "Hint:" not in s.message, s.message


def test_q4_partial_block_rounded_up_is_named():
    """[diagnosis §3]: the hit rounded up to a whole block. By hand, 500 + 37 and 13 tokens in 32-token blocks: step 2's
    history is 550 tokens, 17 whole blocks (544) hit, not 18 (576, capped at the 587-token prompt)."""
    def rounded_up(system, observation, action, steps, bs):
        total = system + observation
        for k in range(2, steps + 1):
            prompt = system + k * observation + (k - 1) * action
            total += prompt - min(math.ceil((system + (k - 1) * (observation + action)) / bs) * bs, prompt)
        return total
    ex = ch05.EXERCISES["ch05_q4_agent_prefill_tokens"]
    cases = ex.cases()
    records = runner.run_cases(ex, rounded_up, cases, quiet=True)
    s = diagnosis.summary(ex, cases, judge.verdicts(ex, cases, records), records=records)
    assert s.slips[:1] == ("history_block_rounded_up",) and "partial last block of the cached history" in s.message


def test_q4_whole_block_edge_separates_the_sides():
    """[diagnosis §6]: Exercise 4's edge cases (1,024 / 1,025 / 1,023-token system prompts, 64 tokens a step, 16-token
    blocks). A hit rounded up to a block and a hit of every cached token both agree with the right answer on the
    whole-block history and miss a token either side of it, so each is failed there and named."""
    def hit(system, observation, action, steps, bs, cached):
        total = system + observation
        for k in range(2, steps + 1):
            prompt = system + k * observation + (k - 1) * action
            total += prompt - min(cached(system + (k - 1) * (observation + action), bs), prompt - 1)
        return total

    def rounded_up(*a):
        return hit(*a, cached=lambda n, bs: math.ceil(n / bs) * bs)

    def token_level(*a):
        return hit(*a, cached=lambda n, bs: n)
    ex = ch05.EXERCISES["ch05_q4_agent_prefill_tokens"]
    edge = [c for c in ex.cases() if c["kwargs"]["steps"] == 5]
    for wrong, slip in ((rounded_up, "history_block_rounded_up"), (token_level, "partial_block_shared")):
        records = runner.run_cases(ex, wrong, edge, quiet=True)
        passed = [v.ok for v in judge.verdicts(ex, edge, records)]
        assert passed == [True, False, False], wrong.__name__
        s = diagnosis.summary(ex, edge, judge.verdicts(ex, edge, records), records=records)
        assert s.slips[:1] == (slip,), (wrong.__name__, s.message)


def test_the_coachs_catalogue_trips_like_kvlib():
    """The slip catalogue recomputes every answer (kvcoach.slips.expected_value): a graded function that asks it
    is refused as one that calls kvlib, by the tripwire and by the watch for its code under another name."""
    from kvcoach import slips

    def via_catalogue(kv_bytes_per_token, num_params, layers, num_heads, head_dim, tokens, link_bytes_per_s,
                      peak_flop_per_s, mfu, fetch_overhead_s):
        return slips.expected_value("fetch_choice", **locals())
    message = fails("ch05_q5_fetch_or_recompute", via_catalogue)
    assert "must not call kvcoach.slips.engine.expected_value" in message, message
    assert slips.expected_value("fetch_choice", **ch05.Q5_VISIBLE[0]["kwargs"]) in ch05.CHOICES     # restored


def test_unchained_key_message_is_short_and_blames_the_chain():
    # every block hashed from NONE_HASH, so the key is the last block's alone: the message shows the token list
    # and the two 32-byte digests by their ends, and the first case's hint (the chain), not another case's edge
    def unchained_loop(token_ids, bs, salt):
        key = pc.NONE_HASH
        for i in range(len(token_ids) // bs):
            extra = (("cache_salt", salt),) if salt is not None and i == 0 else None
            key = pc.hash_block(pc.NONE_HASH, token_ids[i * bs:(i + 1) * bs], extra)
        return key
    message = fails("ch05_q3_prefix_key", unchained_loop)
    assert "(32 items)" in message and "returned 32 bytes " in message and "expected 32 bytes " in message
    assert "\\x" not in message and max(len(line) for line in message.splitlines()) < 400, message
    assert "the previous block's key as the parent" in message and "The text's rule" not in message


def test_prefix_key_slips_recomputed_by_hand():
    # 3 blocks of 2 tokens and one past them, salted: each slip's key built here with kvlib's one-block hash
    tokens, salt = [1, 2, 3, 4, 5, 6, 7], "t"
    first = pc.hash_block(pc.NONE_HASH, [1, 2], (("cache_salt", salt),))
    right = pc.hash_block(pc.hash_block(first, [3, 4]), [5, 6])
    expected, ways = kvcoach.slips.QUANTITIES["prefix_key_hex"](dict(token_ids=tokens, block_size=2, cache_salt=salt))
    ways = dict(ways)
    assert expected == right.hex() == prefix_key(tokens, 2, salt).hex()
    assert ways["unchained_key"] == pc.hash_block(pc.NONE_HASH, [5, 6]).hex()
    assert ways["unchained_key@salted"] == pc.hash_block(pc.NONE_HASH, [5, 6], (("cache_salt", salt),)).hex()
    assert ways["partial_block_keyed"] == pc.hash_block(right, [7]).hex()
    salted = (("cache_salt", salt),)
    every = pc.hash_block(pc.hash_block(first, [3, 4], salted), [5, 6], salted)
    assert ways["salt_on_every_block"] == every.hex()
    assert ways["salt_ignored"] == pc.hash_block(pc.hash_block(pc.hash_block(pc.NONE_HASH, [1, 2]), [3, 4]),
                                                 [5, 6]).hex()


def test_q5_num_params_leaves_the_input_table_out():
    """One prefill rule with ch05 §7 and ch06: a token is multiplied by every parameter but the input table's
    (Llama 3.1 8B: 8,030,261,248 - 128,256 x 4,096 = 7,504,924,672), not by all 8.03e9."""
    ex = ch05.EXERCISES["ch05_q5_fetch_or_recompute"]
    llama = [c for c in ex.visible_cases if c["context"]["model"] == "llama-3.1-8b"]
    assert llama and all(c["kwargs"]["num_params"] == 7_504_924_672 for c in llama)
