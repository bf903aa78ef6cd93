"""Grading results: nbgrader's, read back from its gradebook and autograded notebook, and how they
are combined with the verdict's (the lower score counts, test by test); the report of one notebook.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from . import notebook as _nb
from .course import NbGrader
from .kernel import UNREACHABLE
from .seed import describe_seed
from .verdict import named_slip

STATUSES = ("graded", "needs_manual", "error")


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _num(x):
    """3.0 -> 3 for the report; other floats unchanged."""
    if x is None:
        return 0
    x = float(x)
    return int(x) if x.is_integer() else round(x, 4)


def _plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def _error_outputs(cell) -> list:
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def _describe_error(outputs, timeout) -> str:
    names = [o.get("ename", "") for o in outputs]
    if "CellTimeoutError" in names:
        return (f"timed out: the cell ran past the {_num(timeout)} s limit and was interrupted "
                "(an infinite loop?)")
    first = outputs[0]
    ename = first.get("ename", "Error")
    evalue = _ANSI.sub("", first.get("evalue", "")).strip()
    if ename == "AssertionError":
        return evalue or "AssertionError (the check gave no message)"
    if ename == "NotImplementedError" and not evalue:
        return "NotImplementedError: the answer is not written yet"
    return f"{ename}: {evalue}" if evalue else ename


def _autograded_cells(root: Path, assignment: str, student: str) -> dict:
    """``{grade_id: cell}`` of the autograded notebook (empty when nbgrader removed it)."""
    path = root / "autograded" / student / assignment / f"{assignment}.ipynb"
    if not path.is_file():
        return {}
    try:
        nb = _nb.read(path)
    except _nb.NotebookError:
        return {}
    out = {}
    for index, cell in enumerate(nb["cells"]):
        meta = _nb.nbgrader_meta(cell)
        out[meta.get("grade_id") or f"cell {index}"] = cell
    return out


def _gradebook_grades(grader: NbGrader, assignment: str, student: str):
    """(score, max_score, timestamp, {grade_id: (score, max_score, needs_manual)}) or None."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(grader.db_url, grader.course_id) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return None
        grades = {}
        for notebook in sub.notebooks:
            for grade in notebook.grades:
                grades[grade.name] = (grade.score, grade.max_score, bool(grade.needs_manual_grade))
        timestamp = sub.timestamp.isoformat() if sub.timestamp else None
        return sub.score, sub.max_score, timestamp, grades


_EXCEPTION_LINE = re.compile(r"^\s*((?:\w+\.)*\w*(?:Error|Exception|Exit)\b.*)$")


def _root_cause(log: str) -> str:
    """The first exception line of nbgrader's log that is not nbgrader's own wrapper."""
    for line in log.splitlines():
        match = _EXCEPTION_LINE.match(line)
        if match and "NbGraderException" not in line and not line.lstrip().startswith("["):
            text = _ANSI.sub("", match.group(1)).strip()
            return text if len(text) <= 200 else text[:199] + "…"
    return "unknown error (run with --verbose)"


