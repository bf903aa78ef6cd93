"""Every graded chapter, with no test to write: its source scores full marks and its blank
release zero through the outside check (the sandboxed verdict the grading CLI combines
with nbgrader's score).

The full grading paths (``grade``, ``grade-class``, plain nbgrader) are exercised on
chapter 01 in test_grading.py and test_class_gradebook.py; this test gives every other
chapter the same two end points at the cost of one verdict each (about a second).
The expected points come from the source notebook's test cells (stated once there),
not from the checks module under test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import course_chapters
from autograder import notebook
from autograder import verdict as V

REPO = Path(__file__).resolve().parents[1]
GRADED = [course_chapters.source(c) for c in course_chapters.GRADED]
# A submission is always some student's: ch09's graded drills are drawn from the student id (the grader's,
# here this one), and its source computes each answer from the question it draws, so any id scores full marks.
STUDENT = "chapters-graded-test"


def _points(path: Path) -> float:
    nb = notebook.read(path)
    return sum(notebook.nbgrader_meta(c).get("points", 0) for c in nb["cells"]
               if notebook.nbgrader_meta(c).get("grade"))


@pytest.mark.parametrize("source", GRADED, ids=[p.stem for p in GRADED])
def test_source_full_marks_blank_release_zero(source):
    assignment = source.stem
    total = _points(source)
    assert total > 0, f"{assignment}: a graded chapter with no points"
    full = V.grade(source, assignment, student=STUDENT)
    assert (full.status, full.score, full.max_score) == ("graded", total, total), full.as_dict()
    blank = V.grade(REPO / "chapters" / f"{assignment}.ipynb", assignment, student=STUDENT)
    assert (blank.status, blank.score, blank.max_score) == ("graded", 0, total), blank.as_dict()
    assert all(not t.passed for t in blank.tests)
