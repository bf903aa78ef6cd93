"""kvlib.alloc_sim: hand-worked pools, invariants as properties, the paper's qualitative facts."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlib import formulas
from kvlib.alloc_sim import (
    POLICIES,
    WORKLOADS,
    SimError,
    Workload,
    compare,
    expected_partial_block_waste,
    lognormal,
    partial_block_waste,
    simulate,
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
    # seed 000: 200 sequences x 7.5 = 1,500 tokens at 16-token blocks; 200 x 127.5 = 25,500 at 256
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
    # seed 001 / Kwon et al.: pre-paging systems kept 20.4-38.2% of KV memory as tokens; paging wastes < 4%
    assert maximum.token_share < oracle.token_share < paged.token_share
    assert maximum.token_share < 0.5
    assert paged.waste_share < 0.04
    # internal fragmentation is the dominant term when max_seq_len is reserved (seed 001)
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
