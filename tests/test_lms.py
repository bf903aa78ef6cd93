"""Canvas's gradebook import (``autograder.lms``): the roster read, students matched, the file's layout.

The roster is laid out as Canvas exports a gradebook (a UTF-8 byte-order mark as Excel saves it, the student
columns, assignment columns "Title (id)", read-only totals, the "Points Possible" row, a "Manual Posting" row, the
course's test student). The layout written is checked against what Canvas's importer reads
(app/models/gradebook_importer.rb: "Student" and "ID" first, the student columns ending at "Section", the
"Points Possible" row, "Title (id)" columns). The whole grade-class run is ``tests/test_class_gradebook.py``.
"""

from __future__ import annotations

import csv
import io
import re

import pytest

from autograder import lms
from autograder.course import UsageError

EXPORT = ("\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Homework 0 (4240),ch01_kv_formula (4242),Current Score\n"
          "    Points Possible,,,,,10.00,11.00,(read only)\n"
          ",,,,,,Manual Posting,\n"
          '"Lovelace, Ada",101,S-0101,Ada.L,KV A,9.00,,90\n'
          '"Hopper, Grace",102,gh,grace,KV A,8.00,,80\n'
          '"Turing, Alan",103,S-0103,alan,KV B,7.00,,70\n'
          '"Student, Test",104,,,KV A,,,\n')


def _roster(tmp_path, text=EXPORT, assignment="ch01_kv_formula"):
    path = tmp_path / "export.csv"
    path.write_text(text, encoding="utf-8")
    return lms.read_roster(path, assignment)


def test_the_roster_is_the_export_s_students_and_the_assignments_column(tmp_path):
    roster = _roster(tmp_path)
    assert [r["Student"] for r in roster.rows] == ["Lovelace, Ada", "Hopper, Grace", "Turing, Alan", "Student, Test"]
    assert roster.column == "ch01_kv_formula (4242)"
    assert _roster(tmp_path, assignment="ch02_gqa_tp").column is None      # not in Canvas yet: a new column


def test_students_are_matched_by_login_sis_id_or_canvas_id(tmp_path):
    roster = _roster(tmp_path)
    matched = roster.match(["ada.l", "gh", "103"])       # login (any case), SIS User ID, Canvas ID
    assert {s: r["ID"] for s, r in matched.items()} == {"ada.l": "101", "gh": "102", "103": "103"}
    with pytest.raises(UsageError, match=r"students nobody, ghost not in the roster"):
        roster.match(["ada.l", "nobody", "ghost"])
    with pytest.raises(UsageError, match=r"student alan match more than one row"):
        _roster(tmp_path, EXPORT + '"Alan, Other",105,alan,other,KV B,,,\n').match(["alan"])


@pytest.mark.parametrize("column", lms.STUDENT_COLUMNS)
def test_a_missing_student_column_is_one_line(tmp_path, column):
    text = EXPORT.replace(f",{column}," if column != "Student" else "Student,", ",Something,", 1)
    with pytest.raises(UsageError, match=f"no '{re.escape(column)}' column") as info:
        _roster(tmp_path, text)
    assert "\n" not in str(info.value)


def test_not_a_roster_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        lms.read_roster(tmp_path / "nowhere.csv", "ch01_kv_formula")
    with pytest.raises(UsageError, match="empty"):
        _roster(tmp_path, "")
    (tmp_path / "latin1.csv").write_bytes("Student,ID\nJos\xe9".encode("latin-1"))
    with pytest.raises(UsageError, match="UTF-8"):
        lms.read_roster(tmp_path / "latin1.csv", "ch01_kv_formula")


def _as_canvas_reads_it(text: str):
    """The checks of Canvas's importer on a gradebook CSV; (header, points row, students)."""
    table = list(csv.reader(io.StringIO(text)))
    header = table[0]
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1]
    assert re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3])
    assert "Section" in header[4]
    assert "Points Possible" in table[1][0]
    assert all(re.fullmatch(r".+ \(\d+\)", h) or h for h in header[5:])
    return header, table[1], table[2:]


def test_the_import_file_has_canvas_s_layout(tmp_path):
    roster = _roster(tmp_path)
    matched = roster.match(["ada.l", "gh"])
    text = lms.as_csv(lms.canvas_table(roster, "ch01_kv_formula", 11.0, {"ada.l": 11.0, "gh": 9.5}, matched))
    header, points, students = _as_canvas_reads_it(text)
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "ch01_kv_formula (4242)"]
    assert points == ["Points Possible", "", "", "", "", "11"]
    assert students == [["Lovelace, Ada", "101", "S-0101", "Ada.L", "KV A", "11"],
                        ["Hopper, Grace", "102", "gh", "grace", "KV A", "9.5"],
                        ["Turing, Alan", "103", "S-0103", "alan", "KV B", ""],      # no submission: left as it is
                        ["Student, Test", "104", "", "", "KV A", ""]]
    new = lms.canvas_table(_roster(tmp_path, assignment="ch02_gqa_tp"), "ch02_gqa_tp", 12, {}, {})
    assert new[0][-1] == "ch02_gqa_tp"                  # a title without an id: Canvas makes the assignment
