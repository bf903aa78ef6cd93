"""Grades for a learning management system: Canvas's gradebook import (``grade-class --lms canvas``).

Canvas imports a gradebook CSV in the layout its own export has (Canvas's ``GradebookImporter``,
``app/models/gradebook_importer.rb``; its guide "How do I import grades in the Gradebook?"): a header row
``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per assignment named ``Title (id)``
(a title without an id makes a new assignment); a second row whose first cell is ``Points Possible`` and that
holds each assignment's points; then one row per student, found by the Canvas ``ID``, else the ``SIS User ID``
or ``SIS Login ID``, else the name. A blank cell changes nothing.

The ids Canvas needs are in the instructor's own Canvas gradebook export (Grades, Export), the *roster*:
``read_roster`` takes its student columns and finds the assignment's column (its title is the assignment id,
``ch01_kv_formula (4242)``). nbgrader's student ids are matched to its rows by ``SIS Login ID``, ``SIS User ID``
or ``ID``; a student the roster does not hold, or holds twice, stops ``grade-class`` before anyone is graded
(``UsageError``, one line naming them). ``write_canvas`` writes ``<out>/<assignment>_canvas.csv``: every roster
student in the roster's order, with the gradebook's score minus the late penalty (what ``nbgrader export`` calls
``score``) where the submission is graded, blank where it still needs a manual grade, was not graded, or was
never submitted.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from .course import UsageError

#: Canvas's student columns, in its order (the importer requires Student and ID first, Section last).
STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
#: The roster's columns that may hold an nbgrader student id, in the order they are tried.
MATCHED_BY = ("SIS Login ID", "SIS User ID", "ID")
POINTS_POSSIBLE = "Points Possible"
_TITLE_AND_ID = re.compile(r"^(?P<title>.*?)\s*\((?P<id>\d+)\)\s*$")


@dataclass
class Roster:
    """The student rows of a Canvas gradebook export, and the column of the graded assignment (None: none yet)."""

    path: Path
    rows: list
    column: str | None

    def match(self, students) -> dict:
        """``{student: row}``; UsageError naming the students the roster does not hold, or holds twice."""
        index: dict = {}
        for number, row in enumerate(self.rows):
            for key in MATCHED_BY:
                value = (row.get(key) or "").strip()
                if value:
                    index.setdefault((key, value.lower() if key == "SIS Login ID" else value), set()).add(number)
        found, missing, twice = {}, [], []
        for student in students:
            rows = set()
            for key in MATCHED_BY:
                rows |= index.get((key, student.lower() if key == "SIS Login ID" else student), set())
            if not rows:
                missing.append(student)
            elif len(rows) > 1:
                twice.append(student)
            else:
                found[student] = self.rows[rows.pop()]
        if missing:
            raise UsageError(f"--roster {self.path}: {_few(missing)} not in the roster (no row whose "
                             f"{', '.join(MATCHED_BY[:-1])} or {MATCHED_BY[-1]} is their nbgrader id)")
        if twice:
            raise UsageError(f"--roster {self.path}: {_few(twice)} match more than one row of the roster")
        return found


def _few(names: list) -> str:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"student{'s' if len(names) > 1 else ''} {shown}"


def read_roster(path, assignment: str) -> Roster:
    """The Canvas gradebook export at ``path`` (UsageError, one line, when it is not one)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UsageError(f"--roster {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--roster {path}: cannot be read as UTF-8 text ({exc})") from None
    try:
        table = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise UsageError(f"--roster {path}: not a CSV file ({exc})") from None
    if not table:
        raise UsageError(f"--roster {path}: empty (export your Canvas gradebook: Grades, Export)")
    header = [h.strip() for h in table[0]]
    for column in STUDENT_COLUMNS:
        if column not in header:
            raise UsageError(f"--roster {path}: no {column!r} column (a Canvas gradebook export has "
                             f"{', '.join(STUDENT_COLUMNS)})")
    titled = [h for h in header[header.index("Section") + 1:] if _title(h).lower() == assignment.lower()]
    if len(titled) > 1:
        raise UsageError(f"--roster {path}: {len(titled)} columns are titled {assignment}: {', '.join(titled)}")
    rows = []
    for cells in table[1:]:
        row = dict(zip(header, (c.strip() for c in cells)))
        first = row.get("Student", "")
        if POINTS_POSSIBLE in first or not any(row.values()):
            continue
        if all(re.fullmatch(r"(Muted|Manual Posting.*)?", v, re.I) for v in row.values()):
            continue
        rows.append(row)
    return Roster(path, rows, titled[0] if titled else None)


def _title(header: str) -> str:
    match = _TITLE_AND_ID.match(header)
    return match.group("title") if match else header.strip()


def canvas_path(out: Path, assignment: str) -> Path:
    return Path(out) / f"{assignment}_canvas.csv"


def canvas_table(roster: Roster, assignment: str, max_score, scores: dict, matched: dict) -> list:
    """The rows of the import file: header, Points Possible, a row per roster student (``scores``: student ->
    the score to import, None for a blank cell; ``matched``: student -> roster row)."""
    column = roster.column or assignment
    by_row = {id(row): student for student, row in matched.items()}
    table = [[*STUDENT_COLUMNS, column], [POINTS_POSSIBLE, "", "", "", "", _number(max_score)]]
    for row in roster.rows:
        student = by_row.get(id(row))
        score = scores.get(student) if student is not None else None
        table.append([row.get(c, "") for c in STUDENT_COLUMNS] + ["" if score is None else _number(score)])
    return table


def _number(x) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() else str(round(x, 4))


def as_csv(table: list) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(table)
    return buffer.getvalue()
