"""The chapters' graded exercises, as data, and the one check that grades them.

A test cell of a source notebook reads::

    from autograder.checks import check
    check("ch01_q2_kv_bytes_per_sequence", kv_bytes_for_sequence)
    ### BEGIN HIDDEN TESTS
    check("ch01_q2_kv_bytes_per_sequence", kv_bytes_for_sequence, hidden=True)
    ### END HIDDEN TESTS

``check(grade_id, fn)`` finds the exercise in the registry (``registry``: the
chapter module named by the grade id's prefix, ``autograder.checks.ch01``) and
runs the instant check of ``autograder.checks.runner``. The same exercise is judged again
outside the kernel by ``autograder.verdict``.

Modules: ``schema`` (the Exercise and its cases), ``runner`` (the instant
check, in the learner's kernel), ``judge`` (one case's ``CaseVerdict``),
``diagnosis`` (the one message across cases: ``fitting_slips``, ``summary``),
``registry`` (grade id -> exercise), ``answers`` (answer types and their JSON records), ``cases`` (shared
case builders), ``tripwires`` (no kvlib inside a graded function), ``chNN``
(one chapter's exercises: data only).

How to add a chapter (its source, its checks module, the lists that name it): the recipe in
``docs/contributing.md``; ``tests/test_chapter_recipe.py`` names any piece a chapter id lacks.

Value exercises (``Exercise(value=True, ...)``: the learner's answer is a
number bound to a name, judged against their own ``kvcoach.drills.student_problem``)
take the student id from ``current_student()``; ``claim_student(name)`` records
the id a notebook states (see ``kvcoach.learner``).

Checks modules outside the package (a test fixture) are found on
``$KV_COURSE_CHECKS_PATH`` (folders, ``os.pathsep``-separated).
"""

from __future__ import annotations

from kvcoach.learner import claim_student, current_student, my_question  # noqa: F401 -- a notebook's names

from .registry import CHECKS_PATH_ENV, chapter_exercises, chapter_module, chapter_of, exercise  # noqa: F401


def check(grade_id: str, fn, hidden: bool = False, seed: int | None = None) -> None:
    """The test cell's check: grade ``fn`` (a value exercise: the number) on ``grade_id`` (``runner.check``)."""
    __tracebackhide__ = True
    from . import runner
    runner.check(exercise(grade_id), fn, hidden=hidden, seed=seed)
