"""Grade submissions with nbgrader in a throwaway course, outside the checkout.

``grade_submission`` grades one notebook: it stages the course in a temp dir,
generates the release there, puts the notebook in
``submitted/<student>/<id>/``, runs ``nbgrader autograde`` and reads the
gradebook and the autograded notebook back into a plain dict::

    {"assignment", "student", "score", "max_score", "status", "reason",
     "timeout_s", "tests": [{"grade_id", "points", "max_points", "passed",
                             "needs_manual", "feedback"}]}

``status`` is ``graded`` (every test scored automatically), ``needs_manual``
(nbgrader left points to a person: the kernel died mid-run) or ``error``
(nbgrader could not grade the file: empty, not UTF-8, not JSON, not nbformat
4, another assignment's notebook). ``reason`` always says why in one line; a
failed test's ``feedback`` is the message of the AssertionError its check
raised (the named slip), never the test's source.

``grade_class`` grades a whole ``submitted/`` folder in parallel worker
processes, each with its own course copy, then merges the results into one
gradebook, one CSV and one JSON file per student; students already graded
from the same file are skipped.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .course import (
    CourseError,
    NbGrader,
    REPO_ROOT,
    find_course_dir,
    grade_points,
    nbgrader_cells,
    read_json,
    read_notebook,
    source_notebook,
    stage_course,
)

STATUSES = ("graded", "needs_manual", "error")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_STUDENT_RE = re.compile(r"[^A-Za-z0-9_.@-]+")


class UsageError(ValueError):
    """Bad command-line input (no such file, unknown assignment): exit 2."""


def _num(x):
    """3.0 -> 3 for the report; other floats unchanged."""
    if x is None:
        return 0
    x = float(x)
    return int(x) if x.is_integer() else round(x, 4)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"


def inside_checkout(path: Path) -> bool:
    """True when ``path`` lies in this package's checkout (a git work tree)."""
    if not (REPO_ROOT / ".git").exists():
        return False
    path = Path(path).resolve()
    return path == REPO_ROOT or REPO_ROOT in path.parents


# --- reading a submission before nbgrader does ------------------------------------------
def inspect_submission(path: Path, assignment: str, expected_ids: set) -> str | None:
    """Why ``path`` cannot be graded as ``assignment`` (one line), or None if it looks fine."""
    path = Path(path)
    if not path.is_file():
        return f"no {assignment}.ipynb in the submission folder"
    data = path.read_bytes()
    if not data.strip():
        return f"the file is empty ({len(data)} bytes): nothing was submitted"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): "
                "not a notebook as Jupyter saves it")
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as exc:
        return (f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
                "the file is truncated or corrupted")
    if not isinstance(nb, dict) or "nbformat" not in nb:
        return "valid JSON but not a Jupyter notebook (no 'nbformat' key)"
    if nb.get("nbformat") != 4:
        return (f"an nbformat {nb.get('nbformat')!r} notebook; the course reads nbformat 4 "
                "(open and save it in JupyterLab)")
    cells = nb.get("cells")
    if not isinstance(cells, list):
        return "an nbformat 4 notebook without a list of cells"
    ids = set()
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader") if isinstance(cell, dict) else None
        if isinstance(meta, dict) and meta.get("grade_id"):
            ids.add(meta["grade_id"])
    if ids and not ids & expected_ids:
        prefixes = sorted({gid.split("_")[0] for gid in ids})
        return (f"another assignment's notebook (its nbgrader cells are {', '.join(sorted(ids)[:3])}"
                f"{' ...' if len(ids) > 3 else ''}; chapter {', '.join(prefixes)}), not {assignment}")
    return None


# --- reading nbgrader's results -------------------------------------------------------------
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
    nb = read_notebook(path)
    out = {}
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
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