def _nbgrader_tests(grader: NbGrader, assignment: str, student: str, points: dict, problem, run,
                    timeout, found=None, manual=()) -> dict:
    """nbgrader's side of one grade: tests, status, notes (without the summary line).

    ``found``: what the course config's outside check reported (``outside_check.CheckReport``): nbgrader's
    own scores before it, and where the kernel stopped early, if it did. ``manual``: the grade ids a
    person grades (written answers, tasks: ``notebook.manual_points``), passed through as nbgrader left
    them (``"manual": true``).
    """
    log = (run.get("log") or "") + (run.get("error") or "")
    book = _gradebook_grades(grader, assignment, student)
    cells = _autograded_cells(grader.root, assignment, student)
    dead = "DeadKernelError" in log or "Kernel died" in log
    from .outside_check import stopped_note   # imports nbgrader: only once a notebook was graded

    stopped = found.stopped if found is not None else None
    own = found.notebook if found is not None else {}
    by_hand = set(manual)

    tests = []
    for gid, max_points in points.items():
        score, maximum, manual = (book[3].get(gid) if book else None) or (0, max_points, True)
        if not manual and own.get(gid) is not None:
            score = own[gid]   # nbgrader's own score; the outside check's is combined with it later
        entry = {"grade_id": gid, "points": _num(score), "max_points": _num(maximum),
                 "passed": bool(not manual and score is not None and float(score) >= float(maximum)),
                 "needs_manual": manual, "feedback": ""}
        cell = cells.get(gid)
        if gid in by_hand:
            entry["manual"] = True
            entry["feedback"] = (f"not graded: {problem}" if problem else
                                 "graded by hand (the formgrader): waits for a manual grade" if manual else
                                 "graded by hand: left as released (no answer)" if cell is not None else
                                 "graded by hand: not reached")
        elif problem:
            entry["feedback"] = f"not graded: {problem}"
        elif stopped is not None and gid in found.not_run:
            entry["feedback"] = f"not run: {stopped['why']}; this test waits for a manual grade"
        elif cell is None and dead:
            entry["feedback"] = "not run: the kernel died before this test"
        elif cell is None:
            entry["feedback"] = "not graded: nbgrader could not run the notebook"
        elif not entry["passed"]:
            errors = _error_outputs(cell)
            entry["feedback"] = (_describe_error(errors, timeout) if errors else
                                 "needs a manual grade" if manual else "no points (the cell raised nothing)")
        tests.append(entry)

    notes = []
    if problem:
        status, notes = "error", [problem]
    elif not run["success"] and dead and UNREACHABLE not in log:
        status = "needs_manual"
        notes = ["the kernel died while running the notebook (os._exit(), a crash, running out of memory, "
                 "the time limit for the whole notebook, or a kernel that stopped answering and was killed); "
                 "nbgrader left every test to a manual grade"]
    elif not run["success"] and (UNREACHABLE in log or "zmq.error.Again" in log):
        status = "needs_manual"
        notes = ["the kernel stopped answering the grader (its connection broken from inside?) and was killed; "
                 "nbgrader left every test to a manual grade"]
    elif not run["success"] and "CellTimeoutError" in log:
        status = "needs_manual"
        notes = [f"a cell ran past the {_num(timeout)} s limit and did not stop when interrupted (a loop that "
                 "catches KeyboardInterrupt?); nbgrader could not finish the notebook and left every test "
                 "to a manual grade"]
    elif not run["success"]:
        status, notes = "error", ["nbgrader could not grade it: " + _root_cause(log)]
    else:
        if stopped is not None:
            notes.append(stopped_note(stopped))
        timed_out = [gid for gid, cell in cells.items()
                     if any(o.get("ename") == "CellTimeoutError" for o in _error_outputs(cell))
                     and not (stopped is not None and gid == stopped.get("grade_id"))]
        if timed_out:
            notes.append(f"{_plural(len(timed_out), 'cell')} ran past the {_num(timeout)} s limit "
                         f"and {'was' if len(timed_out) == 1 else 'were'} interrupted (an infinite loop?): "
                         f"{', '.join(timed_out)}")
        for gid, cell in cells.items():
            meta = _nb.nbgrader_meta(cell)
            errors = _error_outputs(cell)
            if meta.get("solution") and errors and gid not in timed_out \
                    and not (stopped is not None and gid == stopped.get("grade_id")):
                notes.append(f"the answer cell {gid} raised {_describe_error(errors, timeout)}")
        status = "needs_manual" if any(t["needs_manual"] and not t.get("manual") for t in tests) else "graded"
    died = bool(stopped.get("died")) if stopped is not None else (
        not problem and not run["success"] and (dead or UNREACHABLE in log or "zmq.error.Again" in log))
    return {"tests": tests, "status": status, "notes": notes, "book": book,
            "max_score": _num(book[1]) if book else _num(sum(points.values())), "stopped": stopped,
            "died": died}


def _summary_note(tests: list, status: str) -> str | None:
    """The first line of a reason: what passed, failed or waits for a person."""
    checked = [t for t in tests if not t.get("manual")]
    if status == "needs_manual":
        manual = [t["grade_id"] for t in checked if t["needs_manual"]]
        return f"{_plural(len(manual), 'test')} need a manual grade: {', '.join(manual)}" if manual else None
    failed = [t for t in checked if not t["passed"]]
    return (f"all {_plural(len(checked), 'test')} passed" if not failed else
            f"{len(failed)} of {_plural(len(checked), 'test')} failed: " + ", ".join(t["grade_id"] for t in failed))


def pending(tests: list) -> dict | None:
    """What waits for a person: ``{"points": p, "grade_ids": [...]}`` (written answers and tasks not yet
    graded by hand, tests the kernel never reached), or None."""
    waiting = [t for t in tests if t.get("needs_manual")]
    if not waiting:
        return None
    return {"points": _num(sum(float(t["max_points"]) for t in waiting)),
            "grade_ids": [t["grade_id"] for t in waiting]}


def pending_note(tests: list) -> str | None:
    """The reason's line for written answers and tasks left to the formgrader, or None."""
    written = [t for t in tests if t.get("manual") and t.get("needs_manual")]
    if not written:
        return None
    points = _num(sum(float(t["max_points"]) for t in written))
    return (f"{_plural(len(written), 'cell')} graded by hand ({points} point{'' if points == 1 else 's'}) "
            f"{'waits' if len(written) == 1 else 'wait'} for a manual grade in the formgrader: "
            f"{', '.join(t['grade_id'] for t in written)}")


