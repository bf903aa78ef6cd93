"""Class grading: a whole ``submitted/`` folder, in parallel worker processes, into one gradebook.

``grade_class`` grades every student with a ``Grader`` per worker
(``autograder.grade``), writes each result as soon as it arrives (the
gradebook, ``<out>/results/<id>/<student>.json``, ``<out>/autograded/``),
then a CSV and, on request, feedback HTML in nbgrader's feedback layout.
Before anyone is graded, ``autograder.preflight`` checks that the sandboxed
kernel sees the course's packages, and the gradebook's database is connected
to (``autograder.database``); a gradebook on a database server needs the class
secret, so that every grader draws the same hidden cases. After grading,
nbgrader's late policy is applied to the gradebook (``autograder.duedates``)
and, with ``lms="canvas"``, a Canvas gradebook import file is written from the
instructor's roster (``autograder.lms``). Students already graded with the same key (the
file, the grader's code, the course source, the seed; ``grading_key``) are
skipped, so a killed run loses only the students in flight; with no class
secret, the random seed is kept in the output folder (0600) for the next run.
The output folder and everything written there is its owner's only (folders
0700, files 0600).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import duedates
from .course import NbGrader, UsageError, inside_checkout, read_json, source_notebook, stage_course
from .grade import Grader, _course_with, _quiet_stderr, assignment_cells
from .intake import _sha256
from .results import STATUSES, _failed_result, _num, _root_cause
from .seed import SEED_ENV, SEED_FILE_ENV, class_secret_set, describe_seed, fingerprint, grading_seed

_WORKER: Grader | None = None


def _silence_stderr(directory: Path) -> None:
    """A worker's fd 2 (its own and its kernels') goes to a log file next to its course copy."""
    sys.stderr.flush()
    fd = os.open(directory / "worker-stderr.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)


def _worker_init(course_dir: str, assignment: str, timeout, seed, seed_info, jobs: int = 1):
    """Pool initializer: this process's Grader (course copy, kernelspec, ipc dir). ``jobs``: the pool's
    workers, whose jobs may all run at once as one uid (level rlimits unprivileged): each job's process
    limit leaves room for them (``autograder.sandbox.shared_jobs``; a larger SANDBOX_SHARED_JOBS stays)."""
    global _WORKER
    import multiprocessing.util

    from .sandbox import SHARED_JOBS_ENV, shared_jobs

    os.environ[SHARED_JOBS_ENV] = str(max(jobs, shared_jobs()))

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


def _merge(gradebook, assignment: str, result: dict, keep_manual: bool = False):
    """Write one result into the class gradebook (nbgrader's own tables): the combined points.

    A test left to a person (a written answer, a test the kernel never reached) keeps the score a
    person gave it in the formgrader when ``keep_manual`` (the same submission graded again); any
    other manual score belongs to an older submission and is cleared."""
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
            kept = keep_manual and test["needs_manual"] and grade.manual_score is not None
            grade.auto_score = None if (test["needs_manual"] and not test["points"]) else float(test["points"])
            grade.needs_manual_grade = bool(test["needs_manual"]) and not kept
            if not kept:
                grade.manual_score = None
    gradebook.db.commit()


def _write_atomic(path: Path, data: str):
    """``data`` into ``path`` (mode 0600; its folders 0700) by an atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(data)
    os.replace(tmp, path)


def class_course(submitted_dir) -> Path | None:
    """The nbgrader course folder that holds ``submitted/`` (it has an ``nbgrader_config.py``), or None:
    the course plain nbgrader would grade there, with its own ``source/`` and gradebook."""
    parent = Path(submitted_dir).resolve().parent
    return parent if (parent / "nbgrader_config.py").is_file() else None


def default_out_dir(submitted_dir: Path, course_id: str = "kv-course") -> Path:
    """The folder holding ``submitted/`` (nbgrader's course layout: the course folder itself when it is
    one, in the checkout or not), unless that is another folder inside the checkout; then the user's
    own data folder: ``$XDG_DATA_HOME/kv-course/grading/<course id>`` (default ``~/.local/share/...``),
    made 0700. Never a temp folder others could read or pre-create."""
    parent = Path(submitted_dir).resolve().parent
    if class_course(submitted_dir) is not None or not inside_checkout(parent):
        return parent
    base = os.environ.get("XDG_DATA_HOME", "").strip() or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "kv-course" / "grading" / course_id


def course_gradebook(course_dir: Path) -> str | None:
    """The gradebook nbgrader itself would use for ``course_dir``: ``CourseDirectory.db_url`` from the
    ``nbgrader_config.py`` files on Jupyter's config path (a grader's, ``course/jupyterhub/grader/``)
    and the course's own, the course's last; None when none sets it (nbgrader's default then is
    ``<course>/gradebook.db``)."""
    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    config = Config()
    for folder in [*reversed(jupyter_config_path()), str(course_dir)]:
        if (Path(folder) / "nbgrader_config.py").is_file():
            config.merge(PyFileConfigLoader("nbgrader_config.py", path=folder).load_config())
    url = config.CourseDirectory.db_url if "db_url" in config.CourseDirectory else None
    return str(url) if url else None


def _private_dir(path: Path, *, own: bool = True) -> Path:
    """``path`` made (with its parents) and, when ``own``, readable by its owner only (0700)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if own:
        os.chmod(path, 0o700)
    return path


def _tree_hash(paths) -> str:
    """One sha256 over every file below ``paths`` (names and bytes; caches left out)."""
    digest = hashlib.sha256()
    for root in paths:
        root = Path(root)
        files = [root] if root.is_file() else sorted(
            p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
        for p in files:
            digest.update(str(p.relative_to(root.parent)).encode() + b"\0" + p.read_bytes() + b"\0")
    return digest.hexdigest()


def grading_key(course_dir: Path, assignment: str, seed: int, level: str) -> dict:
    """What a stored result must share with this run to be kept: the grader's code, the course's
    source of ``assignment`` (and its config), the seed (by fingerprint), the sandbox level; the
    submission is added per student."""
    from .packages import package_dirs

    source = source_notebook(course_dir, assignment).parent
    return {"grader": _tree_hash(package_dirs())[:16],
            "course": _tree_hash([source, Path(course_dir) / "nbgrader_config.py"])[:16],
            "seed": fingerprint(seed), "isolation": level}


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
                             initargs=(str(course_dir), assignment, timeout, seed, seed_info, jobs)) as pool:
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


def _nbgrader_failed_all(result: dict) -> bool:
    """nbgrader gave no test a point while the outside check passed some: the notebook's kernel could
    not run the checks (a grading environment fault), or the student broke their own kernel."""
    tests = result.get("tests") or []
    return (result.get("status") == "graded" and bool(tests)
            and all(not float(t.get("nbgrader_points") or 0) for t in tests)
            and any(float(t.get("verdict_points") or 0) for t in tests))


class Progress:
    """One line per graded student on stderr: n of N, score, elapsed, time left.

    On a terminal the line is rewritten in place; in a log, one line each.
    Written to a duplicate of fd 2 taken at the start, so that it shows while
    the graders' own stderr is sent to a log.
    """

    def __init__(self, total: int, stream=None):
        self.total, self.done, self.started = total, 0, time.monotonic()
        stream = stream or sys.stderr
        stream.flush()
        self.fd = os.dup(stream.fileno())
        self.tty = os.isatty(self.fd)

    @staticmethod
    def _clock(seconds: float) -> str:
        seconds = int(round(seconds))
        return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

    def update(self, result: dict):
        self.done += 1
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done)
        line = (f"graded {self.done} of {self.total}: {result['student']} {result['score']}/{result['max_score']} "
                f"{result['status']}, elapsed {self._clock(elapsed)}, about {self._clock(left)} left")
        os.write(self.fd, (f"\r\x1b[K{line}" if self.tty else line + "\n").encode("utf-8", "replace"))

    def close(self):
        if self.tty and self.done:
            os.write(self.fd, b"\n")
        os.close(self.fd)


def grade_class(submitted_dir, assignment: str, *, course=None, jobs=None, db_url=None, csv_path=None,
                out_dir=None, timeout=None, force=False, feedback_dir=None, students=None,
                progress: bool = False, echo=print, lms: str | None = None, roster=None) -> dict:
    """Grade ``submitted/<student>/<assignment>/`` for every student (or only ``students``, regraded
    whatever is stored, everyone else kept); see the module doc.

    Each result goes into the gradebook and ``<out>/results/<id>/<student>.json``
    as soon as it is ready, so a run that is killed loses only the students in
    flight; the next run skips whoever is stored with the same key (the
    submission, the grader's code, the course source, the seed). Raises
    ``preflight.EnvironmentFault`` (nothing recorded) when the sandbox does not
    see the course's packages.
    """
    from . import preflight, sandbox
    from .database import exclusive, gradebook_url, shown

    submitted = Path(submitted_dir)
    if not submitted.is_dir():
        raise UsageError(f"no such folder: {submitted_dir}")
    home = None if course else class_course(submitted)   # the class's own course folder, as nbgrader's
    course_dir = _course_with(assignment, course or home)
    level = sandbox.detect_level()
    sandbox.check_level(level)  # REQUIRE_ISOLATION=1: fail before grading anyone
    everyone = sorted(p.name for p in submitted.iterdir() if (p / assignment).is_dir())
    chosen = list(dict.fromkeys(students or []))
    unknown = [s for s in chosen if s not in everyone]
    if unknown:
        raise UsageError(f"--student {unknown[0]}: no {submitted / unknown[0] / assignment} folder")
    canvas = _canvas_roster(lms, roster, assignment, everyone)
    points, ids = assignment_cells(course_dir, assignment)
    if not db_url and home is not None and not out_dir:   # the gradebook nbgrader uses for that course
        db_url = course_gradebook(home)
    if db_url:        # the cheap checks first: the database, then the sandboxed kernel
        db_url = gradebook_url(db_url)
    if db_url and not db_url.startswith("sqlite") and not class_secret_set():
        # a gradebook on a server is shared: graders that each drew their own random seed would grade one
        # class with different hidden cases
        raise UsageError(f"--db {shown(db_url)}: a gradebook on a database server is shared by every grader, who "
                         f"must all draw the same hidden cases: set the class secret ${SEED_ENV} (or "
                         f"${SEED_FILE_ENV}) on every grader's machine (docs/instructors.md, \"Several graders\")")
    preflight.check(read_json(source_notebook(course_dir, assignment)), assignment, level)
    course_id = _course_id(course_dir)
    out = Path(out_dir) if out_dir else default_out_dir(submitted, course_id)
    _private_dir(out, own=not out_dir and home is None and inside_checkout(submitted.resolve().parent))
    seed, seed_info = grading_seed(out)
    key = grading_key(course_dir, assignment, seed, level)
    sqlite = not db_url
    db_url = db_url or f"sqlite:///{(out / 'gradebook.db').resolve()}"
    csv_path = Path(csv_path) if csv_path else out / f"{assignment}_grades.csv"
    results_dir = _private_dir(out / "results" / assignment)
    os.chmod(out / "results", 0o700)
    autograded_dir = _private_dir(out / "autograded", own=home is None or bool(out_dir))   # a course's: nbgrader's
    started = time.monotonic()

    plan, skipped = [], []
    from nbgrader.api import Gradebook, MissingEntry

    with _quiet_stderr(True), tempfile.TemporaryDirectory(prefix="kv-course-class-") as tmp, \
            exclusive(db_url, f"kv-course gradebook set-up: {course_id}"):
        # The class gradebook learns the assignment's cells the way nbgrader does it (one grader at a time).
        book = NbGrader(stage_course(course_dir, Path(tmp) / "course", [assignment]),
                        {"CourseDirectory.db_url": db_url})
        book.generate(assignment)
        course_id = book.course_id
    if sqlite:
        os.chmod(out / "gradebook.db", 0o600)
    with Gradebook(db_url, course_id) as gb:
        for student in chosen or everyone:
            folder = submitted / student / assignment
            digest = _sha256(folder / f"{assignment}.ipynb")
            stored = results_dir / f"{student}.json"
            try:
                gb.find_submission(assignment, student)
                in_book = True
            except MissingEntry:
                in_book = False
            previous = _read_result(stored)
            if (not force and not chosen and in_book and previous is not None and previous.get("sha256") == digest
                    and previous.get("key") == key and not previous.get("retry")
                    and not _nbgrader_failed_all(previous)):
                skipped.append(student)
            else:
                plan.append((student, str(folder.resolve()), digest))

    jobs = max(1, min(jobs or os.cpu_count() or 1, len(plan) or 1))
    fresh = []
    shown_progress = Progress(len(plan)) if progress and plan else None
    try:
        with Gradebook(db_url, course_id) as gb:
            for result in _results(plan, jobs, course_dir, assignment, timeout, seed, seed_info, points):
                result["key"] = key
                notebook = result.pop("_autograded", None)
                _record(gb, assignment, result, results_dir)
                if notebook is not None:
                    _write_atomic(autograded_dir / result["student"] / assignment / f"{assignment}.ipynb",
                                  notebook)
                fresh.append(result)
                if shown_progress:
                    shown_progress.update(result)
    finally:
        if shown_progress:
            shown_progress.close()

    environment = None
    if fresh and all(_nbgrader_failed_all(r) for r in fresh):
        # Every notebook scored nothing in nbgrader while the outside check passed: the kernel could
        # not run the checks. An error to fix and grade again, not a class of zeros.
        environment = (f"nbgrader gave no points to any of the {len(fresh)} student(s) graded now while the "
                       "outside check passed some: the notebook's kernel could not run the checks (the "
                       "grading environment); these results are errors and are graded again next run")
        with Gradebook(db_url, course_id) as gb:
            for result in fresh:
                result.update(status="error", retry=True, reason=environment + "; " + result["reason"])
                for t in result["tests"]:
                    t.update(points=0, passed=False)
                result["score"] = 0
                _record(gb, assignment, result, results_dir)

    graded = [s for s in everyone if (results_dir / f"{s}.json").is_file()]
    with Gradebook(db_url, course_id) as gb:
        results = [_read_result(results_dir / f"{s}.json") for s in graded]
        mismatched = []
        for result in results:
            book = gb.find_submission(assignment, result["student"])
            # the automatic part: a score a person gave in the formgrader is theirs to differ
            auto = sum(g.auto_score or 0 for nb in book.notebooks for g in nb.grades)
            if abs(auto - result["score"]) > 1e-9 or abs(book.max_score - result["max_score"]) > 1e-9:
                mismatched.append(result["student"])

    with Gradebook(db_url, course_id) as gb:       # nbgrader's late policy, on everyone graded so far
        late = duedates.apply(gb, course_dir, assignment, submitted, [r["student"] for r in results])
    _write_csv(csv_path, results, points, late)
    report = _class_report(out, assignment, db_url, csv_path)
    feedback = None
    if feedback_dir:
        feedback = generate_feedback(course_dir, assignment, db_url, autograded_dir, Path(feedback_dir),
                                     [r["student"] for r in results], submitted=submitted)
    lms_export = None
    if canvas is not None:
        lms_export = _write_canvas(out, assignment, db_url, course_id, canvas, results, late)
    summary = {"assignment": assignment, "students": len(results), "graded_now": len(fresh),
               "skipped": skipped, "not_graded": [s for s in everyone if s not in graded],
               "jobs": jobs if plan else 0, "duration_s": round(time.monotonic() - started, 1),
               "isolation": level, "seed": seed_info, "out": str(out),
               "gradebook": shown(db_url), "csv": str(csv_path), "results": str(results_dir),
               "autograded": str(autograded_dir), "feedback": feedback, "report": report, "lms": lms_export,
               "environment_error": environment,
               "consistent": not mismatched, "mismatched": mismatched,
               "counts": {s: sum(r["status"] == s for r in results) for s in STATUSES},
               "repointed": _repointed(results),
               "rows": [dict({k: r.get(k) for k in ("student", "max_score", "status", "reason", "isolation",
                                                    "pending")},
                             **_late_fields(r, late)) for r in results]}
    return summary


def _late_fields(result: dict, late: dict) -> dict:
    """What a row adds about lateness; its ``score`` is the tests' points minus the late penalty (nbgrader
    export's ``score``), ``points`` the tests' points."""
    info = late.get(result["student"]) or {"submitted_at": "", "late_seconds": 0.0, "late_penalty": 0.0}
    return {"points": result["score"], "score": _num(max(0.0, float(result["score"]) - info["late_penalty"])),
            "submitted_at": info["submitted_at"], "late_seconds": _num(info["late_seconds"]),
            "late_penalty": _num(info["late_penalty"])}


def _canvas_roster(lms, roster, assignment: str, everyone: list):
    """(roster, {student: row}) for ``--lms canvas --roster FILE``, checked before anyone is graded; None without."""
    from . import lms as L

    if lms is None:
        if roster:
            raise UsageError("--roster goes with --lms canvas (the roster is your Canvas gradebook export)")
        return None
    if lms != "canvas":
        raise UsageError(f"--lms {lms}: unknown (known: canvas)")
    if not roster:
        raise UsageError("--lms canvas needs --roster FILE: your Canvas gradebook export (Grades, Export), which "
                         "holds the ids Canvas imports by")
    table = L.read_roster(roster, assignment)
    return table, table.match(everyone)


def _write_canvas(out: Path, assignment: str, db_url: str, course_id: str, canvas, results: list,
                  late: dict) -> dict:
    """``<out>/<assignment>_canvas.csv`` (``autograder.lms``): the gradebook's score minus the late penalty per
    graded submission; blank where a grade is still manual, the result is an error, or nothing was submitted."""
    from nbgrader.api import Gradebook, MissingEntry

    from . import lms as L

    roster, matched = canvas
    scores, blank = {}, {}
    with Gradebook(db_url, course_id) as gb:
        max_score = gb.find_assignment(assignment).max_score
        for result in results:
            student = result["student"]
            try:
                submission = gb.find_submission(assignment, student)
            except MissingEntry:
                blank[student] = "not in the gradebook"
                continue
            if result["status"] == "error":
                blank[student] = "not graded (error)"
            elif submission.needs_manual_grade:
                blank[student] = "needs a manual grade"
            else:
                penalty = (late.get(student) or {}).get("late_penalty", 0.0)
                scores[student] = max(0.0, float(submission.score) - float(penalty))
    path = L.canvas_path(out, assignment)
    _write_atomic(path, L.as_csv(L.canvas_table(roster, assignment, max_score, scores, matched)))
    unsubmitted = len(roster.rows) - len({id(row) for row in matched.values()})
    return {"lms": "canvas", "file": str(path), "column": roster.column or assignment, "scores": len(scores),
            "blank": blank, "not_submitted": unsubmitted}


def _repointed(results: list) -> dict | None:
    """The source's points edited since the release, over the class: ``{"cells": {grade_id: [released,
    now]}, "students": n}``, or None (said once in the summary, not in every student's reason)."""
    cells, students = {}, 0
    for r in results:
        if r.get("repointed"):
            students += 1
            cells.update(r["repointed"])
    return {"cells": cells, "students": students} if students else None


def report_paths(csv_path: Path, assignment: str) -> tuple[Path, Path]:
    """Where grade-class writes the class's slip report: beside its CSV."""
    return (csv_path.with_name(f"{assignment}_report.html"), csv_path.with_name(f"{assignment}_report.csv"))


def _class_report(out: Path, assignment: str, db_url: str, csv_path: Path) -> dict:
    """The slip report (``autograder.report``) beside the CSV; a fault there never fails the grading."""
    from . import report as R

    html_path, report_csv = report_paths(csv_path, assignment)
    try:
        written = R.write(R.class_report(out, assignment, db_url=db_url), html_path, report_csv)
    except Exception as exc:  # noqa: BLE001 -- the grades are written; say why the report is not
        return {"error": f"{type(exc).__name__}: {exc}"}
    return written


def _course_id(course_dir: Path) -> str:
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course_dir)).load_config()
    return str(config.CourseDirectory.course_id) if "course_id" in config.CourseDirectory else "kv-course"