def _plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def grade_in_course(grader: NbGrader, assignment: str, student: str, folder: Path | None,
                    notebook: Path | None, points: dict, ids: set, timeout) -> dict:
    """Autograde one student in ``grader``'s course (release already generated).

    ``folder`` (a ``submitted/<student>/<id>/`` folder, copied whole) or
    ``notebook`` (one file, copied as ``<id>.ipynb``) is the submission.
    """
    target = grader.root / "submitted" / student / assignment
    if target.exists():
        shutil.rmtree(target)
    if folder is not None:
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    else:
        target.mkdir(parents=True)
        shutil.copyfile(notebook, target / f"{assignment}.ipynb")
    problem = inspect_submission(target / f"{assignment}.ipynb", assignment, ids)
    started = time.monotonic()
    run = grader.autograde(assignment, student)
    log = (run.get("log") or "") + (run.get("error") or "")
    book = _gradebook_grades(grader, assignment, student)
    cells = _autograded_cells(grader.root, assignment, student)
    dead = "DeadKernelError" in log or "Kernel died" in log

    tests = []
    for gid, max_points in points.items():
        score, maximum, manual = (book[3].get(gid) if book else None) or (0, max_points, True)
        entry = {"grade_id": gid, "points": _num(score), "max_points": _num(maximum),
                 "passed": bool(not manual and score is not None and float(score) >= float(maximum)),
                 "needs_manual": manual, "feedback": ""}
        cell = cells.get(gid)
        if problem:
            entry["feedback"] = f"not graded: {problem}"
        elif cell is None and dead:
            entry["feedback"] = "not run: the kernel died before this test"
        elif cell is None:
            entry["feedback"] = "not graded: nbgrader could not run the notebook"
        elif not entry["passed"]:
            errors = _error_outputs(cell)
            entry["feedback"] = (_describe_error(errors, timeout) if errors else
                                 "needs a manual grade" if manual else "no points (the cell raised nothing)")
        tests.append(entry)

    failed = [t for t in tests if not t["passed"]]
    if problem:
        status, reason = "error", problem
    elif not run["success"] and dead:
        status = "needs_manual"
        reason = ("the kernel died while running the notebook (os._exit(), a crash or running out of "
                  "memory); nbgrader left every test to a manual grade")
    elif not run["success"]:
        status, reason = "error", "nbgrader could not grade it: " + _root_cause(log)
    else:
        notes = []
        timed_out = [gid for gid, cell in cells.items()
                     if any(o.get("ename") == "CellTimeoutError" for o in _error_outputs(cell))]
        if timed_out:
            notes.append(f"{_plural(len(timed_out), 'cell')} ran past the {_num(timeout)} s limit "
                         f"and {'was' if len(timed_out) == 1 else 'were'} interrupted (an infinite loop?): "
                         f"{', '.join(timed_out)}")
        for gid, cell in cells.items():
            meta = cell.metadata.get("nbgrader", {})
            errors = _error_outputs(cell)
            if meta.get("solution") and errors and gid not in timed_out:
                notes.append(f"the answer cell {gid} raised {_describe_error(errors, timeout)}")
        manual = [t["grade_id"] for t in tests if t["needs_manual"]]
        if manual:
            status = "needs_manual"
            notes.insert(0, f"{_plural(len(manual), 'test')} need a manual grade: {', '.join(manual)}")
        else:
            status = "graded"
            notes.insert(0, f"all {_plural(len(tests), 'test')} passed" if not failed else
                         f"{len(failed)} of {_plural(len(tests), 'test')} failed: "
                         + ", ".join(t["grade_id"] for t in failed))
        reason = "; ".join(notes)
    score = _num(book[0]) if book else 0
    max_score = _num(book[1]) if book else _num(sum(points.values()))
    return {"assignment": assignment, "student": student, "score": score, "max_score": max_score,
            "status": status, "reason": reason, "timeout_s": _num(timeout),
            "duration_s": round(time.monotonic() - started, 2),
            "timestamp": book[2] if book else None, "tests": tests}


