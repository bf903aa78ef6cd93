"""kvlib.prefix_cache: the chained hash, the radix tree against it, LRU, and [chains]'s sharing figures."""

import hashlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlib.prefix_cache import (
    NONE_HASH,
    WORKLOADS,
    ChainedHashCache,
    PrefixCacheError,
    RadixCache,
    Request,
    block_hashes,
    changed_blocks,
    hash_block,
    make_workload,
    prefix_sharing_savings,
    run_cache,
    simulate_prefix_cache,
)

# --- [chains]: a shared system prompt --------------------------------------------------


def test_seed_000_shared_system_prompt():
    s = prefix_sharing_savings(prompt_tokens=2000, num_requests=100, bytes_per_token=131072)
    # [chains]: unshared 100 x 2,000 x 131,072 B = 26.2 GB; shared once = 262 MB; 2,000 / 16 = 125 full blocks
    assert s.unshared_bytes == 100 * 2000 * 131072 == 26_214_400_000
    assert round(s.unshared_bytes / 1e9, 1) == 26.2
    assert s.shared_bytes == 2000 * 131072 == 262_144_000
    assert round(s.shared_bytes / 1e6) == 262
    assert s.shared_blocks == 125 and s.tail_tokens == 0
    assert s.hit_tokens_per_request == 2000
    assert s.prefill_tokens_unshared == 200_000 and s.prefill_tokens_shared == 2000


def test_seed_000_a_2007_token_prompt_recomputes_7():
    s = prefix_sharing_savings(prompt_tokens=2007, num_requests=100, bytes_per_token=131072)
    # [chains]: "a 2,007-token prompt shares 125 blocks and recomputes 7 tokens"
    assert (s.shared_blocks, s.tail_tokens) == (125, 7)
    # each request keeps its own 7 tail tokens, in a block of its own
    assert s.shared_bytes == (125 * 16 + 100 * 7) * 131072
    assert s.shared_block_bytes == (125 + 100) * 16 * 131072
    assert s.prefill_tokens_shared == 2007 + 99 * 7


def test_the_radix_cache_reproduces_the_shared_prompt_hits():
    # 100 requests behind one 2,000-token system prompt: the first computes it, 99 hit 125 blocks each
    r = simulate_prefix_cache("shared_system_prompt")
    assert r.hit_blocks[0] == 0 and set(r.hit_blocks[1:]) == {125}
    assert r.hit_tokens == 99 * 125 * 16


# --- the chained hash ----------------------------------------------------------------
def test_hash_is_sha256_of_a_stable_encoding():
    a = hash_block(NONE_HASH, [1, 2, 3])
    assert len(a) == 32 and a == hash_block(NONE_HASH, (1, 2, 3))
    assert NONE_HASH == hashlib.sha256(b"s" + (15).to_bytes(4, "big") + b"kvlib-none-hash").digest()
    assert a != hash_block(NONE_HASH, [1, 2, 4]) != hash_block(hash_block(NONE_HASH, [0]), [1, 2, 3])


def test_only_full_blocks_are_hashed():
    assert len(block_hashes(range(31), 16)) == 1
    assert len(block_hashes(range(32), 16)) == 2
    assert block_hashes(range(15), 16) == ()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=200), st.data(), st.sampled_from([1, 2, 4, 16]))