def _record(gb, assignment: str, result: dict, results_dir: Path):
    """One result into the gradebook, then its JSON (the JSON last: it is what marks 'already graded').
    A manual grade given in the formgrader stays when the same submission is graded again."""
    previous = _read_result(results_dir / f"{result['student']}.json")
    same = previous is not None and previous.get("sha256") is not None and previous.get("sha256") == result.get("sha256")
    _merge(gb, assignment, result, keep_manual=same)
    _write_atomic(results_dir / f"{result['student']}.json", json.dumps(result, indent=1) + "\n")


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


#: What nbgrader's release_feedback reads next to each feedback HTML (nbgrader submit wrote both into
#: the submission; the exchange names the released file after the secret).
RELEASE_FILES = ("timestamp.txt", "submission_secret.txt")


def unreleased_dir(dest: Path) -> Path:
    """Where the feedback of students who cannot be released goes: beside ``dest``, never under it.

    ``nbgrader release_feedback`` reads every ``feedback/*/<assignment>/*.html`` and stops, for the
    whole class, at the first folder without ``submission_secret.txt`` (a submission put into
    ``submitted/`` by hand has none): those students' feedback must not be there."""
    dest = Path(dest)
    return dest.with_name(dest.name + "-not-released")


def generate_feedback(course_dir: Path, assignment: str, db_url: str, autograded_dir: Path, dest: Path,
                      students: list, submitted: Path | None = None) -> dict:
    """nbgrader generate_feedback (the course config's preprocessors: grades, no hidden tests) for
    ``students``' autograded notebooks. Runs no code.

    A student whose submission came through nbgrader's exchange (``timestamp.txt`` and
    ``submission_secret.txt`` beside the notebook) gets ``dest/<student>/<assignment>/<assignment>.html``
    with both files beside it: nbgrader's feedback layout, so with ``dest`` the course's ``feedback/``,
    ``nbgrader release_feedback`` releases it. Anyone else (handed in by e-mail, an LMS download) gets
    the same HTML in ``unreleased_dir(dest)/<student>/<assignment>/``, where release does not look, and
    is listed as ``unreleasable``; a copy left in the other place by an earlier run is removed."""
    written, missing, unreleasable = {}, [], []
    aside = unreleased_dir(dest)
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
                origin = submitted / student / assignment if submitted is not None else None
                releasable = origin is not None and all(_plain_small(origin / name) for name in RELEASE_FILES)
                released = Path(dest) / student / assignment / f"{assignment}.html"
                kept = aside / student / assignment / f"{assignment}.html"
                target, stale = (released, kept) if releasable else (kept, released)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(html, target)
                if releasable:
                    for name in RELEASE_FILES:
                        _copy_plain(origin / name, target.parent / name)
                else:
                    unreleasable.append(student)
                if stale.is_file() and not stale.is_symlink():
                    stale.unlink()
                written[student] = str(target)
            elif student not in missing and student not in failed:
                failed[student] = "nbgrader wrote no feedback"
    return {"dir": str(dest), "written": len(written), "files": written, "missing": sorted(missing),
            "failed": failed, "unreleasable": unreleasable, "unreleased_dir": str(aside) if unreleasable else None}


