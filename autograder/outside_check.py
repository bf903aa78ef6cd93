"""The outside check as a step of nbgrader's autograde: one safe path, whoever runs it.

``OutsideCheck`` is an nbgrader preprocessor that the course config puts in
``Autograde.autograde_preprocessors`` right after nbgrader's ``SaveAutoGrades``
(``autograder.nbgrader_setup.configure``). So plain ``nbgrader autograde``, the
formgrader's Autograde button and ``python -m autograder grade``/``grade-class``
(which drive nbgrader's autograde on a copy of the course) all do the same:

1. nbgrader runs the whole notebook in the sandboxed kernel and saves its own
   scores (a test cell without an error output earns its points: the kernel's
   word, which the notebook's code can fake);
2. this step runs ``autograder.verdict`` on the executed notebook: the setup
   imports, the cells the student added and the answer cells again, in another
   sandbox, and the exercises judged here, outside, against kvlib, with hidden
   cases drawn from the grading seed (``autograder.seed``: a class secret, else
   the random seed kept in ``<course>/grading-seed``), never the notebook's
   fixed seed;
3. per test, the gradebook keeps the lower of the two scores; a test whose points
   the outside check took away gets its message under the test cell (a stderr
   line starting ``[grader]``), which the feedback page shows;
4. when the kernel stopped before the end (``GradingStudentExecute``: it died, or
   a cell ignored its interrupt), the tests it never reached are left to a
   manual grade (no automatic score, ``needs_manual_grade``), while every test
   that ran keeps its score: the formgrader lists the submission as needing
   manual grading, with its autograded notebook.

It runs before ``AssignLatePenalties``, so a late penalty is taken from the
checked score. An assignment without checks (no ``autograder/checks/chNN.py``:
an instructor's own) is left to nbgrader alone.

The grading CLI sets ``seed`` and ``level`` (its own, for every student of a
run) and ``report``, which receives what this step found (``CheckReport``), so
its JSON carries the verdict's diagnosis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Callable, Int, Unicode

from . import notebook as _nb

#: Where ``GradingStudentExecute`` leaves, in nbgrader's resources, how the kernel stopped early.
STOPPED = "kv_course_stopped"
#: The line the outside check's message starts with under a test cell (the feedback shows it).
MARK = "[grader] "


@dataclass
class CheckReport:
    """What one autograde's outside check found, for the grading CLI (``OutsideCheck.report``)."""

    student: str
    verdict: object = None                              # autograder.verdict.Verdict, or None
    notebook: dict = field(default_factory=dict)        # grade id -> nbgrader's own score, before this step
    stopped: dict | None = None                         # GradingStudentExecute's record of an early stop
    not_run: list = field(default_factory=list)         # tests the kernel never reached


def test_cells(nb) -> list:
    """``[(index, grade_id)]`` of the notebook's automatically graded test cells (``autograded_points``);
    written answers and tasks are nbgrader's and the formgrader's alone."""
    out = []
    for index, cell in enumerate(nb.get("cells", [])):
        gid = _nb.nbgrader_meta(cell).get("grade_id")
        if gid and cell.get("cell_type") == "code" and _nb.nbgrader_meta(cell).get("grade") \
                and not _nb.is_manual(cell):
            out.append((index, gid))
    return out


def stopped_note(stopped: dict) -> str:
    """The early stop in words: what the kernel did and what that leaves to a person."""
    return f"{stopped['why']}; the tests after it did not run and wait for a manual grade"


class OutsideCheck(NbGraderPreprocessor):
    """Check every exercise again outside the kernel; the gradebook keeps the lower score (module doc)."""

    seed = Int(None, allow_none=True, help="the hidden cases' seed (default: autograder.seed.grading_seed of "
                                           "the course folder)").tag(config=True)
    level = Unicode(None, allow_none=True, help="the sandbox level (default: the strongest here, or "
                                                "SANDBOX_LEVEL)").tag(config=True)
    report = Callable(None, allow_none=True, help="called with a CheckReport after each notebook (the grading "
                                                  "CLI, in-process)").tag(config=True)

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        from . import verdict as _verdict
        from .checks import chapter_exercises

        info = resources["nbgrader"]
        assignment, student, notebook = info["assignment"], info["student"], info["notebook"]
        try:
            exercises = chapter_exercises(assignment)
        except LookupError:
            self.log.info("%s has no checks in autograder/checks: graded by nbgrader alone", assignment)
            return nb, resources
        stopped = resources.get(STOPPED)
        tests = test_cells(nb)
        not_run = [gid for index, gid in tests if stopped is not None and index >= stopped["cell"]]
        verdict = _verdict.grade(json.loads(json.dumps(nb)), assignment, reference=self._reference(assignment, notebook),
                                 exercises=exercises, seed=self._seed(info["db_url"]), student=student,
                                 sandbox=self._sandbox(_verdict), step_s=self._limits()[0])
        by_id = verdict.by_grade_id()
        found = CheckReport(student, verdict, stopped=stopped, not_run=not_run)
        with Gradebook(info["db_url"]) as gb:
            for index, gid in tests:
                grade = gb.find_grade(gid, notebook, assignment, student)
                found.notebook[gid] = grade.auto_score
                if gid in not_run:
                    grade.auto_score, grade.needs_manual_grade = None, True
                    continue
                ev = by_id.get(gid)
                outside = float(ev.points) if ev is not None and verdict.status == "graded" else 0.0
                if grade.auto_score is not None and outside < float(grade.auto_score):
                    why = ev.feedback if ev is not None and verdict.status == "graded" else \
                        f"not graded: {verdict.reason or 'no verdict for this test'}"
                    nb.cells[index].setdefault("outputs", []).append(new_output(
                        "stream", name="stderr", text=f"{MARK}checked outside the notebook: {why}\n"))
                    grade.auto_score = outside
            gb.db.commit()
        if stopped is not None:
            self.log.warning("%s/%s: %s", student, assignment, stopped_note(stopped))
        if self.report is not None:
            self.report(found)
        return nb, resources

    # -- what the check needs, from the course config ---------------------------------------------
    def _course(self) -> Path:
        from nbgrader.coursedir import CourseDirectory

        return Path(CourseDirectory(config=self.config).root)

    def _reference(self, assignment: str, notebook: str) -> Path:
        return self._course() / "source" / assignment / f"{notebook}.ipynb"

    def _seed(self, db_url: str = "") -> int:
        if self.seed is not None:
            return self.seed
        from .seed import SEED_ENV, SEED_FILE_ENV, class_secret_set, grading_seed

        if db_url and not str(db_url).startswith("sqlite") and not class_secret_set():
            # a gradebook on a server is shared by graders on several machines: each would keep its own random
            # seed in its own course folder and grade one class with different hidden cases (the CLI refuses too)
            raise RuntimeError(f"the gradebook is on a database server, shared by every grader: set the class "
                               f"secret ${SEED_ENV} (or ${SEED_FILE_ENV}) on every grader's machine so that all "
                               "draw the same hidden cases (docs/instructors.md, \"Several graders\")")
        return grading_seed(self._course())[0]

    def _limits(self) -> tuple[float, float]:
        from .verdict import verdict_limits

        execute = self.config.Execute
        return verdict_limits(execute.timeout if "timeout" in execute else 30)

    def _sandbox(self, verdict_module):
        from . import sandbox

        return verdict_module.make_sandbox(level=self.level or sandbox.detect_level(), wall_s=self._limits()[1])