def assignment_cells(course_dir: Path, assignment: str):
    """(``{test grade_id: points}``, every nbgrader grade_id) of the source notebook."""
    nb = read_json(source_notebook(course_dir, assignment))
    return grade_points(nb), set(nbgrader_cells(nb))


# --- one notebook ----------------------------------------------------------------------------
@contextlib.contextmanager
def _quiet_stderr(enabled: bool):
    """Send fd 2 (ours and the kernels') to a temp file; replay it if something goes wrong."""
    if not enabled:
        yield None
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield log
        except BaseException:
            os.dup2(saved, 2)
            log.seek(0)
            sys.stderr.write(log.read().decode("utf-8", "replace")[-4000:])
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _timeout_overrides(timeout) -> dict:
    return {"Execute.timeout": int(timeout)} if timeout else {}


def _config_timeout(grader: NbGrader):
    return grader.config.Execute.timeout if "timeout" in grader.config.Execute else 30


def resolve(submission, assignment: str, course=None):
    """Check the arguments (UsageError) and return (course_dir, submission path)."""
    try:
        course_dir = find_course_dir(course)
        source_notebook(course_dir, assignment)
    except CourseError as exc:
        raise UsageError(str(exc)) from None
    path = Path(submission)
    if not path.is_file():
        raise UsageError(f"no such file: {submission}")
    return course_dir, path


def student_from_path(path: Path, assignment: str) -> str:
    """``submitted/<student>/<id>/<id>.ipynb`` -> ``<student>``; otherwise ``student``."""
    parts = Path(path).resolve().parts
    if len(parts) >= 3 and parts[-2] == assignment and parts[-3] not in ("", "/"):
        name = _STUDENT_RE.sub("_", parts[-3]).strip("_.")
        if name and parts[-4:-3] == ("submitted",):
            return name
    return "student"


def grade_submission(submission, assignment: str, *, course=None, timeout=None, student=None,
                     quiet: bool = True) -> dict:
    """Grade one notebook as ``assignment`` in a temp course; the result dict (see module doc)."""
    course_dir, path = resolve(submission, assignment, course)
    student = _STUDENT_RE.sub("_", student).strip("_.") if student else student_from_path(path, assignment)
    points, ids = assignment_cells(course_dir, assignment)
    problem = inspect_submission(path, assignment, ids)
    if problem:  # nbgrader would only fail on it (and leave a manual grade in a gradebook we discard)
        result = _failed_result(assignment, student or "student", points, problem)
        result.update(timeout_s=timeout, duration_s=0.0, submission=str(path))
        return result
    with _quiet_stderr(quiet), tempfile.TemporaryDirectory(prefix="kv-course-grade-") as tmp:
        root = stage_course(course_dir, Path(tmp) / "course", [assignment])
        grader = NbGrader(root, _timeout_overrides(timeout))
        grader.generate(assignment)
        result = grade_in_course(grader, assignment, student or "student", None, path, points, ids,
                                 _config_timeout(grader))
    result["submission"] = str(path)
    return result


def format_report(result: dict) -> str:
    """The human-readable report of one graded notebook."""
    lines = [f"{result['assignment']} / {result['student']}: {result['score']}/{result['max_score']} "
             f"points, {result['status']}",
             f"  {result['reason']}"]
    for t in result["tests"]:
        mark = "PASS" if t["passed"] else ("MANUAL" if t["needs_manual"] else "FAIL")
        lines.append(f"  {mark:<6} {t['grade_id']:<44} {t['points']}/{t['max_points']}")
        if t["feedback"]:
            lines.append(f"         {t['feedback']}")
    return "\n".join(lines)


