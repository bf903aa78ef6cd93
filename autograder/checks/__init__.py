"""The chapters' graded exercises, as data, and the one check that grades them.

A test cell of a source notebook reads::

    from autograder.checks import check
    check("ch01_q2_kv_bytes_per_sequence", kv_bytes_for_sequence)
    ### BEGIN HIDDEN TESTS
    check("ch01_q2_kv_bytes_per_sequence", kv_bytes_for_sequence, hidden=True)
    ### END HIDDEN TESTS

``check(grade_id, fn)`` finds the exercise in the registry (the chapter module
named by the grade id's prefix, ``autograder.checks.ch01``) and runs the
generic check of ``autograder.checks.core``. The same exercise is judged again
outside the kernel by ``autograder.verdict``.

Modules: ``core`` (the Exercise, the check, judging, the diagnosis across
cases), ``answers`` (answer types and their JSON records), ``cases`` (shared
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
       from .core import Exercise, exercises

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
   (``core``'s docstring; ``tests/test_fair_chains.py`` holds every chain to it).

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
the id a notebook states (see ``core``).

Checks modules outside the package (a test fixture) are found on
``$KV_COURSE_CHECKS_PATH`` (folders, ``os.pathsep``-separated).
"""

from __future__ import annotations

import os
import sys
from importlib import import_module, util
from pathlib import Path

CHECKS_PATH_ENV = "KV_COURSE_CHECKS_PATH"


def chapter_of(name: str) -> str:
    """``ch01`` from a chapter id, a grade id or ``ch01`` itself."""
    return name.split("_")[0]


def chapter_module(chapter: str):
    """The checks module of ``chapter`` (``ch01``, ``ch01_kv_formula`` or a grade id)."""
    prefix = chapter_of(chapter)
    name = f"{__name__}.{prefix}"
    if name in sys.modules:
        return sys.modules[name]
    if (Path(__file__).parent / f"{prefix}.py").is_file():
        return import_module(name)
    for folder in os.environ.get(CHECKS_PATH_ENV, "").split(os.pathsep):
        path = Path(folder) / f"{prefix}.py" if folder else None
        if path is not None and path.is_file():
            spec = util.spec_from_file_location(name, path)
            module = util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
            return module
    raise LookupError(f"no checks for chapter {prefix} (autograder/checks/{prefix}.py)")


def chapter_exercises(chapter: str) -> dict:
    """``{grade_id: Exercise}`` of a chapter, in notebook order."""
    return dict(chapter_module(chapter).EXERCISES)


def exercise(grade_id: str):
    """The exercise of a test cell's grade id (LookupError when there is none)."""
    found = chapter_exercises(grade_id).get(grade_id)
    if found is None:
        raise LookupError(f"no exercise {grade_id} in autograder/checks/{chapter_of(grade_id)}.py")
    return found


def current_student():
    """The learner's id: the grader's, the claimed one, a hub login (never Binder's), ``KV_COURSE_STUDENT``,
    ``STUDENT_ID`` (``core.current_student``)."""
    from . import core
    return core.current_student()


def claim_student(name):
    """The notebook's ``STUDENT_ID = "..."`` (``core.claim_student``); returns ``current_student()``."""
    from . import core
    return core.claim_student(name)


def my_question(topic: str):
    """The learner's own ``kvcoach.drills.Question`` on ``topic`` (``core.my_question``)."""
    from . import core
    return core.my_question(topic)


def check(grade_id: str, fn, hidden: bool = False, seed: int | None = None) -> None:
    """The test cell's check: grade ``fn`` (a value exercise: the number) on ``grade_id`` (``core.check``)."""
    __tracebackhide__ = True
    from . import core
    core.check(exercise(grade_id), fn, hidden=hidden, seed=seed)