def combine(nb: dict, v, level: str) -> tuple[list, str, str]:
    """(tests, status, reason): nbgrader's result and the verdict ``v`` together.

    Per test: points = min(nbgrader, verdict); passed only if both passed; when
    the verdict fails a test that nbgrader passed, its feedback replaces
    nbgrader's (the notebook's own check was fooled, or a hidden case the
    notebook never ran caught it). A verdict that could not grade at all makes
    the result an error with no points; nbgrader's needs_manual is kept.
    """
    tests = [dict(t) for t in nb["tests"]]
    notes = list(nb["notes"])
    status = nb["status"]
    if v is None:  # rejected before grading: nothing ran
        for t in tests:
            t["nbgrader_points"], t["verdict_points"] = t["points"], None
        return tests, status, "; ".join(notes)
    by_id = v.by_grade_id()
    if v.status == "error":
        for t in tests:
            if not t.get("manual"):
                t.update(nbgrader_points=t["points"], verdict_points=0, points=0, passed=False,
                         feedback=f"not graded: {v.reason}")
        return tests, "error", f"the grader's check (outside the notebook) could not run: {v.reason}"
    lowered = []
    for t in tests:
        if t.get("manual"):   # a person grades it; the checks have no say
            t["nbgrader_points"], t["verdict_points"] = t["points"], None
            continue
        ev = by_id.get(t["grade_id"])
        vpoints = _num(ev.points) if ev is not None else 0
        t["nbgrader_points"], t["verdict_points"] = t["points"], vpoints
        t["points"] = _num(min(float(t["points"]), float(vpoints)))
        vpassed = bool(ev is not None and ev.passed)
        if t["passed"] and not vpassed:
            lowered.append(t["grade_id"])
            t["feedback"] = ("checked outside the notebook: " + (ev.feedback if ev is not None else
                             "no verdict for this test")).strip()
        t["passed"] = t["passed"] and vpassed
        # the outside check's diagnosis, as data (the class report counts slips by these keys)
        t["slips"] = list(getattr(ev, "slips", None) or []) if not t["passed"] else []
        t["slip"] = named_slip(t["slips"])
        t["attempted"] = bool(getattr(ev, "attempted", True)) if ev is not None else True
        t["failures"] = dict(getattr(ev, "failures", None) or {}) if not t["passed"] else {}
    if lowered:
        notes.append(f"the grader's own check (run outside the notebook, in the {level} sandbox) failed "
                     f"{', '.join(lowered)}, which passed in the notebook")
    if v.reason and (lowered or status != "graded"):
        notes.append(f"outside check: {v.reason}")
    if status == "error":
        return tests, status, "; ".join(notes)
    head = [line for line in (_summary_note(tests, status), pending_note(tests)) if line]
    return tests, status, "; ".join(head + notes)


def _annotate_autograded(path: Path, tests: list) -> str | None:
    """The autograded notebook's text, with the outside check's message under each test it failed
    that nbgrader passed (so that feedback shows why the points are gone). None if missing."""
    if not path.is_file():
        return None
    nb = _nb.read(path)
    by_id = {t["grade_id"]: t for t in tests}
    for cell in nb.get("cells", []):
        t = by_id.get((cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id"))
        if t is None or cell.get("cell_type") != "code" or t["passed"]:
            continue
        if t.get("nbgrader_points") is not None and t.get("verdict_points") is not None \
                and float(t["verdict_points"]) < float(t["nbgrader_points"]):
            cell.setdefault("outputs", []).append(
                {"output_type": "stream", "name": "stderr", "text": "[grader] " + t["feedback"] + "\n"})
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def _failed_result(assignment, student, points, reason) -> dict:
    return {"assignment": assignment, "student": student, "score": 0,
            "max_score": _num(sum(points.values())), "status": "error", "reason": reason,
            "timestamp": None,
            "tests": [{"grade_id": gid, "points": 0, "max_points": _num(p), "passed": False,
                       "needs_manual": True, "feedback": f"not graded: {reason}"}
                      for gid, p in points.items()]}


def format_report(result: dict) -> str:
    """The human-readable report of one graded notebook."""
    waiting = result.get("pending")
    lines = [f"{result['assignment']} / {result['student']}: {result['score']}/{result['max_score']} "
             f"points, {result['status']}"
             + (f" ({waiting['points']} point{'' if waiting['points'] == 1 else 's'} pending a manual grade: "
                f"{', '.join(waiting['grade_ids'])})" if waiting else ""),
             f"  {result['reason']}"]
    for t in result["tests"]:
        mark = "PASS" if t["passed"] else ("MANUAL" if t["needs_manual"] else "FAIL")
        lines.append(f"  {mark:<6} {t['grade_id']:<44} {t['points']}/{t['max_points']}")
        if t["feedback"]:
            lines.append(f"         {t['feedback']}")
    lines.append(f"  isolation: {result.get('isolation', 'unknown')} (the notebook's kernel and the outside "
                 f"check ran in this sandbox); hidden cases: seed {describe_seed(result.get('seed'))}")
    return "\n".join(lines)