def test_one_changed_token_invalidates_its_block_and_every_later_one(tokens, data, bs):
    pos = data.draw(st.integers(0, len(tokens) - 1))
    edited = list(tokens)
    edited[pos] += 1000
    full = len(tokens) // bs
    assert changed_blocks(block_hashes(tokens, bs), block_hashes(edited, bs)) == list(range(pos // bs, full))


def test_extra_keys_and_cache_salt_change_every_block():
    tokens = list(range(64))
    plain = block_hashes(tokens, 16)
    assert changed_blocks(plain, block_hashes(tokens, 16, extra_keys=("lora", "adapter"))) == [0, 1, 2, 3]
    # the salt is hashed into the first block only, and the chain carries it to the rest
    assert changed_blocks(plain, block_hashes(tokens, 16, cache_salt="tenant-a")) == [0, 1, 2, 3]


# --- the radix tree against the chained-hash model ------------------------------------------
def _chained_hits(requests, bs):
    cache, hits = ChainedHashCache(bs), []
    for r in requests:
        # vLLM's cap on a hit (the last prompt token is always computed), applied as run_cache does
        hits.append(min(cache.match(r.prompt), (len(r.prompt) - 1) // bs) if r.prompt else 0)
        cache.insert(r.prompt + r.output)
    return tuple(hits)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_radix_and_chained_hash_agree_on_every_workload(name):
    requests = make_workload(name, seed=1)
    assert run_cache(requests, block_size=16).hit_blocks == _chained_hits(requests, 16)


requests_strategy = st.lists(
    st.tuples(st.lists(st.integers(0, 2), max_size=40), st.lists(st.integers(0, 2), max_size=10)),
    min_size=1, max_size=15).map(lambda rs: [Request(tuple(p), tuple(o)) for p, o in rs])


@settings(max_examples=100, deadline=None)
@given(requests_strategy, st.sampled_from([1, 2, 3, 4]))
def test_radix_and_chained_hash_agree_on_random_requests(requests, bs):
    # a three-letter alphabet makes shared prefixes, divergences mid-edge and splits common
    assert run_cache(requests, block_size=bs).hit_blocks == _chained_hits(requests, bs)


@settings(max_examples=100, deadline=None)
@given(requests_strategy, st.sampled_from([1, 2, 4]), st.integers(0, 12))
def test_budget_is_respected_and_never_adds_hits(requests, bs, capacity):
    bounded = RadixCache(bs, capacity)
    unbounded = RadixCache(bs)
    for r in requests:
        got, ceiling = bounded.match(r.prompt), unbounded.match(r.prompt)
        # what a bounded cache holds is a prefix-closed subset of what an unbounded one would
        assert got <= ceiling
        bounded.insert(r.prompt + r.output)
        unbounded.insert(r.prompt + r.output)
        assert bounded.num_blocks == bounded.count_blocks() <= capacity
        # LRU can always make room: a sequence that fits the budget is cached whole after its insert
        blocks = len(r.prompt + r.output) // bs
        if blocks <= capacity:
            assert bounded.match(r.prompt + r.output) == blocks
    total = sum(len(r.prompt + r.output) // bs for r in requests)
    # conservation of blocks: every block inserted is held, evicted, or was never admitted for lack of room
    assert unbounded.num_blocks + unbounded.evicted_blocks <= total
    assert bounded.num_blocks <= unbounded.num_blocks + bounded.evicted_blocks


def test_lru_evicts_the_least_recently_used_branch_first():
    c = RadixCache(block_size=1, capacity_blocks=4)
    c.insert([1, 2])      # branch a
    c.insert([3, 4])      # branch b
    c.match([1, 2])       # a is now the more recently used
    c.insert([5, 6])      # needs 2 blocks: b goes, a stays
    assert c.cached_sequences() == [(1, 2), (5, 6)]
    assert c.evicted_blocks == 2


def test_eviction_trims_a_leaf_from_its_end():
    c = RadixCache(block_size=1, capacity_blocks=3)
    c.insert([1, 2, 3])
    c.insert([9])         # one block over: the last block of [1, 2, 3] goes, its prefix stays
    assert c.cached_sequences() == [(1, 2), (9,)]


def test_agent_prefills_only_what_is_new():
    requests = make_workload("agent", seed=3)
    r = run_cache(requests, block_size=16)
    # step i > 0 finds every full block of step i - 1's prompt + action, which its prompt starts with
    expected_hits = [0] + [len(prev.prompt + prev.output) // 16 for prev in requests[:-1]]
    assert list(r.hit_blocks) == expected_hits
    assert r.prefill_tokens_with_cache == sum(len(q.prompt) for q in requests) - 16 * sum(expected_hits)
    # without the cache the 20 steps re-send a growing history: the work grows quadratically
    assert r.prefill_tokens_without_cache > 8 * r.prefill_tokens_with_cache


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_reports_are_consistent(name):
    full = simulate_prefix_cache(name, bytes_per_token=131072)
    assert 0 <= full.hit_rate <= 1
    assert full.prefill_tokens_with_cache + full.hit_tokens == full.prefill_tokens_without_cache
    assert full.bytes_held == full.blocks_held * 16 * 131072
    assert full.evicted_blocks == 0
    small = simulate_prefix_cache(name, capacity_blocks=max(1, full.peak_blocks // 4))
    assert small.peak_blocks <= small.capacity_blocks
    assert small.hit_tokens <= full.hit_tokens


def test_multi_turn_chat_under_a_budget_evicts_and_loses_hits():
    full = simulate_prefix_cache("multi_turn_chat")
    small = simulate_prefix_cache("multi_turn_chat", capacity_blocks=400)
    assert small.evicted_blocks > 0
    assert small.hit_rate < full.hit_rate


def test_capacity_in_bytes():
    # 1 GiB at 131,072 B per token and 16-token blocks is 2**30 / 2**21 = 512 blocks
    r = simulate_prefix_cache("document_qa", capacity_bytes=2**30, bytes_per_token=131072)
    assert r.capacity_blocks == 512


def test_workloads_are_deterministic_for_a_seed():
    assert make_workload("few_shot", seed=5) == make_workload("few_shot", seed=5)
    assert make_workload("few_shot", seed=5) != make_workload("few_shot", seed=6)


@pytest.mark.parametrize("call, name", [
    (lambda: RadixCache(block_size=0), "block_size"),
    (lambda: RadixCache(capacity_blocks=-1), "capacity_blocks"),
    (lambda: make_workload("nope"), "workload"),
    (lambda: make_workload("agent", steps="x"), "agent"),
    (lambda: simulate_prefix_cache(capacity_bytes=10**9), "bytes_per_token"),
    (lambda: prefix_sharing_savings(0, 100, 131072), "prompt_tokens"),
    (lambda: block_hashes([1, 2], 1, extra_keys=(1.5,)), "extra keys"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(PrefixCacheError, match=name):
        call()


def test_cache_salt_enters_only_the_first_block_key():
    # vLLM (v1/core/kv_cache_utils.py, generate_block_hash_extra_keys): the cache salt is mixed into the first
    # block's key only; later blocks differ through the chain alone. So block 1's key is the plain hash of
    # (block 0's salted key, its tokens, no extra keys), and the first key is the hash with ("cache_salt", s).
    tokens = list(range(12))
    salted = block_hashes(tokens, 4, cache_salt="tenant-a")
    assert salted[0] == hash_block(NONE_HASH, tokens[0:4], (("cache_salt", "tenant-a"),))
    assert salted[1] == hash_block(salted[0], tokens[4:8], None)
    assert salted[2] == hash_block(salted[1], tokens[8:12], None)
    # extra keys (a LoRA name) go into every block, with the salt appended to the first only
    lora = block_hashes(tokens, 4, extra_keys=("lora", "a"), cache_salt="s")
    assert lora[0] == hash_block(NONE_HASH, tokens[0:4], ("lora", "a", ("cache_salt", "s")))
    assert lora[1] == hash_block(lora[0], tokens[4:8], ("lora", "a"))


# --- the encoding, byte for byte (the module docstring: type-tagged and length-prefixed, so keys are stable
# across Python versions and machines; a change of encoding changes every key a course figure shows) ---------
def _len4(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big")


def test_a_block_key_is_sha256_of_the_documented_encoding():
    # (parent, tokens, extra keys) is a tuple of 3 -> b"t" + 3; the parent is 32 bytes -> b"b" + 32 + the bytes;
    # token ids are one run of decimals -> b"I" + 5 + b"1,2,3"; no extra keys -> b"N"
    expected = (b"t" + (3).to_bytes(4, "big") + b"b" + (32).to_bytes(4, "big") + NONE_HASH
                + b"I" + (5).to_bytes(4, "big") + b"1,2,3" + b"N")
    assert hash_block(NONE_HASH, [1, 2, 3]) == hashlib.sha256(expected).digest()
    assert block_hashes([1, 2, 3], 3) == (hashlib.sha256(expected).digest(),)


def test_every_kind_of_extra_key_has_its_own_tag():
    extra = (None, True, False, 7, -12, "é", b"\x00\x01", (), (1, "x"), [4, 5])
    # each element written out by hand: None N, True T, False F, int i + decimal digits, str s + its UTF-8 bytes
    # ("é" is 2 bytes, so the length is of the bytes, not the characters), bytes b, an empty tuple and a list of
    # ints I (a run of decimals), a mixed tuple t + its elements
    parts = [b"N", b"T", b"F", b"i" + _len4(b"7") + b"7", b"i" + _len4(b"-12") + b"-12",
             b"s" + (2).to_bytes(4, "big") + b"\xc3\xa9", b"b" + _len4(b"\x00\x01") + b"\x00\x01",
             b"I" + (0).to_bytes(4, "big"),
             b"t" + (2).to_bytes(4, "big") + b"i" + _len4(b"1") + b"1" + b"s" + _len4(b"x") + b"x",
             b"I" + _len4(b"4,5") + b"4,5"]
    encoded_extra = b"t" + (10).to_bytes(4, "big") + b"".join(parts)
    expected = (b"t" + (3).to_bytes(4, "big") + b"b" + (32).to_bytes(4, "big") + NONE_HASH
                + b"I" + _len4(b"9,8") + b"9,8" + encoded_extra)
    assert hash_block(NONE_HASH, [9, 8], extra) == hashlib.sha256(expected).digest()


def test_an_extra_key_of_another_type_is_refused_with_its_type():
    with pytest.raises(PrefixCacheError) as info:
        hash_block(NONE_HASH, [1], (1.5,))
    assert str(info.value) == "extra keys must be None, bool, int, str, bytes or tuples of them, got float"


@pytest.mark.parametrize("call, message", [
    (lambda: RadixCache(block_size=1.5), "block_size must be an integer, got 1.5"),
    (lambda: RadixCache(block_size=True), "block_size must be an integer, got True"),
    (lambda: ChainedHashCache(block_size=0), "block_size must be at least 1, got 0"),
    (lambda: RadixCache(capacity_blocks=-1), "capacity_blocks must be at least 0, got -1"),
    (lambda: make_workload("agent", vocab_size=1), "vocab_size must be at least 2, got 1"),
    (lambda: make_workload("nope"), "workload must be one of shared_system_prompt, few_shot, document_qa, agent, "
                                    "multi_turn_chat, got 'nope'"),
    (lambda: run_cache([], capacity_bytes=10**9), "capacity_bytes needs bytes_per_token and excludes capacity_blocks"),
    (lambda: run_cache([], capacity_bytes=10**9, bytes_per_token=2, capacity_blocks=4),
     "capacity_bytes needs bytes_per_token and excludes capacity_blocks"),
    (lambda: run_cache([], bytes_per_token=0), "bytes_per_token must be at least 1, got 0"),
    (lambda: run_cache([], capacity_bytes=-1, bytes_per_token=2), "capacity_bytes must be at least 0, got -1"),
    (lambda: prefix_sharing_savings(0, 1, 2), "prompt_tokens must be at least 1, got 0"),
    (lambda: prefix_sharing_savings(10, 0, 2), "num_requests must be at least 1, got 0"),
    (lambda: prefix_sharing_savings(10, 1, 0), "bytes_per_token must be at least 1, got 0"),
    (lambda: prefix_sharing_savings(10, 1, 2, block_size=0), "block_size must be at least 1, got 0"),
])
def test_bad_input_messages_in_full(call, message):
    with pytest.raises(PrefixCacheError) as info:
        call()
    assert str(info.value) == message


def test_an_unknown_workload_parameter_is_named_with_its_workload():
    # the message is "<workload>: <Python's TypeError>", which names the generator function and the keyword
    with pytest.raises(PrefixCacheError) as info:
        make_workload("few_shot", steps=3)
    assert str(info.value).startswith("few_shot: ") and str(info.value).endswith(
        "got an unexpected keyword argument 'steps'")


def test_smallest_legal_inputs_are_accepted():
    # the lower bounds themselves are legal: 1-token blocks, an empty budget, a two-token vocabulary, 0 bytes
    assert RadixCache(block_size=1, capacity_blocks=0).insert([1, 2]) == 0   # nothing fits an empty budget
    assert set(t for r in make_workload("agent", steps=2, vocab_size=2) for t in r.prompt) <= {0, 1}
    assert run_cache([Request((1, 2))], capacity_bytes=0, bytes_per_token=1).capacity_blocks == 0
    assert prefix_sharing_savings(1, 1, 1, block_size=1).shared_blocks == 1


def test_a_report_summary_line():
    # the run_cache example: turn 1 caches 2 blocks (40 tokens), turn 2 (50 tokens) hits 2 and adds 1: 3 held.
    # At 2^30 / 16 B per token one 16-token block is 1 GiB: 3 blocks = 3 x 2^30 = 3,221,225,472 B = 3.22 GB.
    turn1 = Request(tuple(range(30)), tuple(range(100, 110)))
    turn2 = Request(turn1.prompt + turn1.output + tuple(range(200, 210)))
    r = run_cache([turn1, turn2], bytes_per_token=2**30 // 16, workload="chat")
    assert r.bytes_held == 3 * 2**30
    # hit rate 32 / 80 = 40.0%; prefill 80 - 32 = 48 tokens
    assert r.summary() == ("chat                   hit rate  40.0%  prefill 48 of 80 tokens  "
                           "held 3 blocks = 3.22 GB (3.00 GiB)  evicted 0 blocks")
    plain = run_cache([turn1, turn2])
    assert plain.bytes_held is None
    assert plain.summary() == ("requests               hit rate  40.0%  prefill 48 of 80 tokens  "
                               "held 3 blocks  evicted 0 blocks")


def test_an_empty_run_has_a_zero_hit_rate():
    r = run_cache([])
    assert (r.requests, r.prompt_tokens, r.hit_rate, r.peak_blocks) == (0, 0, 0.0, 0)


def test_saved_bytes_of_the_shared_prompt():
    # [chains]: 26,214,400,000 B unshared - 262,144,000 B shared = 25,952,256,000 B saved
    s = prefix_sharing_savings(2000, 100, 131072)
    assert s.saved_bytes == 25_952_256_000
    assert (s.prompt_tokens, s.num_requests, s.block_size, s.bytes_per_token) == (2000, 100, 16, 131072)


def test_peak_blocks_is_the_largest_count_held():
    # block size 1, budget 3: [1, 2, 3] holds 3; [4] evicts one block (3 held); the peak is 3, never 4
    r = run_cache([Request((1, 2, 3)), Request((4,))], block_size=1, capacity_blocks=3)
    assert (r.peak_blocks, r.blocks_held, r.evicted_blocks, r.capacity_blocks) == (3, 3, 1, 3)
    # unbounded, block size 2: [1..6] is 3 blocks, then [7, 8] adds 1: the peak is the final 4
    r = run_cache([Request((1, 2, 3, 4, 5, 6)), Request((7, 8))], block_size=2)
    assert (r.peak_blocks, r.blocks_held, r.hit_blocks) == (4, 4, (0, 0))


def test_an_empty_tree_holds_no_sequence():
    # the root is no sequence: an empty cache, and one emptied by eviction, list nothing and count 0 blocks
    c = RadixCache(block_size=2, capacity_blocks=2)
    assert c.cached_sequences() == [] and c.count_blocks() == 0
    c.insert([1, 2, 3, 4])
    assert c.cached_sequences() == [(1, 2, 3, 4)]
    assert c.evict(5) == 2 and c.cached_sequences() == [] and c.num_blocks == 0


# --- the workloads have the shapes their descriptions give --------------------------------------------------------
def _common_prefix(seqs):
    first = seqs[0]
    n = min(len(s) for s in seqs)
    return next((i for i in range(n) if any(s[i] != first[i] for s in seqs)), n)


def test_few_shot_templates_are_100_plus_5_by_300_tokens():
    # "100 requests over 4 few-shot templates of 5 x 300-token examples" (after a 100-token header): 1,600 tokens
    requests = make_workload("few_shot", seed=2)
    groups = {}
    for r in requests:
        groups.setdefault(r.prompt[:1600], []).append(r.prompt)
    assert len(groups) == 4 and len(requests) == 100
    # the requests of one template share exactly its 1,600 tokens, then each asks its own question (20-80 tokens)
    assert all(_common_prefix(prompts) == 1600 for prompts in groups.values() if len(prompts) > 1)
    assert all(1600 + 20 <= len(r.prompt) <= 1600 + 80 and 10 <= len(r.output) <= 60 for r in requests)


def test_document_qa_asks_about_documents_by_popularity_one_over_rank():
    # 10 documents of 200 + 4,000 tokens; document k (k = 1..10) is asked with probability (1/k) / H_10,
    # H_10 = 1 + 1/2 + ... + 1/10 = 2.929: 34.1%, 17.1%, 11.4% ... 3.4%. Over 1,500 questions each share is
    # within 3 points (the largest standard error, of the first, is 1.2 points).
    requests = make_workload("document_qa", seed=4, num_requests=1500)
    groups = {}
    for r in requests:
        groups.setdefault(r.prompt[:8], []).append(r.prompt)   # 8 random tokens tell the documents apart
    assert len(groups) == 10
    assert all(_common_prefix(prompts[:5]) == 4200 for prompts in groups.values())
    h10 = sum(1 / k for k in range(1, 11))
    shares = sorted((len(prompts) / 1500 for prompts in groups.values()), reverse=True)
    assert shares == pytest.approx([1 / k / h10 for k in range(1, 11)], abs=0.03)


def test_multi_turn_chat_interleaves_turns_and_resends_each_history():
    # 20 conversations x 6 turns: request 20 t + c is turn t of conversation c; its prompt starts with the
    # previous turn's prompt and reply, and every conversation starts with one 500-token system prompt
    requests = make_workload("multi_turn_chat", seed=1)
    assert len(requests) == 120
    assert _common_prefix([requests[c].prompt for c in range(20)]) == 500
    for t in range(1, 6):
        for c in range(20):
            prev, cur = requests[20 * (t - 1) + c], requests[20 * t + c]
            assert cur.prompt[:len(prev.prompt) + len(prev.output)] == prev.prompt + prev.output
            assert 20 <= len(cur.prompt) - len(prev.prompt) - len(prev.output) <= 150


def test_tokens_are_drawn_from_the_whole_vocabulary():
    tokens = {t for r in make_workload("shared_system_prompt", num_requests=2, vocab_size=3) for t in r.prompt}
    assert tokens == {0, 1, 2}
    requests = make_workload("shared_system_prompt", seed=3)
    assert len(requests) == 100 and _common_prefix([r.prompt for r in requests]) == 2000
    assert all(2000 + 20 <= len(r.prompt) <= 2000 + 200 and 50 <= len(r.output) <= 300 for r in requests)


def test_the_agent_workload_shape():
    # "one 20-step agent re-sending its growing history (1,000-token system prompt)": 20 requests, each with its
    # action (50-150 tokens) as output; between two steps the history grows by the action and one observation
    # (200-600 tokens)
    steps = make_workload("agent", seed=5)
    assert len(steps) == 20
    assert all(50 <= len(s.output) <= 150 for s in steps)
    assert all(200 <= len(b.prompt) - len(a.prompt) - len(a.output) <= 600 for a, b in zip(steps, steps[1:]))
    # with 1-token observations the first prompt is the system prompt and one token
    assert len(make_workload("agent", observation_tokens=(1, 1))[0].prompt) == 1000 + 1


def _leaf(cache, first_token):
    return next(node for block, node in cache.root.children.items() if block[0] == first_token)


def test_evict_skips_protected_leaves_and_keeps_them_for_later():
    c = RadixCache(block_size=1)
    c.insert([1, 2])        # leaf a, used first
    c.insert([3, 4])        # leaf b
    a = _leaf(c, 1)
    # a is the least recently used, but protected: the block comes from b's end
    assert c.evict(1, protect=[a]) == 1
    assert c.cached_sequences() == [(1, 2), (3,)]
    # unprotected again, a goes next (it is still the least recently used); two evictions, 2 blocks in all
    assert c.evict(1) == 1 and c.cached_sequences() == [(1,), (3,)]
    assert (c.evicted_blocks, c.num_blocks) == (2, 2)


def test_evict_takes_only_what_is_asked_across_leaves():
    # leaf a holds 1 block, leaf b 5; asked for 3, eviction empties a (1) and takes 2 from b's end, leaving 3
    c = RadixCache(block_size=1)
    c.insert([1])
    c.insert([5, 6, 7, 8, 9])
    assert c.evict(3) == 3
    assert c.cached_sequences() == [(5, 6, 7)] and c.num_blocks == 3 == c.count_blocks()


def test_simulate_passes_its_settings_on():
    # 32-token blocks: the 2,000-token system prompt holds 62 full blocks (1,984 tokens)
    r = simulate_prefix_cache("shared_system_prompt", block_size=32)
    assert (r.workload, r.block_size, r.hit_blocks[1]) == ("shared_system_prompt", 32, 62)
    assert simulate_prefix_cache("agent", steps=3).requests == 3
    assert simulate_prefix_cache("few_shot") == simulate_prefix_cache("few_shot", seed=0)
    five = simulate_prefix_cache("few_shot", seed=5)
    assert five.hit_blocks == run_cache(make_workload("few_shot", 5)).hit_blocks
    assert five.prompt_tokens != simulate_prefix_cache("few_shot", seed=0).prompt_tokens


def test_the_document_qa_workload_shape():
    requests = make_workload("document_qa", seed=6)
    assert len(requests) == 100
    # each question (10-60 tokens) follows its 4,200-token document; each answer is 50-200 tokens
    assert all(4200 + 10 <= len(r.prompt) <= 4200 + 60 and 50 <= len(r.output) <= 200 for r in requests)


def test_workload_tokens_are_llama_3_ids_drawn_from_the_seed():
    # the default vocabulary is Llama 3's 128,256 ids; the system prompt is the seed's first 2,000 draws
    # (random.Random(seed).choices over range(vocab)), and the default seed is 0
    expected = tuple(random.Random(0).choices(range(128_256), k=2000))
    assert make_workload("shared_system_prompt")[0].prompt[:2000] == expected


def test_chained_cache_defaults_and_counts_only_new_blocks():
    c = ChainedHashCache()
    assert c.block_size == 16
    c = ChainedHashCache(block_size=4)
    # 10 tokens: 2 full blocks, both new; 13 tokens: 3 full blocks, 1 new
    assert c.insert(list(range(10))) == 2 and c.insert(list(range(13))) == 1 and len(c.keys) == 3
    with pytest.raises(PrefixCacheError) as info:
        block_hashes([1], 0)
    assert str(info.value) == "block_size must be at least 1, got 0"


def test_radix_defaults_and_a_tie_in_recency():
    assert (RadixCache().block_size, RadixCache().capacity_blocks) == (16, None)
    # [1, 9] diverges inside the edge [1, 2, 3]: the edge is cut after (1); its tail (2, 3) and the new leaf (9)
    # were both used by that insert. A tie in recency goes to the leaf queued first, the tail, so [5] takes (3)
    c = RadixCache(block_size=1, capacity_blocks=4)
    c.insert([1, 2, 3])
    c.insert([1, 9])
    c.insert([5])
    assert c.cached_sequences() == [(1, 2), (1, 9), (5,)]


def test_inserting_a_cached_sequence_again_marks_it_used():
    c = RadixCache(block_size=1, capacity_blocks=4)
    c.insert([1, 2])
    c.insert([3, 4])
    assert c.insert([1, 2]) == 0          # nothing new, but [1, 2] is now the more recently used
    c.insert([5, 6])                      # 2 blocks over: [3, 4] goes
    assert c.cached_sequences() == [(1, 2), (5, 6)]


def test_a_cached_prefix_adds_nothing_and_its_edge_stays_whole():
    # [1, 2] is a prefix of the cached [1, 2, 3]: nothing is added, and matching [1, 2] later uses the whole
    # cached edge, so when [8] needs room the older leaf [7] goes, not the tail (3)
    c = RadixCache(block_size=1, capacity_blocks=4)
    c.insert([1, 2, 3])
    assert c.insert([1, 2]) == 0
    c.insert([7])
    assert c.match([1, 2]) == 2
    c.insert([8])
    assert c.cached_sequences() == [(1, 2, 3), (8,)]


# --- vLLM's cap: a hit never covers the whole prompt (get_computed_blocks: num_tokens - 1) ------
def test_cache_hit_tokens_by_hand():
    from kvlib.prefix_cache import cache_hit_tokens
    # 3,000 tokens, 2,900 cached: 181 full 16-token blocks = 2,896; token-granular 2,900 (the 30x case)
    assert cache_hit_tokens(3000, 2900) == 181 * 16 == 2896
    assert cache_hit_tokens(3000, 2900, block_size=1) == 2900
    # a 2,000-token prompt cached in full: the cap is 1,999 tokens, 124 blocks; one block (16 tokens) is recomputed
    assert cache_hit_tokens(2000, 2000) == 124 * 16 == 1984
    assert cache_hit_tokens(2000, 2000, block_size=1) == 1999
    assert cache_hit_tokens(2001, 2000) == 2000            # one more token after it: every block hits
    assert cache_hit_tokens(1, 1) == 0 and cache_hit_tokens(17, 0) == 0


def test_cache_hit_tokens_bad_input():
    from kvlib.prefix_cache import cache_hit_tokens
    with pytest.raises(PrefixCacheError, match="cached_tokens must be at least 0, got -1"):
        cache_hit_tokens(10, -1)
    with pytest.raises(PrefixCacheError, match="prompt_tokens must be at least 1, got 0"):
        cache_hit_tokens(0, 0)


def test_run_cache_recomputes_the_last_block_of_a_repeated_prompt():
    # the same 32-token prompt twice, 16-token blocks: the second hits 1 block, not 2, and prefills 16 tokens
    again = Request(tuple(range(32)))
    r = run_cache([again, again], block_size=16)
    assert r.hit_blocks == (0, 1) and r.prefill_tokens_with_cache == 32 + 16
    # with one token more the whole 32 are served
    assert run_cache([again, Request(again.prompt + (99,))], block_size=16).hit_blocks == (0, 2)


def test_agent_requests_are_the_loop():
    from kvlib.prefix_cache import agent_requests
    # step 1: system 0-3, observation 4-6, action 7-8; step 2 re-sends all that, observation 9-11, action 12-13
    first, second = agent_requests(4, 3, 2, 2)
    assert first.prompt == (0, 1, 2, 3, 4, 5, 6) and tuple(first.output) == (7, 8)
    assert second.prompt == tuple(range(12)) and tuple(second.output) == (12, 13)
