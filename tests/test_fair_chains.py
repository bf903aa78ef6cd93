"""Fair chains: one slip in an earlier step costs that step only, on every path and in every case.

A step that builds on an earlier one (``Exercise.builds_on``) is right when it matches kvlib's value or the
value the learner's own earlier answers imply. For every such chain of every chapter's checks (found in
``autograder/checks/chNN.py``, never listed here), the learner makes one slip in the earlier step (each
catalogued slip of its ``quantity``, from ``kvcoach.slips`` through its ``slip_inputs``, and two that no
catalogue names: a wrong constant factor and a fixed number), and each later step either reuses that answer
(the source's solution, calling the learner's earlier function by its name) or recomputes it by itself (the
same solution with the right earlier function of its own). Then:

* in the notebook's check (``check``, as the test cells call it): the earlier step's visible check fails
  (and its test cell stops there, so its hidden check never runs), and each later step passes, visible then
  hidden, and on the hidden cases of another seed; and again with the earlier check never run;
* in the grader outside (``autograder.verdict``'s judging of records, JSON both ways): the earlier step fails
  and each later step passes, with the hidden cases of several grading seeds.

The learners are built from the source notebook's own solution cells (the reference), the slipped values
from kvlib's catalogue; what is right or wrong is decided here, from those, never by the checks under test.
In-process; about 12 s of CPU (15-25 s on two busy cores). ``test_ch07_q1_without_its_factor_2_by_hand``
works the issue's own case by hand.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import types
from pathlib import Path

import pytest

from autograder import verdict as V
from autograder.checks import chapter_exercises, runner, schema
from chapter_checks import slipped_learners, source_points
from test_seed_sweep import answer_namespace

REPO = Path(__file__).resolve().parents[1]
CHECKS = REPO / "autograder" / "checks"
#: Grading seeds for the outside check's hidden cases (the class secret draws one; any must do).
SEEDS = (0, 7, 2026)
#: The other seed of a notebook's hidden check, one its earlier step never ran.
OTHER_SEED = 11
#: Slips no catalogue names: (name, the learner's earlier answer from the right one).
UNCATALOGUED = (("wrong constant factor (x 3)", lambda right: right * 3),
                ("a fixed number (123,457)", lambda right: 123_457 if type(right) is int else 123_457.0))


def _chapters() -> dict:
    """``{checks module: its chapter's source notebook}`` of every checks module ``chNN.py`` that has one."""
    out = {}
    for path in sorted(CHECKS.glob("ch[0-9]*.py")):
        found = sorted((REPO / "course" / "source").glob(f"{path.stem}_*/{path.stem}_*.ipynb"))
        if found:
            out[path.stem] = found[0]
    return out


def _chains() -> list:
    """``[(source notebook, earlier grade id, (later grade ids...))]``: every builds_on chain of every chapter."""
    out = []
    for chapter, source in _chapters().items():
        exercises = chapter_exercises(chapter)
        for gid in exercises:
            later = tuple(x for x, ex in exercises.items() if ex.builds_on == gid)
            if later:
                out.append((source, gid, later))
    return out


CHAINS = _chains()


def test_chains_are_found():
    """The sweep below is not vacuous: the chapters' checks hold chains (ch07's today)."""
    assert CHAINS, "no builds_on chain found in autograder/checks/"
    for source, gid, later in CHAINS:
        assert later and all(source_points(source.stem)[x] > 0 for x in later + (gid,))


# --- the learners -------------------------------------------------------------------------------------------
def _key(args) -> str:
    return json.dumps(args, sort_keys=True, default=repr)


def _cases(ex, seeds) -> list:
    """The exercise's visible cases and its hidden ones under the checks' default seed and ``seeds``."""
    out = list(ex.cases())
    for seed in (schema.DEFAULT_HIDDEN_SEED, *seeds):
        out += ex.cases(True, seed)
    return out


def _slipped(ex, right_fn, seeds) -> dict:
    """``{slip: the learner's earlier function}``: each makes that one slip on every case where it applies
    (its value from kvlib's catalogue), and answers as the reference does elsewhere."""
    cases = _cases(ex, seeds)
    right = {_key(ex.call_args(c)): right_fn(*ex.call_args(c)) for c in cases}
    tables = {}
    if ex.quantity:
        for slip, answers in slipped_learners(ex, cases).items():
            tables[slip] = {_key(ex.call_args(c)): a for c, a in zip(cases, answers)}
    for name, make in UNCATALOGUED if all(type(v) in (int, float) for v in right.values()) else ():
        tables[name] = {k: make(v) for k, v in right.items()}
    learners = {}
    for slip, table in tables.items():
        if all(table[k] == right[k] for k in right):
            continue        # the slip changes nothing on these cases: not a slip here
        learners[slip] = _answering(table, ex.function_name)
    return learners


def _answering(table: dict, name: str):
    def learner(*args):
        return table[_key(list(args))]
    learner.__name__ = name
    return learner


def _renamed(code: types.CodeType, name: str, instead: str) -> types.CodeType:
    """``code`` with every global ``name`` it (or a function nested in it) reads renamed ``instead``."""
    consts = tuple(_renamed(c, name, instead) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_names=tuple(instead if n == name else n for n in code.co_names), co_consts=consts)


def _later_functions(namespace: dict, earlier_name: str, slipped, later_name: str) -> dict:
    """The learner's later function in a notebook whose earlier function is ``slipped``: ``reused`` calls it
    (the source's solution as written), ``recomputed`` calls a right one of its own instead."""
    mine = dict(namespace, **{earlier_name: slipped, "_own_" + earlier_name: namespace[earlier_name]})
    ref = namespace[later_name]
    reused = types.FunctionType(ref.__code__, mine, ref.__name__, ref.__defaults__, ref.__closure__)
    recomputed = types.FunctionType(_renamed(ref.__code__, earlier_name, "_own_" + earlier_name), mine,
                                    ref.__name__, ref.__defaults__, ref.__closure__)
    return {"reused": reused, "recomputed": recomputed}


def _setup(source: Path, gid: str):
    exercises = chapter_exercises(source.stem)
    namespace = answer_namespace(source, exercises)
    earlier = exercises[gid]
    slipped = _slipped(earlier, namespace[earlier.function_name], SEEDS + (OTHER_SEED,))
    assert slipped, f"{gid}: no slip to make"
    return exercises, namespace, earlier, slipped


def _passes(ex, fn, **kwargs) -> str | None:
    """None when ``check`` passes, else its message (its ✓ line is swallowed)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runner.check(ex, fn, **kwargs)
    except AssertionError as exc:
        return str(exc)
    return None


@pytest.fixture(autouse=True)
def _nothing_on_record():
    runner._ANSWERS.clear()
    yield
    runner._ANSWERS.clear()


# --- the notebook's check ----------------------------------------------------------------------------------
@pytest.mark.parametrize("source, gid, later", CHAINS, ids=[c[1] for c in CHAINS])
def test_in_the_notebook_only_the_slipped_step_loses_points(source, gid, later):
    exercises, namespace, earlier, slipped = _setup(source, gid)
    wrong = []
    for slip, fn in slipped.items():
        learners = {x: _later_functions(namespace, earlier.function_name, fn, exercises[x].function_name)
                    for x in later}
        for order in ("earlier step checked", "earlier step never checked"):
            runner._ANSWERS.clear()
            if order == "earlier step checked":
                # the test cell: the visible check, then (only if it passed) the hidden one
                lost = _passes(earlier, fn) is not None or _passes(earlier, fn, hidden=True) is not None
                if not lost:
                    wrong.append((slip, gid, "the slipped step kept its points"))
            for x, ways in learners.items():
                if order == "earlier step checked":
                    # no globals to find the earlier function in: the one the earlier check was given is used
                    ways = dict(ways, **{"reused, through functools.partial": functools.partial(ways["reused"])})
                for how, later_fn in ways.items():
                    for kwargs in ({}, {"hidden": True}, {"hidden": True, "seed": OTHER_SEED}):
                        message = _passes(exercises[x], later_fn, **kwargs)
                        if message is not None:
                            wrong.append((slip, order, x, how, kwargs, message[:300]))
    assert not wrong, f"{len(wrong)} wrong:\n" + "\n".join(map(str, wrong[:8]))


# --- the grader outside ------------------------------------------------------------------------------------
def _records(ex, fn, cases) -> list:
    """What the grader's runner reports for ``fn`` on ``cases``, read back as JSON."""
    return json.loads(json.dumps(runner.run_cases(ex, fn, cases, quiet=True)))


@pytest.mark.parametrize("source, gid, later", CHAINS, ids=[c[1] for c in CHAINS])
def test_in_the_grader_only_the_slipped_step_loses_points(source, gid, later):
    exercises, namespace, earlier, slipped = _setup(source, gid)
    right = namespace[earlier.function_name]
    wrong = []
    for seed in SEEDS:
        mine = {x: (list(exercises[x].cases()) + list(exercises[x].cases(True, seed)), len(exercises[x].cases()))
                for x in (gid, *later)}
        cases, visible = mine[gid]
        for slip, fn in slipped.items():
            judged, given = V._judge_exercise(earlier, gid, 1.0, cases, visible, _records(earlier, fn, cases))
            differs = any(fn(*earlier.call_args(c)) != right(*earlier.call_args(c)) for c in cases)
            if judged.passed == differs:
                wrong.append((slip, seed, gid, "passed" if judged.passed else "failed", judged.feedback[:200]))
            for x in later:
                ex, (x_cases, x_visible) = exercises[x], mine[x]
                for how, later_fn in _later_functions(namespace, earlier.function_name, fn,
                                                      ex.function_name).items():
                    result, _ = V._judge_exercise(ex, x, 2.0, x_cases, x_visible, _records(ex, later_fn, x_cases),
                                                  given)
                    if not result.passed:
                        wrong.append((slip, seed, x, how, result.feedback[:300]))
    assert not wrong, f"{len(wrong)} wrong:\n" + "\n".join(map(str, wrong[:8]))


# --- a chain is no way round a step ------------------------------------------------------------------------
@pytest.mark.parametrize("source, gid, later", CHAINS, ids=[c[1] for c in CHAINS])
def test_an_earlier_answer_that_leaves_nothing_to_count_earns_nothing(source, gid, later):
    """An earlier answer so large that nothing fits (10**30 bytes a sequence: every count built on it is 0) and
    later steps that return 0 everywhere: on the chain each is "right", but a constant 0 shows none of the
    step's arithmetic, so no later step is passed, in the notebook or in the grader."""
    def huge(*args):
        return 10**30

    def nothing(*args):
        return 0

    exercises = chapter_exercises(source.stem)
    _passes(exercises[gid], huge)
    cases = list(exercises[gid].cases()) + list(exercises[gid].cases(True, SEEDS[0]))
    _, given = V._judge_exercise(exercises[gid], gid, 1.0, cases, len(exercises[gid].cases()),
                                 _records(exercises[gid], huge, cases))
    for x in later:
        ex = exercises[x]
        assert _passes(ex, nothing) is not None and _passes(ex, nothing, hidden=True) is not None, x
        x_cases = list(ex.cases()) + list(ex.cases(True, SEEDS[0]))
        judged, _ = V._judge_exercise(ex, x, 2.0, x_cases, len(ex.cases()), _records(ex, nothing, x_cases), given)
        assert not judged.passed, judged.feedback


# --- the issue's own case, by hand -------------------------------------------------------------------------
def test_ch07_q1_without_its_factor_2_by_hand():
    """Chapter 07 with Question 1's factor 2 for K and V left out, every later step the source's solution.

    Qwen2.5 32B (64 layers, 8 KV heads of 128, bf16) at 16,384 tokens, TP 8, on an A100-80GB (84,986,665,370 B
    as CUDA reports it, utilization 0.92, 65,527,752,704 B of weights, 3 GB of overhead):
    one sequence per GPU is 2 x 64 x 1 x 128 x 2 x 16,384 = 536,870,912 B; without the 2, 268,435,456 B.
    The pool: ceil(84,986,665,370 x 0.92) = 78,187,732,141 B, less 65,527,752,704 / 8 = 8,190,969,088 B of
    weights and 3,000,000,000 B: 66,996,763,053 B, which holds 124 sequences (249 of the half-size ones).
    The notebook's test cells and the grader each give 11 of 12 points (Question 1's 1 lost: 9 points for
    Questions 1-5, 2 for Exercise 6's TTFT and 1 for Exercise 7's requests in flight, which build on none), and a
    wrong Question 2 is told both values it would have taken.
    """
    source = _chapters()["ch07"]
    exercises = chapter_exercises("ch07")
    points = source_points(source.stem)
    namespace = answer_namespace(source, exercises)

    def q1_half(layers, kv_heads, head_dim, dtype_bytes, context, tp):
        return layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * context

    assert q1_half(64, 8, 128, 2, 16384, 8) == 268_435_456
    namespace["kv_per_sequence_per_gpu"] = q1_half
    learner = {gid: types.FunctionType(namespace[ex.function_name].__code__, namespace)
               for gid, ex in exercises.items()}
    learner["ch07_q1_kv_per_sequence_per_gpu"] = q1_half
    # the notebook: each test cell stops at its first failing check
    score = sum(points[gid] for gid, ex in exercises.items()
                if _passes(ex, learner[gid]) is None and _passes(ex, learner[gid], hidden=True) is None)
    assert (score, sum(points.values())) == (11, 12)
    # the grader outside, on the records of a grading seed
    given, score = {}, 0
    for gid, ex in exercises.items():
        cases = list(ex.cases()) + list(ex.cases(True, 2026))
        judged, given[gid] = V._judge_exercise(ex, gid, points[gid], cases, len(ex.cases()),
                                               _records(ex, learner[gid], cases), given.get(ex.builds_on))
        score += judged.points
    assert score == 11
    # a Question 2 that is wrong on either basis (one sequence too many) is told both values, by hand
    q2 = exercises["ch07_q2_sequences_by_memory"]
    message = _passes(q2, lambda *args: learner[q2.grade_id](*args) + 1)
    assert ("returned 250; expected 249 sequences on what your kv_per_sequence_per_gpu gives here (268,435,456 "
            "bytes), or 124 on the right kv_per_sequence_per_gpu.") in message, message
    # a slip of Question 2's own (no utilization cap: 84,986,665,370 - 8,190,969,088 - 3,000,000,000 =
    # 73,795,696,282 B) is named as this step's, on the learner's Question 1 (274 of its sequences) or on a
    # right one recomputed (137), never as Question 1's slip carried along
    def q2_no_cap(q1):
        def sequences_by_memory(gpu_memory_bytes, utilization, weight_bytes, overhead_bytes, layers, kv_heads,
                                head_dim, dtype_bytes, context, tp):
            pool = gpu_memory_bytes - -(-weight_bytes // tp) - overhead_bytes
            return pool // q1(layers, kv_heads, head_dim, dtype_bytes, context, tp)
        return sequences_by_memory

    def right_q1(layers, kv_heads, head_dim, dtype_bytes, context, tp):
        return 2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * context

    from kvcoach import slips
    for q1, returned in ((q1_half, 274), (right_q1, 137)):
        message = _passes(q2, q2_no_cap(q1))
        assert f"returned {returned}; expected" in message and "utilization cap (0.92) is missing" in message, message
        hidden = _passes(q2, q2_no_cap(q1), hidden=True)
        assert slips.general("no_utilization") in hidden, hidden
        for other in ("missing_kv_factor", "total_not_per_gpu"):     # Question 1's slip, and what it looks like
            assert slips.general(other) not in hidden, hidden
        assert "factor 2 for K and V" not in message and "its own KV heads" not in message, message
