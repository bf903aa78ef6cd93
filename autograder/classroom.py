"""Class grading: a whole ``submitted/`` folder, in parallel worker processes, into one gradebook.

``grade_class`` grades every student with a ``Grader`` per worker
(``autograder.grade``), writes each result as soon as it arrives (the
gradebook, ``<out>/results/<id>/<student>.json``, ``<out>/autograded/``),
then a CSV and, on request, feedback HTML. Students already graded from the
same file are skipped, so a killed run loses only the students in flight.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .course import NbGrader, UsageError, inside_checkout, stage_course
from .grade import Grader, _course_with, _quiet_stderr, assignment_cells
from .intake import _sha256
from .results import STATUSES, _failed_result, _num, _root_cause
from .seed import describe_seed, grading_seed

_WORKER: Grader | None = None


def _silence_stderr(directory: Path) -> None:
    """A worker's fd 2 (its own and its kernels') goes to a log file next to its course copy."""
    sys.stderr.flush()
    fd = os.open(directory / "worker-stderr.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)


def _worker_init(course_dir: str, assignment: str, timeout, seed, seed_info):
    """Pool initializer: this process's Grader (course copy, kernelspec, ipc dir)."""
    global _WORKER
    import multiprocessing.util

    _WORKER = Grader(Path(course_dir), assignment, timeout=timeout, seed=seed, seed_info=seed_info)
    _silence_stderr(_WORKER.tmp)
    multiprocessing.util.Finalize(_WORKER, _WORKER.close, exitpriority=10)


def _worker_grade(student: str, folder: str, digest: str) -> dict:
    return _grade_one(_WORKER, student, folder, digest)


def _grade_one(grader: Grader, student: str, folder: str, digest: str) -> dict:
    try:
        result = grader.grade(student, Path(folder), keep_autograded=True)
    except Exception as exc:  # one broken submission must not sink the others; graded again next run
        result = _failed_result(grader.assignment, student, grader.points, f"grader failure: {exc!r}")
        result.update(isolation=grader.level, seed=grader.seed_info, retry=True)
    result["sha256"] = digest
    return result


def _merge(gradebook, assignment: str, result: dict):
    """Write one result into the class gradebook (nbgrader's own tables): the combined points."""
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


def _write_atomic(path: Path, data: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(data, encoding="utf-8")
    os.replace(tmp, path)


def default_out_dir(submitted_dir: Path, assignment: str) -> Path:
    """Next to ``submitted/`` (nbgrader's course layout), unless that is in the checkout."""
    parent = Path(submitted_dir).resolve().parent
    if not inside_checkout(parent):
        return parent
    return Path(tempfile.gettempdir()) / "kv-course-grading"


def _results(plan: list, jobs: int, course_dir: Path, assignment: str, timeout, seed, seed_info, points):
    """Yield each student's result as soon as it is ready (in-process for one job, else a pool)."""
    if not plan:
        return
    if jobs == 1:
        with _quiet_stderr(True), Grader(course_dir, assignment, timeout=timeout, seed=seed,
                                         seed_info=seed_info) as grader:
            for student, folder, digest in plan:
                yield _grade_one(grader, student, folder, digest)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                             initargs=(str(course_dir), assignment, timeout, seed, seed_info)) as pool:
        futures = {pool.submit(_worker_grade, student, folder, digest): (student, digest)
                   for student, folder, digest in plan}
        for future in as_completed(futures):
            student, digest = futures[future]
            try:
                yield future.result()
            except Exception as exc:  # the worker died (killed, out of memory): graded again next run
                result = _failed_result(assignment, student, points, f"grading worker failed: {exc!r}")
                result.update(sha256=digest, retry=True, seed=seed_info)
                yield result


def grade_class(submitted_dir, assignment: str, *, course=None, jobs=None, db_url=None, csv_path=None,
                out_dir=None, timeout=None, force=False, feedback_dir=None, echo=print) -> dict:
    """Grade ``submitted/<student>/<assignment>/`` for every student; see the module doc.

    Each result goes into the gradebook and ``<out>/results/<id>/<student>.json``
    as soon as it is ready, so a run that is killed loses only the students in
    flight; the next run skips whoever is in both from the same file.
    """
    from . import sandbox

    course_dir = _course_with(assignment, course)
    submitted = Path(submitted_dir)
    if not submitted.is_dir():
        raise UsageError(f"no such folder: {submitted_dir}")
    level = sandbox.detect_level()
    sandbox.check_level(level)  # REQUIRE_ISOLATION=1: fail before grading anyone
    seed, seed_info = grading_seed()
    out = Path(out_dir) if out_dir else default_out_dir(submitted, assignment)
    out.mkdir(parents=True, exist_ok=True)
    db_url = db_url or f"sqlite:///{(out / 'gradebook.db').resolve()}"
    csv_path = Path(csv_path) if csv_path else out / f"{assignment}_grades.csv"
    results_dir = out / "results" / assignment
    results_dir.mkdir(parents=True, exist_ok=True)
    autograded_dir = out / "autograded"
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
            previous = _read_result(stored)
            if (not force and in_book and previous is not None and previous.get("sha256") == digest
                    and not previous.get("retry")):
                skipped.append(student)
            else:
                plan.append((student, str(folder.resolve()), digest))

    jobs = max(1, min(jobs or os.cpu_count() or 1, len(plan) or 1))
    fresh = []
    with Gradebook(db_url, course_id) as gb:
        for result in _results(plan, jobs, course_dir, assignment, timeout, seed, seed_info, points):
            notebook = result.pop("_autograded", None)
            _merge(gb, assignment, result)
            if notebook is not None:
                _write_atomic(autograded_dir / result["student"] / assignment / f"{assignment}.ipynb", notebook)
            _write_atomic(results_dir / f"{result['student']}.json", json.dumps(result, indent=1) + "\n")
            fresh.append(result["student"])

    with Gradebook(db_url, course_id) as gb:
        results = [_read_result(results_dir / f"{s}.json") for s in students]
        mismatched = []
        for result in results:
            book = gb.find_submission(assignment, result["student"])
            if abs(book.score - result["score"]) > 1e-9 or abs(book.max_score - result["max_score"]) > 1e-9:
                mismatched.append(result["student"])

    _write_csv(csv_path, results, points)
    feedback = None
    if feedback_dir:
        feedback = generate_feedback(course_dir, assignment, db_url, autograded_dir, Path(feedback_dir),
                                     [r["student"] for r in results])
    summary = {"assignment": assignment, "students": len(results), "graded_now": len(fresh),
               "skipped": skipped, "jobs": jobs if plan else 0, "duration_s": round(time.monotonic() - started, 1),
               "isolation": level, "seed": seed_info,
               "gradebook": db_url, "csv": str(csv_path), "results": str(results_dir),
               "autograded": str(autograded_dir), "feedback": feedback,
               "consistent": not mismatched, "mismatched": mismatched,
               "counts": {s: sum(r["status"] == s for r in results) for s in STATUSES},
               "rows": [{k: r.get(k) for k in ("student", "score", "max_score", "status", "reason", "isolation")}
                        for r in results]}
    return summary


