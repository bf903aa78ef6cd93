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
                "feedback", "nbgrader_points", "verdict_points"}]}

``status`` is ``graded`` (every test scored automatically), ``needs_manual``
(nbgrader left points to a person: the kernel died, stopped answering or
ignored an interrupt) or ``error`` (nbgrader could not grade the file: empty,
not UTF-8, not JSON, not nbformat 4, another assignment's notebook).
``reason`` always says why in one line; a failed test's ``feedback`` is the
message of the AssertionError its check raised (the named slip), or the
outside check's when only that one failed, never the test's source.
``isolation`` names the sandbox level; ``seed`` where the hidden cases came
from (``grading_seed``).

``grade_class`` grades a whole ``submitted/`` folder in parallel worker
processes, each with its own ``Grader``, and writes every result into one
gradebook, a JSON file per student and ``<out>/autograded/`` as soon as it
arrives; then a CSV and, on request, feedback HTML. Students already graded
from the same file are skipped.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import re
import secrets
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
from .kernel import UNREACHABLE

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
    """The file's hash; never follows a link (a submission is graded without it)."""
    if path.is_symlink():
        return "symlink"
    if not path.is_file():
        return "missing"
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


_FLAGS = ("grade", "solution", "locked", "task", "points", "schema_version")


def restore_metadata(path: Path, reference: dict) -> list:
    """Put the assignment's nbgrader flags back on the submission's cells; the ids it changed.

    A cell that claims a grade id of the assignment gets that cell's flags
    (grade, solution, locked, task, points) from the instructor's source; a
    cell whose nbgrader metadata names no such id (a renamed or invented id)
    loses it and becomes a plain cell (its code still runs). Tampered flags
    would otherwise make nbgrader fail on the whole notebook (an answer cell
    flagged as a test with 100 points) instead of grading it. The file is
    rewritten only when something changed.
    """
    nb = read_json(path)
    wanted = {}
    for cell in reference.get("cells", []):
        meta = (cell.get("metadata") or {}).get("nbgrader")
        if isinstance(meta, dict) and meta.get("grade_id"):
            wanted[meta["grade_id"]] = (cell.get("cell_type"), {k: meta[k] for k in _FLAGS if k in meta})
    changed = []
    for cell in nb.get("cells", []):
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        if not isinstance(meta, dict) or "nbgrader" not in meta:
            continue
        nbg = meta["nbgrader"]
        gid = nbg.get("grade_id") if isinstance(nbg, dict) else None
        if not isinstance(gid, str) or gid not in wanted or wanted[gid][0] != cell.get("cell_type"):
            del meta["nbgrader"]
            changed.append(str(gid)[:60] if gid else "(no id)")
            continue
        flags = wanted[gid][1]
        if any(nbg.get(k) != v for k, v in flags.items()) or any(k in nbg and k not in flags for k in _FLAGS):
            for k in _FLAGS:
                nbg.pop(k, None)
            nbg.update(flags)
            changed.append(gid)
    if changed:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed


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


def _nbgrader_tests(grader: NbGrader, assignment: str, student: str, points: dict, problem, run,
                    timeout) -> dict:
    """nbgrader's side of one grade: tests, status, notes (without the summary line)."""
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
        status = "needs_manual" if any(t["needs_manual"] for t in tests) else "graded"
    return {"tests": tests, "status": status, "notes": notes, "book": book,
            "max_score": _num(book[1]) if book else _num(sum(points.values()))}


def _summary_note(tests: list, status: str) -> str | None:
    """The first line of a reason: what passed, failed or waits for a person."""
    if status == "needs_manual":
        manual = [t["grade_id"] for t in tests if t["needs_manual"]]
        return f"{_plural(len(manual), 'test')} need a manual grade: {', '.join(manual)}" if manual else None
    failed = [t for t in tests if not t["passed"]]
    return (f"all {_plural(len(tests), 'test')} passed" if not failed else
            f"{len(failed)} of {_plural(len(tests), 'test')} failed: " + ", ".join(t["grade_id"] for t in failed))


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
            t.update(nbgrader_points=t["points"], verdict_points=0, points=0, passed=False,
                     feedback=f"not graded: {v.reason}")
        return tests, "error", f"the grader's check (outside the notebook) could not run: {v.reason}"
    lowered = []
    for t in tests:
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
    if lowered:
        notes.append(f"the grader's own check (run outside the notebook, in the {level} sandbox) failed "
                     f"{', '.join(lowered)}, which passed in the notebook")
    if v.reason and (lowered or status != "graded"):
        notes.append(f"outside check: {v.reason}")
    if status == "error":
        return tests, status, "; ".join(notes)
    head = _summary_note(tests, status)
    return tests, status, "; ".join(([head] if head else []) + notes)


def _annotate_autograded(path: Path, tests: list) -> str | None:
    """The autograded notebook's text, with the outside check's message under each test it failed
    that nbgrader passed (so that feedback shows why the points are gone). None if missing."""
    if not path.is_file():
        return None
    nb = read_json(path)
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


# --- the seed of the hidden cases -----------------------------------------------------------
SEED_ENV = "KV_COURSE_GRADING_SEED"
SEED_FILE_ENV = "KV_COURSE_GRADING_SEED_FILE"


def grading_seed() -> tuple[int, dict]:
    """(seed, what to record) for the hidden cases of the outside check.

    ``$KV_COURSE_GRADING_SEED`` (a class secret: an integer or any text), else
    the file named by ``$KV_COURSE_GRADING_SEED_FILE`` (outside the checkout),
    else a random seed for this run. A secret is recorded only as a
    fingerprint; a random seed by value (it is used once).
    """
    text, source = os.environ.get(SEED_ENV, "").strip(), f"${SEED_ENV}"
    if not text and os.environ.get(SEED_FILE_ENV, "").strip():
        path = Path(os.environ[SEED_FILE_ENV].strip()).expanduser()
        if inside_checkout(path):
            raise UsageError(f"${SEED_FILE_ENV} ({path}) is inside the checkout: keep the class secret "
                             "where students cannot read it")
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UsageError(f"cannot read ${SEED_FILE_ENV} ({path}): {exc.strerror}") from None
        if not text:
            raise UsageError(f"${SEED_FILE_ENV} ({path}) is empty")
        source = f"${SEED_FILE_ENV}"
    if text:
        seed = int(text) if re.fullmatch(r"-?\d{1,18}", text) else \
            int(hashlib.sha256(text.encode()).hexdigest()[:15], 16)
        return seed, {"source": source, "fingerprint": hashlib.sha256(str(seed).encode()).hexdigest()[:12]}
    seed = secrets.randbits(62)
    return seed, {"source": "random (this run)", "value": seed}


def describe_seed(info: dict | None) -> str:
    if not info:
        return "unknown"
    if "value" in info:
        return f"{info['value']} ({info['source']})"
    return f"from {info['source']} (fingerprint {info['fingerprint']})"


# --- a grader in one process: nbgrader's kernel and the verdict, both sandboxed ---------------
def notebook_wall_s(timeout) -> float:
    """The whole kernel's lifetime: ten cells' worth of the per-cell limit, at least 5 minutes."""
    return float(max(300, 10 * int(timeout or 30)))


def verdict_limits(timeout) -> tuple[float, float]:
    """(step_s, wall_s) of the outside check: a step like a cell, the whole like a few of them."""
    step = float(min(int(timeout or 30), 30))
    return step, 2 * step + 10


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


def _copy_submission(folder: Path, target: Path) -> list:
    """Copy a submission folder: regular files and folders only; the names of what was left out.

    Symbolic links and special files (fifos, devices, sockets) are not copied:
    nbgrader, running here (as root, when grading as root), would follow them
    to whatever they point at (another student, /dev/zero).
    """
    import stat

    dropped = []

    def ignore(directory, names):
        out = []
        for name in names:
            if name == ".ipynb_checkpoints":
                out.append(name)
                continue
            mode = os.lstat(os.path.join(directory, name)).st_mode
            if stat.S_ISLNK(mode) or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                out.append(name)
                dropped.append(os.path.relpath(os.path.join(directory, name), folder))
        return out

    shutil.copytree(folder, target, ignore=ignore, symlinks=True)
    return sorted(dropped)


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
        from .kernel import use_in_nbgrader
        from .verdict import _package_dir

        use_in_nbgrader()  # messages to a kernel that broke its own connection time out
        self.level = sandbox.detect_level()
        sandbox.check_level(self.level)          # REQUIRE_ISOLATION=1: fail loudly, before any work
        self.assignment = assignment
        self.tmp = Path(_short_tmp())
        try:
            self.root = stage_course(course_dir, self.tmp / "course", [assignment])
            self.jupyter = self.tmp / "jupyter"
            self.ipc = self.tmp / "ipc"
            self.ipc.mkdir(mode=0o700)
            probe = NbGrader(self.root, _timeout_overrides(timeout))
            self.timeout = _config_timeout(probe)
            sandbox.write_kernelspec(self.jupyter / "kernels", "kv-sandboxed", level=self.level,
                                     ro=[_package_dir("kvlib"), _package_dir("autograder")],
                                     wall_s=notebook_wall_s(self.timeout))
            overrides = dict(_timeout_overrides(timeout))
            overrides.update({"Execute.kernel_name": "kv-sandboxed", "KernelManager.transport": "ipc",
                              "KernelManager.ip": str(self.ipc / "kernel")})
            if db_url:
                overrides["CourseDirectory.db_url"] = db_url
            self.grader = NbGrader(self.root, overrides)
            self.grader.generate(assignment)
            self.points, self.ids = assignment_cells(self.root, assignment)
            self.reference = source_notebook(self.root, assignment)
            self.reference_nb = read_json(self.reference)
            self.seed = seed
            self.seed_info = seed_info or ({"source": "the checks' default", "value": seed} if seed is not None
                                           else None)
        except BaseException:
            self.close()
            raise

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

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
              keep_autograded: bool = False) -> dict:
        """Autograde ``student``'s submission (a ``submitted/<student>/<id>/`` folder or one notebook)."""
        from . import verdict as _verdict

        assignment, grader = self.assignment, self.grader
        target = grader.root / "submitted" / student / assignment
        if target.exists():
            shutil.rmtree(target)
        dropped = []
        if folder is not None:
            dropped = _copy_submission(Path(folder), target)
        else:
            target.mkdir(parents=True)
            shutil.copyfile(notebook, target / f"{assignment}.ipynb")
        path = target / f"{assignment}.ipynb"
        problem = inspect_submission(path, assignment, self.ids)
        if path.name in dropped:
            problem = f"{path.name} is a symbolic link or a special file, not a notebook (not followed)"
        restored = [] if problem else restore_metadata(path, self.reference_nb)
        started = time.monotonic()
        if problem:
            run = {"success": False, "log": ""}
        else:
            try:
                with _env(JUPYTER_PATH=str(self.jupyter)):
                    run = grader.autograde(assignment, student)
            finally:
                self._clear_ipc()
        nb = _nbgrader_tests(grader, assignment, student, self.points, problem, run, self.timeout)
        v = None
        if not problem:
            step_s, wall_s = verdict_limits(self.timeout)
            v = _verdict.grade(path, assignment, reference=self.reference, seed=self.seed,
                               sandbox=_verdict.make_sandbox(level=self.level, wall_s=wall_s), step_s=step_s)
        if dropped and not problem:
            nb["notes"].append(f"ignored {len(dropped)} link(s) or special file(s) in the submission folder: "
                               f"{', '.join(dropped[:5])}{' ...' if len(dropped) > 5 else ''}")
        if restored:
            nb["notes"].append(f"the nbgrader metadata of {_plural(len(restored), 'cell')} did not match the "
                               f"assignment (reset to the instructor's source; unknown ids dropped): "
                               f"{', '.join(restored)}")
        tests, status, reason = combine(nb, v, self.level)
        result = {"assignment": assignment, "student": student,
                  "score": _num(sum(float(t["points"]) for t in tests)), "max_score": nb["max_score"],
                  "status": status, "reason": reason, "isolation": self.level, "seed": self.seed_info,
                  "timeout_s": _num(self.timeout), "duration_s": round(time.monotonic() - started, 2),
                  "timestamp": nb["book"][2] if nb["book"] else None, "tests": tests,
                  "verdict": None if v is None else {
                      "status": v.status, "score": _num(v.score), "reason": v.reason, "runner": v.runner,
                      "isolation": v.isolation, "complete": v.complete, "wall_s": round(v.wall_s, 2)}}
        if keep_autograded:
            result["_autograded"] = _annotate_autograded(
                grader.root / "autograded" / student / assignment / f"{assignment}.ipynb", tests)
        return result


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
    """Grade one notebook as ``assignment`` in a temp course; the result dict (see module doc).

    Raises ``sandbox.IsolationError`` when REQUIRE_ISOLATION=1 and the
    machine's isolation is too weak (before anything runs).
    """
    from . import sandbox

    course_dir, path = resolve(submission, assignment, course)
    student = _STUDENT_RE.sub("_", student).strip("_.") if student else student_from_path(path, assignment)
    level = sandbox.detect_level()
    sandbox.check_level(level)
    seed, seed_info = grading_seed()
    points, ids = assignment_cells(course_dir, assignment)
    problem = inspect_submission(path, assignment, ids)
    if problem:  # nbgrader would only fail on it (and leave a manual grade in a gradebook we discard)
        result = _failed_result(assignment, student or "student", points, problem)
        result.update(timeout_s=timeout, duration_s=0.0, submission=str(path), isolation=level, seed=seed_info)
        return result
    with _quiet_stderr(quiet), Grader(course_dir, assignment, timeout=timeout, seed=seed,
                                      seed_info=seed_info) as grader:
        result = grader.grade(student or "student", notebook=path)
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
    lines.append(f"  isolation: {result.get('isolation', 'unknown')} (the notebook's kernel and the outside "
                 f"check ran in this sandbox); hidden cases: seed {describe_seed(result.get('seed'))}")
    return "\n".join(lines)


# --- a whole class ------------------------------------------------------------------------
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


def _failed_result(assignment, student, points, reason) -> dict:
    return {"assignment": assignment, "student": student, "score": 0,
            "max_score": _num(sum(points.values())), "status": "error", "reason": reason,
            "timestamp": None,
            "tests": [{"grade_id": gid, "points": 0, "max_points": _num(p), "passed": False,
                       "needs_manual": True, "feedback": f"not graded: {reason}"}
                      for gid, p in points.items()]}


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
