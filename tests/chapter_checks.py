"""What every tests/test_checks_chNN.py needs: a failing check's message, and the points the
source notebook states (once, on its test cells)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder import notebook
from autograder.checks import check

REPO = Path(__file__).resolve().parents[1]


def fails(grade_id: str, fn, **kwargs) -> str:
    """The message of ``check(grade_id, fn)``, which must fail."""
    with pytest.raises(AssertionError) as info:
        check(grade_id, fn, **kwargs)
    return str(info.value)


def passes_visible_and_hidden(grade_id: str, fn, seeds, capsys, *, default_seed: bool = False) -> None:
    """A chapter's reference ``fn`` passes its test cell's check: ``check(grade_id, fn)`` on the visible cases,
    then on the hidden cases of each of ``seeds`` (and of the course's grading seed when ``default_seed``),
    each check printing its one ✓ line and nothing else (every chapter's ``test_reference_passes_visible_and_hidden``)."""
    check(grade_id, fn)
    hidden_seeds = [*seeds, *([None] if default_seed else [])]
    for seed in hidden_seeds:
        check(grade_id, fn, hidden=True, seed=seed)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 + len(hidden_seeds) and all(line.startswith("✓") for line in lines), lines


def source_points(chapter: str) -> dict:
    """``{grade_id: points}`` of the chapter's test cells, read from its source notebook."""
    return notebook.grade_points(notebook.read(REPO / "course" / "source" / chapter / f"{chapter}.ipynb"))


# --- slips through the shared mechanism ([diagnosis]): every chapter's tests call these -------------------
def _learner(values):
    """A learner's function that returns ``values`` in turn, one per case (the cases are called in order)."""
    it = iter(values)

    def answer(*_args):
        return next(it)
    return answer


def _variant_table(ex, case):
    from autograder.checks import judge
    from kvcoach import slips
    inputs = judge.slip_inputs_for(ex, case)
    return slips.variants(ex.quantity, unit=ex.unit, **inputs)


def _run(ex, values, cases, hidden=False):
    """Run the slipped learner on ``cases`` through the checks' own pipeline: (summary, records, verdicts)."""
    from autograder.checks import diagnosis, judge, runner
    records = runner.run_cases(ex, _learner(values), cases, quiet=True)
    results = judge.verdicts(ex, cases, records, hidden=hidden)
    return diagnosis.summary(ex, cases, results, hidden=hidden, records=records), records, results


def _as_answer(ex, value, expected):
    """The slipped value as the learner's code would return it: an int where the exercise asks for one."""
    if type(expected) is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if type(expected) is float and type(value) is int:
        return float(value)
    if type(expected) is bytes and isinstance(value, str):
        return bytes.fromhex(value)     # a key's slips are recomputed as hex text (ch05)
    return value


def slipped_learners(ex, cases):
    """``{variant key: answers per case}``: a learner making that one slip (the right answer where it does not apply)."""
    from kvcoach import slips
    tables = [_variant_table(ex, case) for case in cases]
    keys = list(dict.fromkeys(k for _, table in tables for k, _ in table))
    out = {}
    for key in keys:
        answers = []
        for (expected, table), case in zip(tables, cases):
            value = next((v for k, v in table if k == key), None)
            answers.append(_as_answer(ex, expected if value is None else value, ex.expected_for(case)))
        if any(not slips._close(a, e, 1e-9) for a, (e, _) in zip(answers, tables)):
            out[key] = answers
    return out


def offered_slips_contradicting_a_case(exercises, hidden_seed=None) -> list:
    """Every slip a check names (the lead or an alternative, "Or: ...") that some case rules out (should be []).

    For each numeric exercise, each catalogued slip variant is made by a learner (the slipped value on each
    case, the right one where the slip gives it); the check's summary is read back (``diagnosis.summary``:
    the slips its message names) and each named slip is recomputed on every case from
    ``kvcoach.slips.variants``: on a failing visible case one of its ways must give the learner's value, on a
    passing case one of those ways must give the right value (or not arise there). The lead is held to the
    passing cases too: no fallback names a slip they contradict ([diagnosis §1]). ``hidden_seed``: also the
    hidden cases of that seed, judged as hidden (there a lead may explain some failing cases only, when no one
    slip explains them all, but never one that a passing case contradicts).
    """
    bad = []
    for ex in exercises.values():
        if not ex.quantity or ex.value:
            continue
        bad += _contradicted(ex, ex.cases(), False)
        if hidden_seed is not None:
            bad += _contradicted(ex, ex.cases(True, hidden_seed), True)
    return bad


def partial_learners(ex, cases, learners=None) -> dict:
    """``{variant key: answers per case}``: a learner making that slip on one case only (the first where it
    changes the answer) and right on every other, of the slips that change two cases or more: on the others
    the slip is ruled out, so no check may name it (the fallback that once named a slip fitting only the
    failing cases named it)."""
    from kvcoach import slips
    learners = slipped_learners(ex, cases) if learners is None else learners
    out = {}
    for key, answers in learners.items():
        right = [_as_answer(ex, ex.expected_for(case), ex.expected_for(case)) for case in cases]
        differs = [c for c, (a, r) in enumerate(zip(answers, right)) if not slips._close(a, r, 1e-9)]
        if len(differs) >= 2:
            out[key] = [answers[c] if c == differs[0] else right[c] for c in range(len(cases))]
    return out


def _contradicted(ex, cases, hidden) -> list:
    from kvcoach import slips
    bad = []
    learners = slipped_learners(ex, cases)
    made = [(key, answers) for key, answers in learners.items()]
    made += [(f"{key} (on one case only)", answers) for key, answers in partial_learners(ex, cases, learners).items()]
    for key, answers in made:
        summary, records, results = _run(ex, answers, cases, hidden)
        if summary.message is None:
            continue
        named = summary.slips
        if len(named) > 1:
            assert "Or:" in summary.message, (ex.grade_id, key, summary.message)
        tables = [_variant_table(ex, case) for case in cases]
        tol = getattr(ex.answer, "rel_tol", 1e-6) or 1e-6
        for slip in named:
            ways = {k for t in tables for k, _ in t[1] if slips.base_key(k) == slip}
            for c, (verdict, answer, (expected, table)) in enumerate(zip(results, answers, tables)):
                given = [(k, v) for k, v in table if k in ways]
                if not verdict.ok:
                    if hidden:
                        continue
                    fits = any(slips._close(answer, v, tol) or slips._matches(answer, v, expected, tol)
                               for _, v in given)
                elif slip in slips.DESCRIPTIVE:     # off by one describes the answer: no case rules it out
                    continue
                else:
                    fits = ({k for k, _ in given} != ways
                            or any(slips._close(answer, v, tol) or slips._close(v, expected, tol) for _, v in given))
                if not fits:
                    bad.append((ex.grade_id, key, slip, cases[c]["label"], summary.message,
                                "hidden" if hidden else "visible"))
    return bad


GENERIC_ON_EVERY_CASE = ("off_by_one@more", "off_by_one@less", "seconds_for_ms", "ms_for_seconds",
                         "per_node_not_per_gpu", "per_gpu_not_per_node", "blocks_for_tokens", "tokens_for_blocks",
                         "bytes_for_tokens", "sequences_for_nodes", "gb_for_gib@up", "gb_for_gib@down",
                         "tb_for_tib@up", "kb_for_kib@down", "answer_in_kib", "answer_in_gb", "answer_in_tb",
                         # the other rounding of a count, where the quantity gives its unrounded figure
                         "floor_for_ceil", "round_for_ceil", "ceil_for_floor", "round_for_floor",
                         "floor_for_round", "ceil_for_round")


def generic_slips_unnamed(exercises) -> list:
    """Each generic slip, made on every visible case of each numeric exercise, that the check fails to name.

    The slipped answers come from the expected value alone (``kvcoach.slips.generic_slips``); the check must
    name a slip that reproduces them (the generic one, or the exercise's own slip with the same values).
    Returns (grade id, slip, message) for each one unnamed, and checks that each exercise met at least one.
    """
    bad, met = [], {}
    for ex in exercises.values():
        if not ex.quantity or ex.value:
            continue
        cases = ex.cases()
        if not isinstance(ex.expected_for(cases[0]), (int, float)):
            continue       # a tuple answer: its elements are judged together, not as one figure
        learners = slipped_learners(ex, cases)
        for key in GENERIC_ON_EVERY_CASE:
            answers = learners.get(key)
            if answers is None:
                continue       # not generic here (no unit or factor for it, or an own slip gives it)
            met[ex.grade_id] = met.get(ex.grade_id, 0) + 1
            summary, _, _ = _run(ex, answers, cases)
            if summary.message is None or not summary.slips:
                bad.append((ex.grade_id, key, summary.message))
    numeric = [gid for gid, ex in exercises.items() if ex.quantity and not ex.value
               and isinstance(ex.expected_for(ex.cases()[0]), (int, float))]
    bad += [(gid, "no generic slip met", None) for gid in numeric if gid not in met]
    return bad