def _plain_small(path: Path) -> bool:
    """A small regular file (never a link a student planted)."""
    return not path.is_symlink() and path.is_file() and path.stat().st_size <= 4096


def _copy_plain(src: Path, dest: Path) -> bool:
    """Copy ``src`` if it is a small regular file (never a link a student planted); True if copied."""
    if not _plain_small(src):
        return False
    shutil.copyfile(src, dest)
    return True


def _write_csv(path: Path, results: list, points: dict, late: dict | None = None):
    """A row per student: ``score`` is the tests' points minus ``late_penalty`` (nbgrader export's ``score``), a
    column per test (its points), ``submitted_at`` (ISO 8601 UTC, from ``timestamp.txt``), ``late_seconds``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", newline="",
                   encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "assignment", "status", "score", "max_score", *points, "submitted_at",
                         "late_seconds", "late_penalty", "isolation", "reason"])
        for r in results:
            by_id = {t["grade_id"]: t["points"] for t in r["tests"]}
            fields = _late_fields(r, late or {})
            writer.writerow([r["student"], r["assignment"], r["status"], fields["score"], r["max_score"],
                             *(by_id.get(gid, 0) for gid in points), fields["submitted_at"], fields["late_seconds"],
                             fields["late_penalty"], r.get("isolation", ""), r["reason"]])


def format_summary(summary: dict) -> str:
    rows = summary["rows"]
    width = max([len(r["student"]) for r in rows] + [7])
    lines = [f"{summary['assignment']}: {summary['students']} students, {summary['graded_now']} graded now, "
             f"{len(summary['skipped'])} already graded (skipped), {summary['jobs']} worker(s), "
             f"{summary['duration_s']} s"]
    for r in rows:
        score = f"{r['score']}/{r['max_score']}"
        late = (f"late {Progress._clock(float(r['late_seconds']))}, penalty {r['late_penalty']}; "
                if r.get("late_seconds") else "")
        lines.append(f"  {r['student']:<{width}}  {score:>7}  {r['status']:<12}  {late}{r['reason']}")
    counts = ", ".join(f"{n} {s}" for s, n in summary["counts"].items())
    waiting = [r for r in rows if r.get("pending")]
    if waiting:
        points = _num(sum(float(r["pending"]["points"]) for r in waiting))
        counts += (f"; {len(waiting)} with points pending a manual grade in the formgrader ({points} in all: "
                   f"{', '.join(sorted({g for r in waiting for g in r['pending']['grade_ids']}))})")
    lines += [f"statuses: {counts}",
              f"isolation: {summary['isolation']} (every notebook's kernel and the outside checks ran in this "
              f"sandbox); hidden cases: seed {describe_seed(summary.get('seed'))}",
              f"gradebook: {summary['gradebook']}", f"csv: {summary['csv']}", f"output folder: {summary['out']}"]
    if summary.get("feedback"):
        fb = summary["feedback"]
        lines.append(f"feedback: {fb['written']} HTML file(s) in {fb['dir']}"
                     + (f" (no autograded notebook for: {', '.join(fb['missing'])})" if fb["missing"] else ""))
        for student, why in fb["failed"].items():
            lines.append(f"  no feedback for {student}: {why}")
        if fb.get("unreleasable"):
            lines.append(f"  not releasable (no submission_secret.txt or timestamp.txt: not submitted through "
                         f"nbgrader's exchange): {', '.join(fb['unreleasable'])}; their feedback is in "
                         f"{fb['unreleased_dir']}/<student>/{summary['assignment']}/ (hand it out yourself); "
                         f"nbgrader release_feedback releases everyone else's")
    report = summary.get("report") or {}
    if report.get("html"):
        lines.append(f"slip report: {report['html']} (and {report['csv']}; "
                     f"python -m autograder report {summary['out']} --assignment {summary['assignment']} --names "
                     "names the students)")
    elif report.get("error"):
        lines.append(f"slip report not written: {report['error']}")
    exported = summary.get("lms")
    if exported:
        blank = "; ".join(f"{s} ({why})" for s, why in exported["blank"].items())
        lines.append(f"canvas: {exported['file']} (column {exported['column']!r}: {exported['scores']} score(s)"
                     + (f"; left blank: {blank}" if blank else "")
                     + (f"; {exported['not_submitted']} roster student(s) without a submission, left blank"
                        if exported["not_submitted"] else "") + ")")
    if summary.get("repointed"):
        from .grade import repointed_note
        lines.append(repointed_note(summary["repointed"]["cells"], summary["repointed"]["students"]))
    if summary.get("not_graded"):
        lines.append(f"not graded yet: {', '.join(summary['not_graded'])}")
    if summary.get("environment_error"):
        lines.append(f"ERROR: {summary['environment_error']}")
    if not summary["consistent"]:
        lines.append(f"INCONSISTENT gradebook for: {', '.join(summary['mismatched'])}")
    return "\n".join(lines)