def _read_result(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def feedback_preprocessors(root: Path) -> list:
    """The course config's feedback preprocessors, made safe whatever the config says.

    nbgrader's ClearHiddenTests also reads the student's own cells and raises
    on a "BEGIN HIDDEN TESTS" there (an answer that merely mentions it), which
    would cost that student their feedback: it is applied to test cells only.
    Student outputs are untrusted HTML: SanitizeActiveContent runs before the
    HTML is written, even when a course config leaves it out.
    """
    from nbgrader.preprocessors import ClearHiddenTests
    from traitlets.config.loader import PyFileConfigLoader

    from .feedback import ClearHiddenTestsInTestCells, SanitizeActiveContent

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    configured = config.GenerateFeedback.preprocessors if "preprocessors" in config.GenerateFeedback else None
    if not configured:
        from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
        from nbgrader.preprocessors import GetGrades
        configured = [GetGrades, ClearHiddenTestsInTestCells, CSSHTMLHeaderPreprocessor]
    chosen = [ClearHiddenTestsInTestCells if p is ClearHiddenTests else p for p in configured]
    return chosen if SanitizeActiveContent in chosen else chosen + [SanitizeActiveContent]


def generate_feedback(course_dir: Path, assignment: str, db_url: str, autograded_dir: Path, dest: Path,
                      students: list) -> dict:
    """nbgrader generate_feedback (the course config's preprocessors: grades, no hidden tests) for
    ``students``' autograded notebooks; HTML in ``dest/<student>/<assignment>/``. Runs no code."""
    written, missing = {}, []
    with _quiet_stderr(True), tempfile.TemporaryDirectory(prefix="kv-course-feedback-") as tmp:
        root = stage_course(course_dir, Path(tmp) / "course", [assignment])
        for student in students:
            src = autograded_dir / student / assignment
            if (src / f"{assignment}.ipynb").is_file():
                shutil.copytree(src, root / "autograded" / student / assignment, symlinks=True,
                                ignore=lambda d, names: [n for n in names if not n.endswith(".ipynb")])
            else:
                missing.append(student)
        grader = NbGrader(root, {"CourseDirectory.db_url": db_url,
                                 "GenerateFeedback.preprocessors": feedback_preprocessors(root)})
        failed = {}
        if len(missing) < len(students):
            run = grader.api.generate_feedback(assignment, "*")
            if not run["success"]:  # a notebook nbgrader cannot render: one student at a time, to name it
                for student in students:
                    if student in missing:
                        continue
                    run = grader.api.generate_feedback(assignment, student)
                    if not run["success"]:
                        failed[student] = _root_cause((run.get("log") or "") + (run.get("error") or ""))
        for student in students:
            html = root / "feedback" / student / assignment / f"{assignment}.html"
            if html.is_file():
                target = Path(dest) / student / assignment / f"{assignment}.html"
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(html, target)
                written[student] = str(target)
            elif student not in missing and student not in failed:
                failed[student] = "nbgrader wrote no feedback"
    return {"dir": str(dest), "written": len(written), "missing": sorted(missing), "failed": failed}


def _write_csv(path: Path, results: list, points: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "assignment", "status", "score", "max_score", *points, "isolation", "reason"])
        for r in results:
            by_id = {t["grade_id"]: t["points"] for t in r["tests"]}
            writer.writerow([r["student"], r["assignment"], r["status"], r["score"], r["max_score"],
                             *(by_id.get(gid, 0) for gid in points), r.get("isolation", ""), r["reason"]])


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
    lines += [f"statuses: {counts}",
              f"isolation: {summary['isolation']} (every notebook's kernel and the outside checks ran in this "
              f"sandbox); hidden cases: seed {describe_seed(summary.get('seed'))}",
              f"gradebook: {summary['gradebook']}", f"csv: {summary['csv']}"]
    if summary.get("feedback"):
        fb = summary["feedback"]
        lines.append(f"feedback: {fb['written']} HTML file(s) in {fb['dir']}"
                     + (f" (no autograded notebook for: {', '.join(fb['missing'])})" if fb["missing"] else ""))
        for student, why in fb["failed"].items():
            lines.append(f"  no feedback for {student}: {why}")
    if not summary["consistent"]:
        lines.append(f"INCONSISTENT gradebook for: {', '.join(summary['mismatched'])}")
    return "\n".join(lines)
