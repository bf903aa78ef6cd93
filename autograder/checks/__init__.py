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

Adding a chapter ``chNN_slug``
------------------------------
1. Write ``course/source/chNN_slug/chNN_slug.ipynb``. Its first code cell (or
   the cell tagged ``setup``) is the setup: what it imports from the standard
   library, kvlib and the course's packages (``autograder.packages``) is
   imported again before the answers are judged outside the notebook. Per
   exercise: an answer cell (``solution``, grade id ``chNN_qN_answer``) and
   a locked test cell (``grade``, grade id ``chNN_qN_<name>``, its **points**:
   stated here only) calling ``check`` as above. A chapter without exercises
   sets the notebook metadata ``"kv_course": {"graded": false}``.
2. Write ``autograder/checks/chNN.py``: ``EXERCISES = exercises(Exercise(...), ...)``
   and nothing else but the constants and small builders it uses::

       from .answers import Float
       from .cases import geometry_case, geometry_hidden, bytes_per_token, geometry_slip_inputs
       from .schema import Exercise, exercises

       EXERCISES = exercises(
           Exercise(grade_id="ch02_q1_bytes_per_gpu", function_name="bytes_per_gpu",
                    params=("layers", "kv_heads", "head_dim", "dtype_bytes", "tp"),
                    visible_cases=(geometry_case("llama-3.3-70b", 2, "Llama 3.3 70B, TP 4", tp=4),),
                    hidden_cases=geometry_hidden(lambda rng, case: case["kwargs"].update(tp=rng.choice([2, 4, 8]))),
                    expected=lambda case: ...,            # from kvlib
                    quantity="kv_bytes_per_token_per_gpu",  # kvcoach.slips names the wrong answers
                    slip_inputs=geometry_slip_inputs),
       )

   ``answer=`` declares the type (``INT`` by default; ``Float(rel_tol=...)``,
   ``Choice((...))``, ``BYTES``, ``Tuple((...))``); ``modules=`` the modules
   an answer may import beyond the standard library and kvlib; ``builds_on=``
   an earlier step: a case is right on kvlib's value or on the one the
   learner's own earlier answer implies, so a slip costs its own step only
   (``schema``'s docstring; ``tests/test_fair_chains.py`` holds every chain to it).

   Cases: hidden cases only of the kinds the exercise text names, and every input variant they
   hold (a GPT-2 config, an explicit ``head_dim``, TP past the KV heads, dtype_bytes 1 and 4, a
   rounding edge) also visible, with numbers that keep the slips apart (not L = B). ``EDGES =
   {grade_id: ({"rule": ..., "visible": (case labels...)}, ...)}`` lists every boundary the text
   decides (a tie, a rounding direction, a tolerance, an "other") with the visible cases on it:
   exactly on the edge and one unit either side. ``tests/test_seed_sweep.py`` (the solution under
   200 seeds) and ``tests/test_case_variants.py`` (an ignored dtype/TP/head_dim fails a visible
   case; the listed edges exist) hold a new chapter to this without a line of test code.
3. ``./dev.sh build`` and ``./dev.sh test``: ``tests/test_exercises.py`` checks,
   for every chapter in ``course/source``, that test cells and exercises agree,
   and the build's ``--check`` refuses a test cell with no exercise. The build
   tags every test and code answer cell of the student release
   ``raises-exception`` (never by hand in the source), so Run All goes past a
   failing check and a blank value answer; a failing check
   shows "✗ <grade id>" and its message only (``failure.CheckFailed``), and a
   learner's own exception shows their frames, not the checker's.
4. Every letter a chapter writes in ``$...$`` (markdown, and the strings it hands
   to ``kvdisplay``) is a row of ``kvlib/notation.py`` with one meaning course-wide:
   use the table's letter, or add a row (``tests/test_notation.py`` fails otherwise).

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
