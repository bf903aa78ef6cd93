"""Grade submissions with nbgrader in a throwaway course, outside the checkout, sandboxed.

``grade_submission`` grades one notebook: a ``Grader`` stages the course in a
temp dir, generates the release there, puts the notebook in
``submitted/<student>/<id>/`` and runs ``nbgrader autograde`` with the kernel
``kv-sandboxed`` (``autograder.sandbox``: the whole notebook runs isolated, as
a job uid of its own when grading as root, talking to nbgrader over Unix
sockets). ``autograder.verdict`` then checks every exercise again, outside the
kernel (answer cells in the sandbox, results judged here, hidden cases from
the grading seed). Per test the lower of the two scores counts. The result::

    {"assignment", "student", "score", "max_score", "status", "reason",
     "isolation", "seed", "timeout_s", "verdict": {...},
     "tests": [{"grade_id", "points", "max_points", "passed", "needs_manual",
                "feedback", "nbgrader_points", "verdict_points",
                "slip", "slips", "attempted", "failures"}]}

``status`` is ``graded`` (every test scored automatically), ``needs_manual``
(nbgrader left points to a person: the kernel died, stopped answering or
ignored an interrupt) or ``error`` (nbgrader could not grade the file: empty,
not UTF-8, not JSON, not nbformat 4, another assignment's notebook).
``reason`` always says why in one line; a failed test's ``feedback`` is the
message of the AssertionError its check raised (the named slip), or the
outside check's when only that one failed, never the test's source.
``isolation`` names the sandbox level; ``seed`` where the hidden cases came
from (``grading_seed``). The outside check's diagnosis, as data (what
``autograder.report`` counts; ``autograder.verdict.slip_summary``): ``slips``,
per failed test, one entry per catalogued slip key that some failing case's
answer reproduces (``key``, ``parts``, ``combined`` for "a+b", two slips at
once, ``cases`` it reproduces of the ``of`` failing cases judged on their
value, an ``example`` answer); ``slip``, the key that reproduces all of them
(the diagnosis), or null; ``attempted``, false when every case met the
release's stub (NotImplementedError) or no such function; ``failures``, the
failing cases by kind (value, type, error, kvlib).

The grading modules, by job:

* ``autograder.grade`` (here) -- ``Grader`` (one course copy, one sandboxed
  kernelspec) and ``grade_submission`` (one notebook).
* ``autograder.intake`` -- the submission before nbgrader: copied, read once,
  refused in one line, its nbgrader flags reset.
* ``autograder.results`` -- nbgrader's results read back, combined with the
  verdict's (``combine``), the report.
* ``autograder.seed`` -- the grading seed of the hidden cases.
* ``autograder.classroom`` -- ``grade_class``: a whole class in parallel.
* ``autograder.verdict`` (+ ``verdict_runner``) -- the outside check.

The names the command line uses are importable from here too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import notebook as _nb
from .course import (
    CourseError,
    NbGrader,
    UsageError,
    find_course_dir,
    grade_points,
    inside_checkout,
    nbgrader_cells,
    read_json,
    source_notebook,
    stage_course,
)
from .intake import _STUDENT_RE, copy_submission, inspect_notebook, restore_metadata, student_from_path
from .results import (
    STATUSES,
    _annotate_autograded,
    _failed_result,
    _nbgrader_tests,
    _num,
    _plural,
    combine,
    format_report,
    pending,
)
from .seed import SEED_ENV, SEED_FILE_ENV, describe_seed, grading_seed

__all__ = ["Grader", "STATUSES", "SEED_ENV", "SEED_FILE_ENV", "UsageError", "combine", "describe_seed",
           "format_report", "grade_submission", "grading_seed", "inside_checkout", "resolve", "student_from_path"]


def notebook_wall_s(timeout) -> float:
    """The whole kernel's lifetime: ten cells' worth of the per-cell limit, at least 5 minutes."""
    return float(max(300, 10 * int(timeout or 30)))


def _short_tmp() -> str:
    """A temp dir whose paths stay short: a Unix socket path holds at most 107 bytes."""
    base = tempfile.gettempdir()
    if len(base) > 40 and os.path.isdir("/tmp") and os.access("/tmp", os.W_OK):
        base = "/tmp"
    return tempfile.mkdtemp(prefix="kvg-", dir=base)


@contextlib.contextmanager
def _env(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Grader:
    """One course copy, one sandboxed kernelspec, one ipc dir: grades students one after another.

    nbgrader runs the whole notebook in the kernel ``kv-sandboxed`` (the
    sandbox's launcher; as root, the kernel runs as a job uid of its own), and
    ``autograder.verdict`` checks every exercise again in another sandbox, from
    the instructor's source. Only results come out.
    """

    def __init__(self, course_dir: Path, assignment: str, *, timeout=None, seed: int | None = None,
                 seed_info: dict | None = None, db_url: str | None = None):
        from . import sandbox
        from .checks import schema
        from .kernel import use_in_nbgrader
        from .kernel_launcher import socket_dir, write_kernelspec
        from .packages import package_dirs

        use_in_nbgrader()  # messages to a kernel that broke its own connection time out
        self.level = sandbox.detect_level()
        sandbox.check_level(self.level)          # REQUIRE_ISOLATION=1: fail loudly, before any work
        self.assignment = assignment
        self.tmp = Path(_short_tmp())
        self.ipc = None
        self._found: list = []   # what the course config's OutsideCheck reported (autograder.outside_check)
        try:
            self.root = stage_course(course_dir, self.tmp / "course", [assignment])
            self.jupyter = self.tmp / "jupyter"
            self.ipc = Path(socket_dir())
            probe = NbGrader(self.root, _timeout_overrides(timeout))
            self.timeout = _config_timeout(probe)
            write_kernelspec(self.jupyter / "kernels", "kv-sandboxed", level=self.level,
                                     ro=package_dirs(),
                                     wall_s=notebook_wall_s(self.timeout))
            overrides = dict(_timeout_overrides(timeout))
            overrides.update({"Execute.kernel_name": "kv-sandboxed", "KernelManager.transport": "ipc",
                              "KernelManager.ip": str(self.ipc / "kernel"),
                              "SandboxedKernelManager.own_sandbox": False,    # ours: the spec and sockets above
                              # the course config's outside check, with this run's seed and level, reporting here
                              "OutsideCheck.seed": schema.DEFAULT_HIDDEN_SEED if seed is None else seed,
                              "OutsideCheck.level": self.level, "OutsideCheck.report": self._found.append})
            # its own throwaway gradebook, whatever the course config names (a class's gradebook is written
            # by grade-class alone, from the results)
            overrides["CourseDirectory.db_url"] = db_url or f"sqlite:///{self.root / 'gradebook.db'}"
            self.grader = NbGrader(self.root, overrides)
            self.grader.generate(assignment)
            self.points, self.ids = assignment_cells(self.root, assignment)
            self.reference = source_notebook(self.root, assignment)
            self.reference_nb = read_json(self.reference)
            self.manual = set(_nb.manual_points(self.reference_nb))   # written answers, tasks: a person's
            self.seed = seed
            self.seed_info = seed_info or ({"source": "the checks' default", "value": seed} if seed is not None
                                           else None)
        except BaseException:
            self.close()
            raise

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        if getattr(self, "ipc", None) is not None:
            shutil.rmtree(self.ipc, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _clear_ipc(self):
        for p in self.ipc.iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    p.unlink()

    def grade(self, student: str, folder: Path | None = None, notebook: Path | None = None,
              keep_autograded: bool = False, parsed: dict | None = None) -> dict:
        """Autograde ``student``'s submission (a ``submitted/<student>/<id>/`` folder or one notebook).

        The notebook is read once (``parsed``: already read from ``notebook``);
        nbgrader reads its own copy.
        """
        from . import verdict as _verdict

        assignment, grader = self.assignment, self.grader
        target = grader.root / "submitted" / student / assignment
        if target.exists():
            shutil.rmtree(target)
        dropped = []
        if folder is not None:
            dropped = copy_submission(Path(folder), target)
        else:
            target.mkdir(parents=True)
            shutil.copyfile(notebook, target / f"{assignment}.ipynb")
        path = target / f"{assignment}.ipynb"
        if parsed is not None and folder is None:
            sub, problem = parsed, None
        else:
            sub, problem = inspect_notebook(path, assignment, self.ids)
        if path.name in dropped:
            problem = f"{path.name} is a symbolic link or a special file, not a notebook (not followed)"
        repointed: dict = {}   # the source's points edited since the release: the instructor's change
        restored = [] if problem else restore_metadata(sub, self.reference_nb, path, repointed)
        started = time.monotonic()
        self._found.clear()
        if problem:
            run = {"success": False, "log": ""}
        else:
            try:
                with _env(JUPYTER_PATH=str(self.jupyter)):
                    run = grader.autograde(assignment, student)
            finally:
                self._clear_ipc()
        found = next((f for f in self._found if f.student == student), None)
        nb = _nbgrader_tests(grader, assignment, student, self.points, problem, run, self.timeout, found,
                             manual=self.manual)
        v = found.verdict if found is not None else None
        if v is None and not problem:   # nbgrader stopped before its outside check: check here
            step_s, wall_s = _verdict.verdict_limits(self.timeout)
            v = _verdict.grade(sub, assignment, reference=self.reference_nb, seed=self.seed, student=student,
                               sandbox=_verdict.make_sandbox(level=self.level, wall_s=wall_s), step_s=step_s)
        if dropped and not problem:
            nb["notes"].append(f"ignored {len(dropped)} link(s) or special file(s) in the submission folder: "
                               f"{', '.join(dropped[:5])}{' ...' if len(dropped) > 5 else ''}")
        if restored:
            nb["notes"].append(f"the nbgrader metadata of {_plural(len(restored), 'cell')} did not match the "
                               f"assignment (reset to the instructor's source; unknown ids dropped): "
                               f"{', '.join(restored)}")
        tests, status, reason = combine(nb, v, self.level)
        if nb["died"]:   # whatever killed the kernel (the student, or the machine), it is no grade to keep
            reason += "; graded again by the next run (a kernel death is never kept as a grade)"
        result = {"assignment": assignment, "student": student,
                  "score": _num(sum(float(t["points"]) for t in tests)), "max_score": nb["max_score"],
                  "status": status, "reason": reason, "pending": None if status == "error" else pending(tests),
                  "isolation": self.level, "seed": self.seed_info,
                  "timeout_s": _num(self.timeout), "duration_s": round(time.monotonic() - started, 2),
                  "timestamp": nb["book"][2] if nb["book"] else None, "tests": tests,
                  "repointed": {gid: list(pair) for gid, pair in repointed.items()},
                  "verdict": None if v is None else {
                      "status": v.status, "score": _num(v.score), "reason": v.reason, "runner": v.runner,
                      "isolation": v.isolation, "complete": v.complete, "wall_s": round(v.wall_s, 2)}}
        if nb["died"]:
            result["retry"] = True
        if keep_autograded:
            autograded = grader.root / "autograded" / student / assignment / f"{assignment}.ipynb"
            result["_autograded"] = (autograded.read_text(encoding="utf-8") if autograded.is_file() else None) \
                if found is not None else _annotate_autograded(autograded, tests)
        return result


def assignment_cells(course_dir: Path, assignment: str):
    """(``{test grade_id: points}``, every nbgrader grade_id) of the source notebook."""
    nb = read_json(source_notebook(course_dir, assignment))
    return grade_points(nb), set(nbgrader_cells(nb))


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


def _course_with(assignment: str, course=None) -> Path:
    """The course directory, once it is known to hold ``assignment``'s source (else UsageError)."""
    try:
        course_dir = find_course_dir(course)
        source_notebook(course_dir, assignment)
    except CourseError as exc:
        raise UsageError(str(exc)) from None
    return course_dir


def resolve(submission, assignment: str, course=None):
    """Check the arguments (UsageError) and return (course_dir, submission path)."""
    course_dir = _course_with(assignment, course)
    path = Path(submission)
    if not path.is_file():
        raise UsageError(f"no such file: {submission}")
    return course_dir, path


def grade_submission(submission, assignment: str, *, course=None, timeout=None, student=None,
                     quiet: bool = True) -> dict:
    """Grade one notebook as ``assignment`` in a temp course; the result dict (see module doc).

    Raises ``sandbox.IsolationError`` when REQUIRE_ISOLATION=1 and the
    machine's isolation is too weak (before anything runs).
    """
    from . import sandbox

    course_dir, path = resolve(submission, assignment, course)
    student = _STUDENT_RE.sub("_", student).strip("_.") if student else student_from_path(path, assignment)
    from . import preflight

    level = sandbox.detect_level()
    sandbox.check_level(level)
    seed, seed_info = grading_seed()
    points, ids = assignment_cells(course_dir, assignment)
    parsed, problem = inspect_notebook(path, assignment, ids)
    if not problem:   # a file nobody could grade needs no kernel to say so
        preflight.check(read_json(source_notebook(course_dir, assignment)), assignment, level)
    if problem:  # nbgrader would only fail on it (and leave a manual grade in a gradebook we discard)
        result = _failed_result(assignment, student or "student", points, problem)
        result.update(timeout_s=timeout, duration_s=0.0, submission=str(path), isolation=level, seed=seed_info)
        return result
    with _quiet_stderr(quiet), Grader(course_dir, assignment, timeout=timeout, seed=seed,
                                      seed_info=seed_info) as grader:
        result = grader.grade(student or "student", notebook=path, parsed=parsed)
    result["submission"] = str(path)
    if result.get("repointed"):
        result["reason"] += "; " + repointed_note(result["repointed"])
    return result


def repointed_note(repointed: dict, students: int | None = None) -> str:
    """The source's points edited since the release, in one line (said once, not as tampering)."""
    changes = ", ".join(f"{gid} {_num(old) if old is not None else '?'} -> {_num(new)}"
                        for gid, (old, new) in sorted(repointed.items()))
    whose = f"{students} submission(s)" if students is not None else "this notebook"
    return (f"points changed in the course's source since the release ({changes}): {whose} graded with the "
            f"source's points")