# --- a whole class ------------------------------------------------------------------------
def _grade_chunk(course_dir: str, assignment: str, jobs: list, timeout, points: dict, ids: set) -> list:
    """Worker: grade ``[(student, folder)]`` in a course copy of its own."""
    results = []
    with _quiet_stderr(True), tempfile.TemporaryDirectory(prefix="kv-course-worker-") as tmp:
        root = stage_course(Path(course_dir), Path(tmp) / "course", [assignment])
        grader = NbGrader(root, _timeout_overrides(timeout))
        grader.generate(assignment)
        for student, folder, digest in jobs:
            try:
                result = grade_in_course(grader, assignment, student, Path(folder), None, points, ids,
                                         _config_timeout(grader))
            except Exception as exc:  # one broken submission must not sink the others
                result = _failed_result(assignment, student, points, f"grader failure: {exc!r}")
            result["sha256"] = digest
            results.append(result)
    return results


def _failed_result(assignment, student, points, reason) -> dict:
    return {"assignment": assignment, "student": student, "score": 0,
            "max_score": _num(sum(points.values())), "status": "error", "reason": reason,
            "timestamp": None,
            "tests": [{"grade_id": gid, "points": 0, "max_points": _num(p), "passed": False,
                       "needs_manual": True, "feedback": f"not graded: {reason}"}
                      for gid, p in points.items()]}


def _merge(gradebook, assignment: str, result: dict):
    """Write one worker result into the class gradebook (nbgrader's own tables)."""
    from datetime import datetime

    student = result["student"]
    gradebook.update_or_create_student(student)
    kwargs = {}
    if result.get("timestamp"):
        kwargs["timestamp"] = datetime.fromisoformat(result["timestamp"])
    gradebook.update_or_create_submission(assignment, student, **kwargs)
    by_id = {t["grade_id"]: t for t in result["tests"]}
    submission = gradebook.find_submission(assignment, student)
    for notebook in submission.notebooks:
        for grade in notebook.grades:
            test = by_id.get(grade.name)
            if test is None:
                continue
            grade.needs_manual_grade = bool(test["needs_manual"])
            grade.auto_score = None if (test["needs_manual"] and not test["points"]) else float(test["points"])
            grade.manual_score = None
    gradebook.db.commit()


def default_out_dir(submitted_dir: Path, assignment: str) -> Path:
    """Next to ``submitted/`` (nbgrader's course layout), unless that is in the checkout."""
    parent = Path(submitted_dir).resolve().parent
    if not inside_checkout(parent):
        return parent
    return Path(tempfile.gettempdir()) / "kv-course-grading"


