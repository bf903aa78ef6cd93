"""nbgrader's late policy on the grade-class path (``autograder.duedates``), on a gradebook made with nbgrader's API.

The assignment is due 2027-03-01 17:00 UTC; a submission at 18:30 is 5,400 s late (1 h 30 min by hand), one at
16:59:59 is on time. The notebook scores 11 (chapter 01's total). nbgrader's ``LateSubmissionPlugin`` with
``penalty_method = "zero"`` takes the whole score (11), ``"none"`` nothing; an extension of 2 hours makes 18:30 on
time. The full ``grade-class`` run with a due date is ``tests/test_class_gradebook.py``.
"""

from __future__ import annotations

import datetime as dt

import pytest
from nbgrader.api import Gradebook

from autograder import duedates
from autograder.course import prepare_environment

prepare_environment()        # nbgrader asks alembic for its schema by name; the course answers from its files
# nbgrader 0.9's relationships under SQLAlchemy 2 ("not in session"; autograder.course._quiet_nbgrader)
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
DUE = dt.datetime(2027, 3, 1, 17, 0, 0)
A, NB = "ch01_kv_formula", "ch01_kv_formula"


def _course(tmp_path, method: str | None):
    course = tmp_path / f"course-{method}"
    course.mkdir()
    line = f'c.LateSubmissionPlugin.penalty_method = "{method}"\n' if method else ""
    (course / "nbgrader_config.py").write_text("c = get_config()\n" + line)
    return course


STAMPS = {"late": "2027-03-01 18:30:00.000000 UTC", "on_time": "2027-03-01 16:59:59 UTC", "by_hand": None,
          "garbled": "yesterday-ish"}


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> bytes:
    """A gradebook (its file's bytes): the assignment due at DUE, each student of STAMPS submitted, scoring 11."""
    path = tmp_path_factory.mktemp("template") / "gradebook.db"
    with Gradebook(f"sqlite:///{path}") as gb:
        gb.add_assignment(A, duedate=DUE)
        gb.add_notebook(NB, A)
        gb.add_grade_cell("q", NB, A, max_score=11, cell_type="code")
        for student in STAMPS:
            gb.add_student(student)
            for grade in gb.add_submission(A, student).notebooks[0].grades:
                grade.auto_score = 11
            gb.db.commit()
    return path.read_bytes()


def _class(tmp_path, template: bytes, extension=None) -> str:
    """The template's gradebook, and ``submitted/<s>/<A>/`` with ``timestamp.txt`` holding ``STAMPS[s]`` (None: no
    file); ``extension``: granted to every student."""
    (tmp_path / "gradebook.db").write_bytes(template)
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    for student, stamp in STAMPS.items():
        folder = tmp_path / "submitted" / student / A
        folder.mkdir(parents=True)
        if stamp is not None:
            (folder / "timestamp.txt").write_text(stamp + "\n")
    if extension:
        with Gradebook(url) as gb:
            for student in STAMPS:
                gb.find_submission(A, student).extension = extension
            gb.db.commit()
    return url


def _apply(tmp_path, template, method, **kw):
    url = _class(tmp_path, template, **kw)
    with Gradebook(url) as gb:
        got = duedates.apply(gb, _course(tmp_path, method), A, tmp_path / "submitted", list(STAMPS))
        stored = {s: (gb.find_submission(A, s).late_submission_penalty, gb.find_submission(A, s).score)
                  for s in STAMPS}
    return got, stored


def test_zero_takes_the_whole_score_of_a_late_submission(tmp_path, template):
    got, stored = _apply(tmp_path, template, "zero")
    assert got["late"] == {"submitted_at": "2027-03-01T18:30:00Z", "late_seconds": 5400.0, "late_penalty": 11.0}
    assert got["on_time"] == {"submitted_at": "2027-03-01T16:59:59Z", "late_seconds": 0.0, "late_penalty": 0.0}
    assert got["by_hand"] == got["garbled"] == {"submitted_at": "", "late_seconds": 0.0, "late_penalty": 0.0}
    assert stored == {"late": (11.0, 11.0), "on_time": (0.0, 11.0), "by_hand": (0.0, 11.0), "garbled": (0.0, 11.0)}


@pytest.mark.parametrize("method", ["none", None])
def test_none_is_nbgraders_default(tmp_path, template, method):
    got, _ = _apply(tmp_path, template, method)
    assert (got["late"]["late_seconds"], got["late"]["late_penalty"]) == (5400.0, 0.0)


def test_an_extension_moves_the_due_date(tmp_path, template):
    got, _ = _apply(tmp_path, template, "zero", extension=dt.timedelta(hours=2))
    assert (got["late"]["late_seconds"], got["late"]["late_penalty"]) == (0.0, 0.0)


def test_a_timestamp_that_is_a_link_is_not_read(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("2027-03-01 18:30:00 UTC\n")
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "timestamp.txt").symlink_to(target)
    assert duedates.read_timestamp(folder) is None
    (folder / "timestamp.txt").unlink()
    (folder / "timestamp.txt").write_text("2027-03-01 19:30:00 Europe/Paris\n")     # CET, UTC+1: 18:30 UTC
    assert duedates.read_timestamp(folder) == dt.datetime(2027, 3, 1, 18, 30)
