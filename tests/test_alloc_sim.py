"""kvlib.alloc_sim: hand-worked pools, invariants as properties, the paper's qualitative facts."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlib import formulas
import random
import statistics

from kvlib.alloc_sim import (
    POLICIES,
    WORKLOADS,
    Dist,
    SimError,
    Snapshot,
    Workload,
    allocator_waste,
    compare,
    expected_partial_block_waste,
    fixed,
    lognormal,
    partial_block_waste,
    simulate,
    trace_workload,
    uniform,
)

# --- pools worked by hand -----------------------------------------------------------
# Trace: A = 3 + 1 (final 4), B = 5 + 3 (final 8), C = 4 + 2 (final 6); 12 slots.
# A request admitted at step a holds prompt + k tokens in its k-th step (steps a .. a + output - 1).
HOLES = Workload("holes", trace=[(3, 1), (5, 3), (4, 2)], max_seq_len=12)


def test_oracle_first_fit_leaves_a_hole_worked_by_hand():
    r = simulate(HOLES, policy="oracle", capacity_tokens=12, trace=True)
    # step 0: A [0,4) holds 4 of 4, B [4,12) holds 6 of 8; C (6 slots) waits      tokens 10, reserv. 2, ext 0
    # step 1: A done, hole [0,4) too small for C; B holds 7 of 8                   tokens 7,  reserv. 1, ext 4
    # step 2: B holds 8 of 8                                                       tokens 8,  reserv. 0, ext 4
    # step 3: B done, C admitted at [0,6), holds 5 of 6; nobody waits              tokens 5,  reserv. 1, free 6
    assert r.window_steps == 4
    assert (r.token_slot_steps, r.reservation_slot_steps, r.internal_slot_steps) == (10 + 7 + 8 + 5, 2 + 1 + 0 + 1, 0)
    assert (r.external_slot_steps, r.free_slot_steps) == (0 + 4 + 4, 6)
    assert r.admitted_at_fill == 2
    assert r.makespan_steps == 3 + 2  # C admitted at step 3 with 2 output tokens
    assert [s.intervals for s in r.snapshots] == [((0, 4), (4, 8)), ((4, 8),), ((0, 6),)]


def test_paged_same_trace_worked_by_hand():
    r = simulate(HOLES, policy="paged", capacity_tokens=12, block_size=4)
    # 3 blocks of 4. step 0: A 4 tokens in 1 block, B 6 in 2 blocks; C needs ceil(5/4) = 2, waits
    #   tokens 10, allocated 12, internal 2
    # step 1: A freed its block; B 7 tokens in 2 blocks: internal 1; C still needs 2 > 1 free: external 4
    # step 2: B 8 tokens: internal 0, external 4
    # step 3: B done; C admitted, 5 tokens in 2 blocks: internal 3, free 4
    assert (r.token_slot_steps, r.internal_slot_steps, r.reservation_slot_steps) == (30, 2 + 1 + 0 + 3, 0)
    assert (r.external_slot_steps, r.free_slot_steps) == (8, 4)


def test_max_reservation_worked_by_hand():
    # A = 10 + 6 and B = 10 + 2 with max_seq_len 20 in 40 slots: both admitted at step 0 and nobody
    # waits, so the window is that one step (B finishing at step 2 does not extend it).
    # tokens 11 + 11; reserved for tokens to come 5 + 1; never used (20 - 16) + (20 - 12) = 4 + 8
    r = simulate(Workload("two", trace=[(10, 6), (10, 2)], max_seq_len=20), policy="max_reservation",
                 capacity_tokens=40)
    assert (r.window_steps, r.token_slot_steps, r.reservation_slot_steps, r.internal_slot_steps) == (1, 22, 6, 12)
    assert r.external_slot_steps + r.free_slot_steps == 0
    assert r.running_steps == 2 and r.mean_running == 2


def test_paged_preemption_worked_by_hand():
    # 2 blocks of 4; A = 3 + 4 (final 7), B = 3 + 3 (final 6). Step 0: each holds 4 tokens in 1 block.
    # Step 1: both need a second block; A (older) takes the last one, B -- the most recently admitted --
    # is preempted after 1 token and re-queued as 4 + 2 (needs 2 blocks). A runs to step 3 and is freed
    # at step 4, when B' is admitted; B' runs steps 4 and 5.
    w = Workload("preempt", trace=[(3, 4), (3, 3)], max_seq_len=8)
    r = simulate(w, policy="paged", capacity_tokens=8, block_size=4, trace=True)
    assert r.preemptions == 1
    assert r.recomputed_tokens == 3 + 1          # B's prompt and its one generated token
    assert r.tokens_generated == 4 + 3            # each output token counted once
    assert r.makespan_steps == 4 + 2
    # window: step 0 (admissions), steps 1-3 (B waits), step 4 (B' admitted)
    assert r.window_steps == 5
    assert r.token_slot_steps == 8 + 5 + 6 + 7 + 5
    assert r.internal_slot_steps == 0 + 3 + 2 + 1 + 3
    assert [s.step for s in r.snapshots] == [0, 1, 4]


def test_first_fit_uses_a_hole_that_fits_exactly():
    # A = 2 + 2 at [0, 4), B = 6 + 4 at [4, 14); C = 2 + 2 (4 slots) waits. A is freed at step 2 and
    # C takes its hole exactly, while B still runs; C finishes at step 4, with B.
    w = Workload("exact", trace=[(2, 2), (6, 4), (2, 2)], max_seq_len=14)
    r = simulate(w, policy="oracle", capacity_tokens=14, trace=True)
    assert [s.intervals for s in r.snapshots] == [((0, 4), (4, 10)), ((0, 4), (4, 10))]
    assert r.makespan_steps == 4


# --- invariants -----------------------------------------------------------------------
traces = st.lists(st.tuples(st.integers(1, 60), st.integers(1, 60)), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(traces, st.integers(128, 700), st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from(POLICIES))
def test_every_slot_is_accounted_for_and_nothing_exceeds_capacity(pairs, capacity, bs, policy):
    w = Workload("t", trace=pairs, max_seq_len=128)
    r = simulate(w, policy=policy, capacity_tokens=capacity, block_size=bs, trace=True)
    for s in r.snapshots:
        assert s.tokens + s.reservation + s.internal + s.external + s.free == capacity
        assert min(s.tokens, s.reservation, s.internal, s.external, s.free) >= 0
        assert s.tokens <= s.allocated <= capacity
        if policy == "paged":
            assert s.blocks_used + s.blocks_free == capacity // bs
            assert s.blocks_used == s.blocks_needed          # ceil(length / bs) per running sequence
            assert s.allocated == s.blocks_used * bs
        else:
            ends = [start + size for start, size in s.intervals]
            assert all(e <= nxt for e, (nxt, _) in zip(ends, s.intervals[1:]))  # no overlap
            assert not ends or max(ends) <= capacity
            assert sum(size for _, size in s.intervals) == s.allocated
    total = (r.token_slot_steps + r.reservation_slot_steps + r.internal_slot_steps
             + r.external_slot_steps + r.free_slot_steps)
    assert total == capacity * r.window_steps
    # conservation: every request finishes once and every output token is produced once
    clipped = w.requests()
    assert r.requests_finished == len(clipped)
    assert r.tokens_generated == sum(o for _, o in clipped)
    assert 0 <= r.token_share <= 1


@settings(max_examples=40, deadline=None)
@given(traces, st.integers(128, 500), st.integers(0, 400), st.sampled_from([1, 4, 16]))
def test_admitted_at_fill_is_monotone_in_memory(pairs, capacity, extra, bs):
    w = Workload("t", trace=pairs, max_seq_len=128)
    for policy in POLICIES:
        small = simulate(w, policy=policy, capacity_tokens=capacity, block_size=bs).admitted_at_fill
        large = simulate(w, policy=policy, capacity_tokens=capacity + extra, block_size=bs).admitted_at_fill
        assert small <= large


@settings(max_examples=40, deadline=None)
@given(traces, st.integers(128, 500))
def test_oracle_admits_at_least_as_many_as_max_reservation(pairs, capacity):
    # into an empty pool both pack in order; the oracle's reservations are never larger
    w = Workload("t", trace=pairs, max_seq_len=128)
    oracle = simulate(w, policy="oracle", capacity_tokens=capacity).admitted_at_fill
    maximum = simulate(w, policy="max_reservation", capacity_tokens=capacity).admitted_at_fill
    assert oracle >= maximum == min(len(pairs), capacity // 128)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from(POLICIES))
def test_deterministic_for_a_seed(seed, policy):
    w = Workload("small", lognormal(40, 1.0), uniform(1, 80), num_requests=40, max_seq_len=256)
    a = simulate(w, policy=policy, capacity_tokens=1024, seed=seed)
    b = simulate(w, policy=policy, capacity_tokens=1024, seed=seed)
    assert a == b
    assert w.requests(seed) == w.requests(seed)


def test_different_seeds_draw_different_requests():
    w = WORKLOADS["chat"]
    assert w.requests(0) != w.requests(1)


def test_lengths_are_clipped_to_max_seq_len():
    w = Workload("t", trace=[(5000, 10), (100, 5000), (10, 10)], max_seq_len=2048)
    assert w.requests() == ((2047, 1), (100, 1948), (10, 10))


# --- partial-block waste against the formula ----------------------------------------------
@given(st.integers(0, 10_000), st.integers(1, 512))
def test_expected_partial_block_waste_equals_the_closed_form(n, bs):
    assert expected_partial_block_waste(n, bs) == formulas.block_waste_tokens(n, bs)


def test_seed_000_block_waste():
    # [chains]: 200 sequences x 7.5 = 1,500 tokens at 16-token blocks; 200 x 127.5 = 25,500 at 256
    assert expected_partial_block_waste(200, 16) == 1500
    assert expected_partial_block_waste(200, 256) == 25500


@given(st.integers(1, 256))
def test_one_sequence_per_residue_wastes_bs_times_bs_minus_1_over_2(bs):
    lengths = [1000 + r for r in range(bs)]  # every residue modulo bs once
    assert partial_block_waste(lengths, bs) == bs * (bs - 1) // 2


@pytest.mark.parametrize("bs", [8, 16, 32])
def test_simulated_partial_blocks_match_the_formula(bs):
    # chat lengths are far longer than a block, so residues are close to uniform: the paged pool's
    # internal waste per running sequence should be near (bs - 1) / 2 (kvlib.formulas.block_waste_tokens)
    r = simulate(policy="paged", block_size=bs)
    per_seq = r.internal_slot_steps / r.running_steps
    assert per_seq == pytest.approx(formulas.block_waste_tokens(1, bs), rel=0.05)


# --- the default workload, qualitatively (figures are reported, not tuned) --------------------
def test_default_workload_orders_the_policies_as_the_paper_does():
    r = compare()
    maximum, oracle, paged = r["max_reservation"], r["oracle"], r["paged"]
    # [build-up] / Kwon et al.: pre-paging systems kept 20.4-38.2% of KV memory as tokens; paging wastes < 4%
    assert maximum.token_share < oracle.token_share < paged.token_share
    assert maximum.token_share < 0.5
    assert paged.waste_share < 0.04
    # internal fragmentation is the dominant term when max_seq_len is reserved ([build-up])
    assert maximum.internal_slot_steps > max(maximum.reservation_slot_steps, maximum.external_slot_steps)
    # the oracle has no internal waste; paging has no reservation
    assert oracle.internal_slot_steps == 0 and paged.reservation_slot_steps == 0
    # more memory as tokens means a bigger batch from the same pool
    assert maximum.mean_running < oracle.mean_running < paged.mean_running
    # max_seq_len 2,048 in 32,768 slots: exactly 16 reservations
    assert maximum.admitted_at_fill == 32_768 // 2048


def test_capacity_in_bytes():
    # 4 GiB of Llama 3.1 8B KV at 131,072 B per token is 32,768 token slots
    a = simulate(policy="oracle", capacity_bytes=4 * 2**30, bytes_per_token=131072)
    b = simulate(policy="oracle", capacity_tokens=32_768)
    assert a == b


# --- bad input: one-line errors naming the parameter ------------------------------------------
@pytest.mark.parametrize("kwargs, name", [
    (dict(policy="buddy"), "policy"),
    (dict(capacity_tokens=1000), "capacity_tokens"),      # below max_seq_len 2,048
    (dict(capacity_tokens=0), "capacity_tokens"),
    (dict(block_size=0), "block_size"),
    (dict(workload="nope"), "workload"),
    (dict(capacity_bytes=10**9), "bytes_per_token"),
])
def test_bad_input_names_the_parameter(kwargs, name):
    with pytest.raises(SimError, match=name) as info:
        simulate(**kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("pairs, name", [([(0, 5)], "prompt"), ([(5, -1)], "output"), ([(5,)], "trace")])
def test_bad_trace_names_the_entry(pairs, name):
    with pytest.raises(SimError, match=name):
        Workload("t", trace=pairs)


# --- more pools worked by hand -------------------------------------------------------------
def test_shares_and_summary_of_the_holes_pool():
    # the oracle over HOLES (above): 12 slots x 4 window steps = 48 slot-steps; tokens 30, reservation 4,
    # internal 0, external 8, free 6. Running: 2 at step 0, then 1 at steps 1, 2 and 3: 5 sequence-steps.
    r = simulate(HOLES, policy="oracle", capacity_tokens=12)
    assert (r.token_share, r.reservation_share, r.internal_share) == (30 / 48, 4 / 48, 0.0)
    assert (r.external_share, r.free_share, r.waste_share) == (8 / 48, 6 / 48, (4 + 8) / 48)
    assert r.token_share_of_allocated == 30 / (30 + 4)
    assert (r.running_steps, r.mean_running, r.peak_running) == (5, 5 / 4, 2)
    assert (r.policy, r.workload, r.capacity_tokens, r.block_size, r.num_requests) == ("oracle", "holes", 12, 1, 3)
    # 62.5% tokens, 4/48 = 8.3% reserved, 8/48 = 16.7% external, a batch of 1.25 (printed to one decimal)
    assert r.summary() == ("oracle           tokens  62.5%  reservation   8.3%  internal   0.0%  external  16.7%  "
                           "batch    1.2  admitted at fill 2")


def test_holes_snapshots_worked_by_hand():
    r = simulate(HOLES, policy="oracle", capacity_tokens=12, trace=True)
    # one snapshot per event step (0, 1 and 3; nothing happens at step 2), as in the comments of the test above
    assert r.snapshots == (
        Snapshot(step=0, running=2, waiting=1, tokens=10, reservation=2, internal=0, external=0, free=0, allocated=12,
                 intervals=((0, 4), (4, 8))),
        Snapshot(step=1, running=1, waiting=1, tokens=7, reservation=1, internal=0, external=4, free=0, allocated=8,
                 intervals=((4, 8),)),
        Snapshot(step=3, running=1, waiting=0, tokens=5, reservation=1, internal=0, external=0, free=6, allocated=6,
                 intervals=((0, 6),)),
    )


def test_paged_preemption_of_a_younger_sequence_worked_by_hand():
    # 2 blocks of 4. A = 3 + 3, B = 1 + 6, both admitted at step 0 with one block each (4 and 2 tokens).
    # Step 1: A (5 tokens) needs a second block; none is free, so B -- the most recently admitted, not A -- is
    # preempted after 1 token and re-queued as 2 + 5; A takes B's block. B' (3 tokens, 1 block) waits until A
    # is freed at step 3; B' grows to 2 blocks at step 5 (5 tokens) and is freed at step 3 + 5 = 8.
    w = Workload("younger", trace=[(3, 3), (1, 6)], max_seq_len=8)
    r = simulate(w, policy="paged", capacity_tokens=8, block_size=4, trace=True)
    assert (r.preemptions, r.recomputed_tokens, r.tokens_generated, r.requests_finished) == (1, 1 + 1, 3 + 6, 2)
    assert (r.makespan_steps, r.admitted_at_fill, r.peak_running, r.block_size) == (8, 2, 2, 4)
    # window: step 0 (admissions), steps 1-2 (B' waits), step 3 (B' admitted) = 4 steps
    # tokens 6 | 5 + 6 | 3 = 20; internal 8 - 6 | (8 - 5) + (8 - 6) | 4 - 3 = 8; free at step 3: 8 - 4 = 4
    assert (r.window_steps, r.token_slot_steps, r.internal_slot_steps) == (4, 20, 8)
    assert (r.external_slot_steps, r.free_slot_steps, r.running_steps) == (0, 4, 2 + 1 + 1 + 1)
    blocks = [(s.step, s.running, s.waiting, s.blocks_used, s.blocks_free, s.blocks_needed) for s in r.snapshots]
    assert blocks == [(0, 2, 0, 2, 0, 2), (1, 1, 1, 2, 0, 2), (3, 1, 0, 1, 1, 1), (5, 1, 0, 2, 0, 2)]
    assert [(s.tokens, s.internal, s.free, s.allocated) for s in r.snapshots] == [
        (6, 2, 0, 8), (5, 3, 0, 8), (3, 1, 4, 4), (5, 3, 0, 8)]


def test_a_paged_pool_exactly_one_sequence_long_is_enough():
    # max_seq_len 8 in blocks of 4 needs 2 blocks: 8 slots will do, 7 (1 block) will not
    w = Workload("one", trace=[(4, 4)], max_seq_len=8)
    assert simulate(w, policy="paged", capacity_tokens=8, block_size=4).requests_finished == 1
    with pytest.raises(SimError) as info:
        simulate(w, policy="paged", capacity_tokens=7, block_size=4)
    assert str(info.value) == "capacity_tokens (7) must hold one max_seq_len (8) sequence in blocks of 4"
    assert simulate(w, policy="oracle", capacity_tokens=8).requests_finished == 1
    with pytest.raises(SimError) as info:
        simulate(w, policy="oracle", capacity_tokens=7)
    assert str(info.value) == "capacity_tokens (7) must hold one max_seq_len (8) reservation"


# --- distributions ---------------------------------------------------------------------------------
def test_lognormal_median_is_mean_times_exp_of_minus_half_sigma_squared():
    # the chat workload's description: means 160 and 340 with sigma 1.0 give medians 160 e^-0.5 = 97.0 and
    # 340 e^-0.5 = 206.2; 20,001 samples put the sample median within 3% (its standard error is about 0.9%)
    rng = random.Random(1)
    for mean, median in [(160, 97.04), (340, 206.22)]:
        samples = [lognormal(mean, 1.0).sample(rng) for _ in range(20_001)]
        assert statistics.median(samples) == pytest.approx(median, rel=0.03)
    # sigma 0: every sample is the mean; a mean under 1 token still draws 1
    assert {lognormal(100, 0).sample(rng) for _ in range(5)} == {100}
    assert {lognormal(0.2, 0).sample(rng) for _ in range(5)} == {1}


def test_distributions_print_their_parameters():
    assert str(lognormal(160, 1.0)) == "lognormal(mean 160, sigma 1)"
    assert str(fixed(512)) == "fixed(512,)" and str(uniform(1, 512)) == "uniform(1, 512)"
    assert fixed(7).sample(random.Random(0)) == 7
    # uniform is inclusive at both ends
    assert {uniform(3, 4).sample(random.Random(s)) for s in range(40)} == {3, 4}


@pytest.mark.parametrize("call, message", [
    (lambda: fixed(0), "fixed length must be at least 1, got 0"),
    (lambda: fixed(2.5), "fixed length must be an integer, got 2.5"),
    (lambda: uniform(0, 5), "uniform low must be at least 1, got 0"),
    (lambda: uniform(5, 4), "uniform high must be at least 5, got 4"),
    (lambda: lognormal(0, 1.0), "lognormal mean must be a positive number, got 0"),
    (lambda: lognormal(True, 1.0), "lognormal mean must be a positive number, got True"),
    (lambda: lognormal("9", 1.0), "lognormal mean must be a positive number, got '9'"),
    (lambda: lognormal(10, -0.1), "lognormal sigma must be a number >= 0, got -0.1"),
    (lambda: lognormal(10, False), "lognormal sigma must be a number >= 0, got False"),
    (lambda: lognormal(10, "1"), "lognormal sigma must be a number >= 0, got '1'"),
    (lambda: Dist("pareto", (1,)), "distribution kind must be fixed, uniform or lognormal, got 'pareto'"),
    (lambda: Workload("t", trace=[(1, 1)], max_seq_len=1), "max_seq_len must be at least 2, got 1"),
    (lambda: Workload("t", trace=[(1, 1), (2, 3, 4)]), "trace[1] must be a (prompt, output) pair, got (2, 3, 4)"),
    (lambda: Workload("t", trace=[(1, 1), (0, 3)]), "trace[1] prompt must be at least 1, got 0"),
    (lambda: Workload("t", trace=[(1, 0)]), "trace[0] output must be at least 1, got 0"),
    (lambda: Workload("t", fixed(1)), "a workload needs prompt and output distributions (Dist) or a trace"),
    (lambda: Workload("t", output=fixed(1), prompt=(1,)),
     "a workload needs prompt and output distributions (Dist) or a trace"),
    (lambda: Workload("t", fixed(1), fixed(1), num_requests=0), "num_requests must be at least 1, got 0"),
    (lambda: simulate(capacity_tokens=4096, capacity_bytes=2**30, bytes_per_token=2),
     "give capacity_tokens or capacity_bytes (with bytes_per_token), not both"),
    (lambda: simulate(capacity_bytes=2**30), "capacity_bytes needs bytes_per_token"),
    (lambda: simulate(capacity_bytes=0, bytes_per_token=2), "capacity_bytes must be at least 1, got 0"),
    (lambda: simulate(capacity_bytes=2**30, bytes_per_token=0), "bytes_per_token must be at least 1, got 0"),
    (lambda: simulate(capacity_tokens=0), "capacity_tokens must be at least 1, got 0"),
    (lambda: simulate(block_size=0), "block_size must be at least 1, got 0"),
    (lambda: simulate(seed=1.5), "seed must be an integer, got 1.5"),
    # seeds are 64-bit signed integers: -2^63 = -9,223,372,036,854,775,808 is the lowest
    (lambda: simulate(seed=-(2**63) - 1), "seed must be at least -9223372036854775808, got -9223372036854775809"),
    (lambda: simulate(policy="buddy"), "policy must be one of max_reservation, oracle, paged, got 'buddy'"),
    (lambda: simulate("nope"), "workload must be one of chat, uniform, fixed, long, got 'nope'"),
    (lambda: simulate(42), "workload must be a name, a Workload or a list of (prompt, output) pairs, got 42"),
])
def test_bad_input_messages_in_full(call, message):
    with pytest.raises(SimError) as info:
        call()
    assert str(info.value) == message


def test_workload_forms_and_seeds():
    pairs = [(10, 5), (20, 3)]
    # a list of pairs is a trace, clipped to the default max_seq_len of 2,048
    assert simulate(pairs, policy="oracle", capacity_tokens=2048) == simulate(
        trace_workload(pairs), policy="oracle", capacity_tokens=2048)
    w = trace_workload(pairs)
    assert (w.name, w.max_seq_len, w.trace) == ("trace", 2048, ((10, 5), (20, 3)))
    assert trace_workload(pairs, max_seq_len=12, name="mine").requests() == ((10, 2), (11, 1))
    # the default workload is chat; a negative seed is a seed like any other
    assert simulate(policy="oracle") == simulate("chat", policy="oracle")
    assert simulate(policy="oracle", seed=-1).num_requests == 300
    assert simulate(policy="oracle", seed=-(2**63)).num_requests == 300


def test_compare_passes_every_setting_on():
    w = Workload("small", lognormal(40, 1.0), uniform(1, 80), num_requests=40, max_seq_len=256)
    got = compare(w, capacity_bytes=1024 * 131072, bytes_per_token=131072, block_size=8, seed=3)
    assert list(got) == ["max_reservation", "oracle", "paged"]
    for policy, r in got.items():
        assert r == simulate(w, policy=policy, capacity_tokens=1024, block_size=8, seed=3)
    assert got["paged"].block_size == 8 and got["oracle"].capacity_tokens == 1024


def test_partial_blocks_count_the_empty_slots_not_the_filled_ones():
    # 17 tokens in 16-token blocks: one full block and 1 token in the second, so 15 slots are empty
    assert partial_block_waste([17], 16) == 15 and partial_block_waste([16, 32], 16) == 0
    assert expected_partial_block_waste(0, 16) == 0
    for call, message in [(lambda: partial_block_waste([1], 0), "block_size must be at least 1, got 0"),
                          (lambda: expected_partial_block_waste(-1, 16), "num_seqs must be at least 0, got -1"),
                          (lambda: expected_partial_block_waste(1, 0), "block_size must be at least 1, got 0")]:
        with pytest.raises(SimError) as info:
            call()
        assert str(info.value) == message


def test_a_trace_is_kept_as_a_tuple_of_pairs():
    w = Workload("t", trace=[[3, 1], [5, 3]])
    assert w.trace == ((3, 1), (5, 3)) and hash(w) == hash(Workload("t", trace=((3, 1), (5, 3))))
    assert trace_workload([(1, 1)]).description == "a given trace"


def test_compare_in_token_slots():
    got = compare(HOLES, capacity_tokens=12, block_size=4)
    assert got["oracle"] == simulate(HOLES, policy="oracle", capacity_tokens=12)
    assert got["paged"] == simulate(HOLES, policy="paged", capacity_tokens=12, block_size=4)


def test_paged_preemption_after_a_finish_worked_by_hand():
    # 2 blocks of 4. X = 1 + 1 and A = 2 + 4 take a block each at step 0; C = 3 + 3 waits.
    # Step 1: X is freed (1 token generated), C is admitted into its block. Step 2: A (5 tokens) and C (5) both
    # need a second block; A, the older, asks first and none is free: C -- the most recently admitted -- is
    # preempted after 1 token, re-queued as 4 + 2, and A takes its block. Step 4: A is freed (4 tokens); C'
    # (5 tokens, 2 blocks) is admitted and freed at step 6 (2 tokens): 1 + 4 + 1 + 2 = 8 tokens generated
    w = Workload("after", trace=[(1, 1), (2, 4), (3, 3)], max_seq_len=8)
    r = simulate(w, policy="paged", capacity_tokens=8, block_size=4)
    assert (r.preemptions, r.recomputed_tokens, r.tokens_generated, r.makespan_steps) == (1, 3 + 1, 8, 6)
    # window: step 0 (C waits), 1 (C admitted), 2-3 (C' waits), 4 (C' admitted) = 5 steps
    # tokens 2 + 3 | 4 + 4 | 5 + 6 | 5 = 29; internal 3 | 0 | 3 + 2 | 3 = 11
    assert (r.window_steps, r.token_slot_steps, r.internal_slot_steps) == (5, 29, 11)


def test_two_preemptions_worked_by_hand():
    # 2 blocks of 4. A = 3 + 3 and B = 1 + 3 take a block each at step 0; C = 3 + 3 waits.
    # Step 1: A needs a second block: B (the younger) is preempted after 1 token, re-queued as 2 + 2.
    # Step 3: A is freed; B' (1 block) and C (1 block) are admitted. Step 4: C needs a second block, none is
    # free, and C is itself the most recently admitted: preempted after 1 token, re-queued as 4 + 2.
    # Step 5: B' is freed; C' takes 2 blocks and is freed at step 7.
    w = Workload("twice", trace=[(3, 3), (1, 3), (3, 3)], max_seq_len=8)
    r = simulate(w, policy="paged", capacity_tokens=8, block_size=4)
    assert (r.preemptions, r.recomputed_tokens, r.tokens_generated, r.makespan_steps) == (2, (1 + 1) + (3 + 1), 9, 7)


def test_seed_defaults_to_0():
    w = WORKLOADS["uniform"]
    assert w.requests() == w.requests(0)
    assert simulate("uniform", policy="oracle") == simulate("uniform", policy="oracle", seed=0)


def test_a_stale_event_does_not_hold_up_the_others_of_its_step():
    # 6 blocks of 2. A = 2 + 3 (2 blocks), B = 3 + 2 (2), C = 1 + 2 (1) all admitted at step 0: 5 blocks, 1 free.
    # Step 1: B grows into the free block; C, needing one too, is the youngest and preempts itself after 1 token
    # (re-queued as 2 + 1, needing 2 blocks; 1 is free: it waits). Step 2: B is freed (3 blocks), C's old finish
    # event is stale, and A (5 tokens) still takes its third block at step 2, before C' is admitted (2 blocks).
    #   step 0: tokens 3 + 4 + 2 = 9 in 10 slots: internal 1, free 2 (nobody waits)
    #   step 1: tokens 4 + 5 = 9 in 10 slots: internal 1, external 2 (C' waits)
    #   step 2: tokens 5 + 3 = 8 in 3 + 2 blocks = 10 slots: internal 2, free 2
    w = Workload("stale", trace=[(2, 3), (3, 2), (1, 2)], max_seq_len=8)
    r = simulate(w, policy="paged", capacity_tokens=12, block_size=2)
    assert (r.window_steps, r.token_slot_steps, r.internal_slot_steps) == (3, 26, 4)
    assert (r.external_slot_steps, r.free_slot_steps, r.preemptions, r.makespan_steps) == (2, 4, 1, 3)


def test_allocator_waste_is_the_simulators_first_step_in_closed_form():
    """ch04's exercise 5: (prompt, output) = (11, 6), (5, 3), (16, 2), max_seq_len 20, blocks of 4. At admission
    they hold 12, 6 and 17 tokens (35). Reserving max_seq_len wastes (20 - 12) + (20 - 6) + (20 - 17) = 25;
    the oracle (prompt + output) (17 - 12) + (8 - 6) + (18 - 17) = 8; paging the empty tail of each last block,
    0 + 2 + 3 = 5. The simulator's first step splits the pool the same way (reservation + internal)."""
    pairs = [(11, 6), (5, 3), (16, 2)]
    by_hand = {"max_reservation": 25, "oracle": 8, "paged": 5}
    for policy, waste in by_hand.items():
        assert allocator_waste(pairs, policy, 4, 20) == waste, policy
        first = simulate(trace_workload(pairs, max_seq_len=20), policy=policy, capacity_tokens=400, block_size=4,
                         trace=True).snapshots[0]
        assert (first.running, first.tokens, first.reservation + first.internal) == (3, 35, waste), policy
    # the keywords each change one rule: the first token not held yet, a whole empty block at a block boundary
    # (12 and 16 + 1 = 17: only 12 is a multiple of 4, 4 slots), reservations left out of the waste
    assert allocator_waste(pairs, "paged", 4, 20, held_extra=0) == 1 + 3 + 0
    assert allocator_waste(pairs, "paged", 4, 20, last_block="whole") == 4 + 2 + 3
    assert allocator_waste(pairs, "max_reservation", 4, 20, count_reservation=False) == 3 + 12 + 2
