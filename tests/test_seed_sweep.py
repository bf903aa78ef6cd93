"""Right answers are right under every class seed: the sources' solutions against the hidden cases.

Grading draws each exercise's hidden cases from the class seed (``KV_COURSE_GRADING_SEED``). For
every exercise of every graded chapter, the solution written in the source notebook's answer cells
must pass the visible cases and the hidden cases of ``SEEDS`` seeds (the checks' default seed among
them), and the blank release must fail them. Value exercises (ch09's drills) have no hidden cases:
the learner's own problem is the case, so there the sweep runs over ``STUDENTS`` student ids instead.

In-process and fast: the solution functions come from exec'ing the setup imports and the answer
cells (``autograder.verdict.layout`` / ``answer_sources``, as the grader's runner does, but without
the sandbox), the cases from the exercises' own builders, and the judging from
``autograder.verdict._judge_exercise`` (the grader's; steps that build on an earlier one are judged
against the earlier answers). Each exercise's function runs once over all seeds' cases.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest

import course_chapters
from autograder import notebook
from autograder import verdict as V
from autograder.checks import answers, chapter_exercises, judge, runner, schema
from kvcoach import learner

REPO = Path(__file__).resolve().parents[1]
SEEDS = (schema.DEFAULT_HIDDEN_SEED,) + tuple(range(200))
STUDENTS = tuple(f"learner-{k}" for k in range(60)) + ("ada",)
GRADED = list(course_chapters.GRADED)


def answer_namespace(path: Path, exercises: dict, student: str | None = None) -> dict:
    """The names the notebook's setup imports and answer cells bind (a cell that raises binds what it
    bound before raising; its printing is dropped)."""
    nb = notebook.read(path)
    lay = V.layout(nb, exercises)
    sources = V.answer_sources(nb, lay.answer_ids)
    namespace: dict = {}
    env = {learner.GRADING_STUDENT_ENV: student} if student else {}
    with _env(env), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        exec(lay.prelude, namespace)    # noqa: S102 -- our own notebooks
        for gid in lay.answer_ids:
            for source in sources[gid]:
                with contextlib.suppress(Exception):
                    exec(source, namespace)   # noqa: S102
    return namespace


@contextlib.contextmanager
def _env(values: dict):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def judged_over_seeds(exercises: dict, namespace: dict, seeds, student: str = "ada") -> dict:
    """``{grade_id: {"visible": message or None, seed: message or None, ...}}`` for every function exercise
    (None: every case passed). The visible cases are judged once, the hidden ones per seed; a step that
    builds on an earlier one is judged against that step's answers to the same cases."""
    out: dict = {}
    answered: dict = {}     # (grade id, "visible" or seed) -> the learner's answers (for the steps built on it)
    for gid, ex in exercises.items():
        if ex.value:
            continue
        fn = namespace.get(ex.function_name)
        parts = [("visible", list(ex.cases(False, None, student)))]
        parts += [(seed, list(ex.cases(True, seed, student))) for seed in seeds]
        flat = [case for _, cases in parts for case in cases]
        if callable(fn):
            records = runner.run_cases(ex, fn, flat, quiet=True)
        else:
            records = [{"error": "NameError", "error_message": f"{ex.function_name} is not defined"}] * len(flat)
        at, out[gid] = 0, {}
        for key, cases in parts:
            mine = records[at:at + len(cases)]
            at += len(cases)
            hidden = key != "visible"
            earlier = answered.get((ex.builds_on, key)) if ex.builds_on else None
            results = judge.verdicts(ex, cases, mine, hidden=hidden, earlier=earlier)
            answered[gid, key] = runner.learner_answers(ex, mine)
            failing = [v.message for v in results if not v.ok]
            out[gid][key] = failing[0] if failing else (None if cases else "no cases")
    return out


def _source(assignment: str) -> Path:
    return REPO / "course" / "source" / assignment / f"{assignment}.ipynb"


def _release(assignment: str) -> Path:
    return REPO / "chapters" / f"{assignment}.ipynb"


@pytest.mark.parametrize("assignment", GRADED)
def test_the_solution_passes_every_seed(assignment):
    exercises = chapter_exercises(assignment)
    results = judged_over_seeds(exercises, answer_namespace(_source(assignment), exercises), SEEDS)
    failed = {gid: [(key, message) for key, message in runs.items() if message is not None]
              for gid, runs in results.items()}
    failed = {gid: runs for gid, runs in failed.items() if runs}
    assert not failed, "\n".join(f"{gid}: fails under {len(runs)} of {len(SEEDS)} seeds, e.g. {runs[0][0]}: "
                                 f"{runs[0][1][:200]}" for gid, runs in failed.items())


@pytest.mark.parametrize("assignment", GRADED)
def test_the_blank_release_fails_the_hidden_cases(assignment):
    exercises = chapter_exercises(assignment)
    results = judged_over_seeds(exercises, answer_namespace(_release(assignment), exercises), SEEDS[:3])
    passing = {gid: [key for key, message in runs.items() if message is None] for gid, runs in results.items()}
    assert not {gid: keys for gid, keys in passing.items() if keys}
    assert not [gid for gid, runs in results.items() if "no cases" in runs.values()]


def _value_exercises(assignment: str) -> dict:
    return {gid: ex for gid, ex in chapter_exercises(assignment).items() if ex.value}


VALUE_CHAPTERS = [a for a in GRADED if _value_exercises(a)]


@pytest.mark.parametrize("assignment", VALUE_CHAPTERS)
def test_value_exercises_right_for_every_student(assignment):
    """A drill's solution cell, run for each of STUDENTS, answers that learner's own problem; the blank
    release's does not."""
    exercises = _value_exercises(assignment)
    wrong = []
    for student in STUDENTS:
        for path, should_pass in ((_source(assignment), True), (_release(assignment), False)):
            if not should_pass and student != STUDENTS[0]:
                continue
            namespace = answer_namespace(path, chapter_exercises(assignment), student)
            for gid, ex in exercises.items():
                cases = ex.cases(False, None, student)
                record = answers.encode(namespace.get(ex.function_name))
                judged, _ = V._judge_exercise(ex, gid, 1.0, list(cases), len(cases), [record] * len(cases))
                if judged.passed != should_pass:
                    wrong.append((path.parent.name, student, gid, judged.feedback[:200]))
    assert not wrong, wrong[:5]