def grade_class(submitted_dir, assignment: str, *, course=None, jobs=None, db_url=None, csv_path=None,
                out_dir=None, timeout=None, force=False, echo=print) -> dict:
    """Grade ``submitted/<student>/<assignment>/`` for every student; see the module doc."""
    try:
        course_dir = find_course_dir(course)
        source_notebook(course_dir, assignment)
    except CourseError as exc:
        raise UsageError(str(exc)) from None
    submitted = Path(submitted_dir)
    if not submitted.is_dir():
        raise UsageError(f"no such folder: {submitted_dir}")
    out = Path(out_dir) if out_dir else default_out_dir(submitted, assignment)
    out.mkdir(parents=True, exist_ok=True)
    db_url = db_url or f"sqlite:///{(out / 'gradebook.db').resolve()}"
    csv_path = Path(csv_path) if csv_path else out / f"{assignment}_grades.csv"
    results_dir = out / "results" / assignment
    results_dir.mkdir(parents=True, exist_ok=True)
    points, ids = assignment_cells(course_dir, assignment)
    started = time.monotonic()

    students = sorted(p.name for p in submitted.iterdir() if (p / assignment).is_dir())
    plan, skipped = [], []
    from nbgrader.api import Gradebook, MissingEntry

    with _quiet_stderr(True), tempfile.TemporaryDirectory(prefix="kv-course-class-") as tmp:
        # The class gradebook learns the assignment's cells the way nbgrader does it.
        book = NbGrader(stage_course(course_dir, Path(tmp) / "course", [assignment]),
                        {"CourseDirectory.db_url": db_url})
        book.generate(assignment)
        course_id = book.course_id
        with Gradebook(db_url, course_id) as gb:
            for student in students:
                folder = submitted / student / assignment
                digest = _sha256(folder / f"{assignment}.ipynb")
                stored = results_dir / f"{student}.json"
                try:
                    gb.find_submission(assignment, student)
                    in_book = True
                except MissingEntry:
                    in_book = False
                if (not force and in_book and stored.is_file()
                        and json.loads(stored.read_text()).get("sha256") == digest):
                    skipped.append(student)
                else:
                    plan.append((student, str(folder.resolve()), digest))

    jobs = max(1, min(jobs or os.cpu_count() or 1, len(plan) or 1))
    chunks = [plan[i::jobs] for i in range(jobs) if plan[i::jobs]]
    fresh = []
    if len(chunks) == 1:
        fresh = _grade_chunk(str(course_dir), assignment, chunks[0], timeout, points, ids)
    elif chunks:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(len(chunks), mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [(chunk, pool.submit(_grade_chunk, str(course_dir), assignment, chunk, timeout, points, ids))
                       for chunk in chunks]
            for chunk, future in futures:
                try:
                    fresh += future.result()
                except Exception as exc:  # a worker died: say so for each of its students
                    for student, _, digest in chunk:
                        fresh.append(dict(_failed_result(assignment, student, points,
                                                         f"grading worker failed: {exc!r}"), sha256=digest))

    with Gradebook(db_url, course_id) as gb:
        for result in fresh:
            _merge(gb, assignment, result)
            (results_dir / f"{result['student']}.json").write_text(json.dumps(result, indent=1) + "\n")
        results = [json.loads((results_dir / f"{s}.json").read_text()) for s in students]
        mismatched = []
        for result in results:
            book = gb.find_submission(assignment, result["student"])
            if abs(book.score - result["score"]) > 1e-9 or abs(book.max_score - result["max_score"]) > 1e-9:
                mismatched.append(result["student"])

    _write_csv(csv_path, results, points)
    summary = {"assignment": assignment, "students": len(results), "graded_now": len(fresh),
               "skipped": skipped, "jobs": len(chunks), "duration_s": round(time.monotonic() - started, 1),
               "gradebook": db_url, "csv": str(csv_path), "results": str(results_dir),
               "consistent": not mismatched, "mismatched": mismatched,
               "counts": {s: sum(r["status"] == s for r in results) for s in STATUSES},
               "rows": [{k: r[k] for k in ("student", "score", "max_score", "status", "reason")}
                        for r in results]}
    return summary


def _write_csv(path: Path, results: list, points: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "assignment", "status", "score", "max_score", *points, "reason"])
        for r in results:
            by_id = {t["grade_id"]: t["points"] for t in r["tests"]}
            writer.writerow([r["student"], r["assignment"], r["status"], r["score"], r["max_score"],
                             *(by_id.get(gid, 0) for gid in points), r["reason"]])


def format_summary(summary: dict) -> str:
    rows = summary["rows"]
    width = max([len(r["student"]) for r in rows] + [7])
    lines = [f"{summary['assignment']}: {summary['students']} students, {summary['graded_now']} graded now, "
             f"{len(summary['skipped'])} already graded (skipped), {summary['jobs']} worker(s), "
             f"{summary['duration_s']} s"]
    for r in rows:
        score = f"{r['score']}/{r['max_score']}"
        lines.append(f"  {r['student']:<{width}}  {score:>7}  {r['status']:<12}  {r['reason']}")
    counts = ", ".join(f"{n} {s}" for s, n in summary["counts"].items())
    lines += [f"statuses: {counts}", f"gradebook: {summary['gradebook']}", f"csv: {summary['csv']}"]
    if not summary["consistent"]:
        lines.append(f"INCONSISTENT gradebook for: {', '.join(summary['mismatched'])}")
    return "\n".join(lines)
