"""Each exercise's verdict, decided outside the student's process.

nbgrader runs the student's whole notebook in one kernel and believes what
the test cells print. Code in that kernel can patch ``showtraceback``,
builtins, kvlib or the checks, and so turn every failing test into a pass.
The verdict does not trust the kernel:

1. From the *reference* notebook (the instructor's source, or the release;
   never the submission) it takes the order of the answer cells
   (``solution: true``) and of the test cells (``grade: true``) with their
   grade ids and points. The submission's metadata only locates its answer
   cells; points, grade flags and test cells in the submission are ignored.
2. A small runner (``autograder/verdict_runner.py``, standard library only at
   start-up; ``python -I -S`` in the sandbox of ``autograder.sandbox``) runs
   the setup cell's imports (the prelude), then the submission's answer
   cells, each after the code cells the student added above it
   (``added_sources``: a helper, an import), in reference order, and at each test cell's place
   calls the student's function on the exercise's cases (visible and
   hidden, generated here and passed in as JSON), or, for a value exercise,
   reads the number the answer cell bound to its name. The runner sees the
   graded student as ``KV_COURSE_GRADING_STUDENT`` (``with_student``), so an
   answer cell that draws the learner's question draws the submission's. It prints one JSON record
   per case (``autograder.checks.answers``: the exact type, and the value
   only for the answer types). The student's own printing goes to /dev/null.
3. Here, outside, every record is re-checked (``answers.clean``: a value
   counts only if it fits its type exactly: no bool for an int, no float
   look-alike), compared with kvlib's expected value and judged by
   ``autograder.checks.judge`` and ``diagnosis`` (the coach's slip catalogue names the mistake,
   across every failing case). A case of a step that builds on an earlier one
   is right on kvlib's value or on the one the learner's own earlier answers
   imply (the earlier step's records of the same cases). An exercise passes
   when every case passes; it then earns its points.

A runner that dies (``os._exit``, a segfault, the memory, CPU or wall-time
limit, too much output) fails every exercise it had not reported, with the
reason. Patches made inside the sandbox never reach this process.

The grading pipeline combines this with nbgrader's result per test:
final score = min(nbgrader's score, the verdict's score).
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import notebook as _nb
from . import sandbox as _sandbox
from .notebook import Layout, NotebookError  # noqa: F401 -- part of this module's API
from .packages import package_dir, package_dirs

DEFAULT_STEP_S = 10.0     # one answer cell, or one exercise's cases (SIGALRM in the runner)
DEFAULT_WALL_S = 60.0     # the whole runner


def verdict_limits(timeout) -> tuple[float, float]:
    """(step_s, wall_s) of the outside check for nbgrader's per-cell ``timeout``: a step like a cell, the whole
    like a few of them."""
    step = float(min(int(timeout or 30), 30))
    return step, 2 * step + 10


MAX_INT_DIGITS = 4000     # longer integers are not read back (Python's own limit is 4300)
RUNNER = Path(__file__).with_name("verdict_runner.py")


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------
@dataclass
class ExerciseVerdict:
    grade_id: str
    points: float
    max_points: float
    passed: bool
    feedback: str
    cases: int = 0
    cases_passed: int = 0
    slips: list = field(default_factory=list)    # the catalogued slips of the failing cases (``slip_summary``)
    attempted: bool = True                        # False: every case met the release's stub (or no function)
    failures: dict = field(default_factory=dict)  # failing cases by kind: value, type, error, kvlib

    def as_test(self) -> dict:
        """The shape of one entry of the grading JSON's ``tests``."""
        return {"grade_id": self.grade_id, "points": self.points, "max_points": self.max_points,
                "passed": self.passed, "feedback": self.feedback, "slips": self.slips,
                "attempted": self.attempted, "failures": self.failures}


@dataclass
class Verdict:
    assignment: str
    status: str                   # "graded" | "error"
    reason: str = ""
    tests: list = field(default_factory=list)
    isolation: str = ""           # the sandbox level the runner ran under
    complete: bool = False        # the runner reported every exercise
    seed: int | None = None
    wall_s: float = 0.0
    runner: str = ""              # how the runner ended, in words

    @property
    def score(self) -> float:
        return sum(t.points for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_points for t in self.tests)

    def by_grade_id(self) -> dict:
        return {t.grade_id: t for t in self.tests}

    def as_dict(self) -> dict:
        d = asdict(self)
        d["score"], d["max_score"] = self.score, self.max_score
        d["tests"] = [t.as_test() for t in self.tests]
        return d


SubmissionError = NotebookError   # the submission is not a readable nbformat-4 notebook
read_notebook = _nb.read


def layout(reference: dict, exercises: dict | None = None) -> Layout:
    """The reference's answer and test cells, and the prelude: the setup cell's imports of the
    standard library, the course's packages and the modules the exercises allow."""
    allowed = {m.split(".")[0] for ex in (exercises or {}).values() for m in getattr(ex, "modules", ())}
    return _nb.layout(reference, allowed)


def added_sources(submission: dict, reference: dict, step_ids) -> dict:
    """``{grade_id: [source, ...]}``: the code cells the student added, each under the first answer or
    test cell (``step_ids``) that follows it in the submission, in order.

    A cell is the student's own when it is a code cell without an nbgrader grade id that the reference
    does not hold: by cell id (nbformat 4.5: the release keeps the source's ids, JupyterLab gives a new
    cell a new one), or, in a notebook without ids, by its text. Cells after the last answer and test
    cell can change no check and are left out.
    """
    ids = {c.get("id") for c in reference.get("cells", []) if c.get("id")}
    texts = {_nb.source(c) for c in reference.get("cells", []) if c.get("cell_type") == "code"}
    wanted = set(step_ids)
    found: dict = {}
    pending: list = []
    for cell in submission.get("cells", []):
        gid = _nb.nbgrader_meta(cell).get("grade_id")
        if gid in wanted:
            if pending:
                found.setdefault(gid, []).extend(pending)
                pending = []
            continue
        if cell.get("cell_type") != "code" or gid:
            continue
        own = cell.get("id") not in ids if (cell.get("id") and ids) else _nb.source(cell) not in texts
        if own and _nb.source(cell).strip():
            pending.append(_nb.source(cell))
    return found


def answer_sources(submission: dict, answer_ids) -> dict:
    """``{grade_id: [source, ...]}``: the submission's code cells that claim a reference answer id."""
    wanted = set(answer_ids)
    found: dict = {gid: [] for gid in answer_ids}
    for cell in submission["cells"]:
        meta = _nb.nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if cell.get("cell_type") == "code" and meta.get("solution") and gid in wanted:
            found[gid].append(_nb.source(cell))
    return found


# ---------------------------------------------------------------------------
# Exercises, references, and the sandbox the runner needs
# ---------------------------------------------------------------------------
def load_exercises(assignment: str) -> dict:
    """``{grade_id: Exercise}`` of the chapter (the registry: ``autograder.checks.<chNN>``)."""
    from .checks import chapter_exercises
    return chapter_exercises(assignment)


def reference_notebook(assignment: str, course_dir=None) -> Path:
    """The instructor's source notebook of ``assignment`` (the grader's trusted copy)."""
    from .course import find_course_dir, source_notebook
    return source_notebook(find_course_dir(course_dir), assignment)


_package_dir = package_dir   # older callers


def runner_paths() -> tuple[list, list]:
    """(read-only binds, sys.path for the runner): the interpreter, site-packages, the course's packages."""
    import os
    import sysconfig

    code = package_dirs()
    binds = _sandbox.python_binds(site_packages=True) + code
    site = os.path.realpath(sysconfig.get_paths()["purelib"])
    sys_path = list(dict.fromkeys(os.path.dirname(p) for p in code)) + [site]
    return binds, sys_path


def make_sandbox(level=None, *, wall_s=DEFAULT_WALL_S, enforce_minimum=True, **limit_overrides):
    """The sandbox the runner uses: ``Limits`` from the time budget, binds from ``runner_paths``.

    ``level``: None = the strongest here (``autograder.sandbox.detect_level``);
    ``enforce_minimum=False`` allows a level below REQUIRE_ISOLATION's minimum (tests only).
    """
    binds, _ = runner_paths()
    cpu = int(math.ceil(wall_s)) + 1
    limits = _sandbox.Limits(wall_s=wall_s, cpu_s=cpu, **limit_overrides)
    return _sandbox.Sandbox(level=level, limits=limits, binds=binds, enforce_minimum=enforce_minimum)


def with_student(box, student: str | None):
    """A copy of ``box`` whose command sees the graded ``student`` as ``KV_COURSE_GRADING_STUDENT``
    (a notebook that draws its question while it runs draws the submission's); without one, a copy
    that sees none."""
    import copy

    box = copy.copy(box)
    box.env = {k: v for k, v in box.env.items() if k != _sandbox.GRADING_STUDENT_ENV}
    if student:
        box.env[_sandbox.GRADING_STUDENT_ENV] = student
    return box


# ---------------------------------------------------------------------------
# Judging
# ---------------------------------------------------------------------------
def _clean_record(record) -> dict:
    """Keep only well-formed fields of a record the runner (or the student) printed."""
    from .checks import answers

    bad = {"error": "ValueError", "error_message": "the result could not be read back "
                                                  "(an integer too large, or a malformed record)"}
    if not isinstance(record, dict):
        return bad
    if isinstance(record.get("error"), str):
        out = {"error": record["error"][:100], "error_message": str(record.get("error_message", ""))[:300]}
    else:
        out = answers.clean(record)
        if out is None:
            return bad
    calls = record.get("kvlib_calls")
    if isinstance(calls, list) and calls:
        out["kvlib_calls"] = [str(c)[:80] for c in calls[:10]]
        if not all(isinstance(c, str) for c in calls):
            return bad
    return out


def _parse_lines(stdout: bytes) -> list:
    out = []
    for line in stdout.split(b"\n"):
        line = line.strip()
        if not line or len(line) > 4_000_000:
            continue
        try:
            obj = json.loads(line, parse_int=_bounded_int, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError("integer too long")
    return int(text)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _judge_exercise(exercise, gid: str, points: float, cases, hidden_from: int, records,
                    earlier=None, cell_failed: bool = False) -> tuple[ExerciseVerdict, list]:
    """(the verdict on one exercise, the learner's answers for the steps that build on it: visible, hidden).

    ``earlier``: that pair from the step this one builds on. Each part is aligned with its own kind of
    case, as the notebook's check keeps them: a step may have visible cases of its own (an edge) that
    the earlier step has not, so its hidden cases start later in its list than the earlier step's do.
    ``cell_failed``: an answer cell before this test raised (a SyntaxError, a NameError at top level):
    the learner wrote something, so a function it left undefined was attempted.
    """
    from .checks import diagnosis, judge, runner
    records = [_clean_record(records[k]) if k < len(records) else {
        "error": "RuntimeError", "error_message": "no result for this case"} for k in range(len(cases))]
    answers_given = runner.learner_answers(exercise, records)
    answers_given = (answers_given[:hidden_from], answers_given[hidden_from:])
    parts, judged = [], []
    for part, (hidden, lo, hi) in enumerate(((False, 0, hidden_from), (True, hidden_from, len(cases)))):
        prior = earlier[part] if earlier is not None else None
        try:
            results = judge.verdicts(exercise, cases[lo:hi], records[lo:hi], hidden=hidden, earlier=prior)
            message = diagnosis.summarise(exercise, cases[lo:hi], results, hidden=hidden, earlier=prior,
                                     records=records[lo:hi])
        except Exception as exc:  # noqa: BLE001 -- a record nobody foresaw is a failure, not a crash
            results, message = [], f"the result could not be judged ({type(exc).__name__})"
        parts.append((sum(v.ok for v in results), hi - lo, message))
        judged += [(case, record, v, hidden, v.built_on)
                   for case, record, v in zip(cases[lo:hi], records[lo:hi], results)]
    passed = sum(p[0] for p in parts)
    failing = [p[2] for p in parts if p[2] is not None]
    if not failing:
        text = (judge.passed_line(exercise, len(cases)) if getattr(exercise, "value", False)
                else f"✓ {exercise.function_name}: all {len(cases)} cases right ({gid})")
        return ExerciseVerdict(gid, points, points, True, text, len(cases), passed), answers_given
    more = "" if len(failing) == 1 else "\n(Hidden cases fail too.)"
    return (ExerciseVerdict(gid, 0.0, points, False, f"✗ {gid}: {failing[0]}{more}", len(cases), passed,
                            slips=slip_summary(exercise, judged),
                            attempted=not all(_untouched(r, exercise.function_name, cell_failed)
                                              for r in records),
                            failures=_failure_kinds(judged)),
            answers_given)


def _untouched(record: dict, function_name: str, cell_failed: bool) -> bool:
    """The case met the release's stub (NotImplementedError), or no function ``function_name`` while its answer
    cells raised nothing (an empty cell). A NameError raised inside the learner's own function (``name
    'per_token' is not defined``), or a function missing because its cell did not run (a SyntaxError), is an
    attempt that failed: the slip report counts it as zero, not as not attempted."""
    error = record.get("error")
    if error == "NotImplementedError":
        return True
    return (error == "NameError" and not cell_failed
            and record.get("error_message") == f"name {function_name!r} is not defined")


def slip_summary(exercise, judged) -> list:
    """The catalogued slips behind an exercise's failing cases, as the grading JSON stores them.

    ``judged``: ``(case, record, judge.CaseVerdict, hidden, earlier)`` per case (``earlier``: the learner's
    answer to the step it builds on that the case was judged on, ``judge.CaseVerdict.built_on``; kvlib's value
    when ``schema.NOT_BUILT_ON``). One entry per slip key that some
    failing case's answer reproduces (``judge.CaseVerdict.slips``, from ``kvlib.slips``), the keys that
    explain the most failing cases first::

        {"key": "query_heads+missing_kv_factor", "parts": ["query_heads", "missing_kv_factor"],
         "combined": true, "cases": 3, "of": 3, "example": {"case": "...", "answer": 65536,
         "expected": 131072, "hidden": false}}

    ``cases``: the failing cases it reproduces, ``of``: the failing cases judged on their value (``cases
    == of``: it explains all of them). Failure kinds that are not slips (an error, a wrong type, a kvlib
    call) are left out. ``example``: the first such case, visible before hidden; a hidden one gives only
    the answer, and a value exercise (the learner's own problem) no case.
    """
    from kvcoach import slips as catalogue

    from .checks import answers

    failing = [item for item in judged if not item[2].ok and item[2].kind == "value"]
    found: dict = {}
    for case, record, v, hidden, earlier in sorted(failing, key=lambda item: item[3]):   # visible first (stable)
        for key in v.slips:
            if not all(part in catalogue.SLIPS for part in key.split(catalogue.COMBINED)):
                continue
            entry = found.get(key)
            if entry is None:
                try:
                    answer = answers.decode(record)
                except answers.RecordError:
                    answer = record.get("number")
                example = {"case": None if (hidden or getattr(exercise, "value", False)) else case.get("label"),
                           "answer": list(answer) if isinstance(answer, tuple) else answer, "hidden": hidden}
                if not hidden:
                    expected = (exercise.expected_for(case, earlier) if getattr(exercise, "builds_on", None)
                                else exercise.expected_for(case))
                    example["expected"] = list(expected) if isinstance(expected, tuple) else expected
                entry = found[key] = {"key": key, "parts": key.split(catalogue.COMBINED),
                                      "combined": catalogue.COMBINED in key, "cases": 0, "of": len(failing),
                                      "example": example}
            entry["cases"] += 1
    return sorted(found.values(), key=lambda e: -e["cases"])


def _failure_kinds(judged) -> dict:
    """``{kind: failing cases}`` (``judge.CaseVerdict.kind``: value, type, error, kvlib)."""
    out: dict = {}
    for item in judged:
        if not item[2].ok:
            out[item[2].kind or "other"] = out.get(item[2].kind or "other", 0) + 1
    return out


def named_slip(slips: list) -> str | None:
    """The diagnosis of an exercise: the first slip (catalogue order) that reproduces every failing case
    judged on its value, or None when no one slip does (``slip_summary``'s entries)."""
    return next((e["key"] for e in slips if e["cases"] == e["of"]), None)


def _runner_path() -> Path:
    """The runner inside the (read-only, bound) autograder package."""
    return Path(package_dir("autograder")) / RUNNER.name


def _step_name(step: dict) -> str:
    if step["kind"] == "prelude":
        return "the setup imports"
    if step["kind"] == "cell":
        return f"answer cell {step['gid']}"
    if step["kind"] == "added":
        return f"a cell you added above {step['gid']}"
    return f"the check of {step['gid']}"


def grade(submission, assignment: str = "ch01_kv_formula", *, reference=None, course_dir=None,
          exercises: dict | None = None, seed: int | None = None, sandbox=None,
          step_s: float = DEFAULT_STEP_S, wall_s: float = DEFAULT_WALL_S, student: str | None = None) -> Verdict:
    """The verdict on one submission (bytes, text, path or dict). Never raises for a bad submission.

    ``reference``: the trusted notebook (path or dict; default: the course's
    source notebook of ``assignment``). ``exercises``: ``{grade_id: Exercise}``
    (default: ``autograder.checks.<chNN>.EXERCISES``). ``seed``: hidden cases
    (default: the checks' ``DEFAULT_HIDDEN_SEED``, as the hidden test cells).
    ``sandbox``: an ``autograder.sandbox.Sandbox`` (default: ``make_sandbox``).
    ``student``: the learner's id, for exercises with per-learner cases (value exercises are judged
    against this id's problems, whatever the notebook claims); the runner sees it as
    ``KV_COURSE_GRADING_STUDENT``.
    """
    start = time.monotonic()
    from .checks import schema
    seed = schema.DEFAULT_HIDDEN_SEED if seed is None else seed
    verdict = Verdict(assignment, "error", seed=seed)
    try:
        ref = read_notebook(reference if reference is not None else reference_notebook(assignment, course_dir))
        exercises = load_exercises(assignment) if exercises is None else exercises
        lay = layout(ref, exercises)
    except Exception as exc:  # noqa: BLE001 -- the grader's own setup: report, do not crash
        verdict.reason = f"cannot load the reference or the exercises of {assignment}: {exc}"
        return verdict
    unknown = [gid for gid in lay.tests if gid not in exercises]
    verdict.tests = [ExerciseVerdict(gid, 0.0, pts, False, "") for gid, pts in lay.tests.items()]

    def fail_all(status: str, reason: str) -> Verdict:
        verdict.status, verdict.reason = status, reason
        for t in verdict.tests:
            t.points, t.passed, t.feedback = 0.0, False, reason
        verdict.wall_s = time.monotonic() - start
        return verdict

    if unknown:
        return fail_all("error", "no automatic check for " + ", ".join(unknown))
    try:
        sub = read_notebook(submission)
    except SubmissionError as exc:
        return fail_all("error", str(exc))

    # The plan: the reference's order; the student's sources: answer cells, and the cells they added
    # above an answer or a test cell, run just before it (as they ran in the notebook).
    sources = answer_sources(sub, lay.answer_ids)
    added = added_sources(sub, ref, [step[1] for step in lay.steps])
    steps, cases_of = [], {}
    if lay.prelude:
        steps.append({"kind": "prelude", "gid": "setup", "sources": [lay.prelude]})
    for step in lay.steps:
        if added.get(step[1]):
            steps.append({"kind": "added", "gid": step[1], "sources": added[step[1]]})
        if step[0] == "answer":
            steps.append({"kind": "cell", "gid": step[1], "sources": sources[step[1]]})
        else:
            ex = exercises[step[1]]
            visible, hidden = list(ex.cases(False, seed, student)), list(ex.cases(True, seed, student))
            cases_of[step[1]] = (visible + hidden, len(visible))
            steps.append({"kind": "check", "gid": step[1], "fn": ex.function_name, "params": list(ex.params),
                          "value": bool(getattr(ex, "value", False)),
                          "cases": [{"kwargs": c["kwargs"]} for c in visible + hidden]})

    try:
        box = sandbox if sandbox is not None else make_sandbox(wall_s=wall_s)
    except _sandbox.IsolationError as exc:
        return fail_all("error", str(exc))
    box = with_student(box, student)
    _, sys_path = runner_paths()
    payload = json.dumps({"sys_path": sys_path, "step_s": step_s, "steps": steps, "student": student}).encode()
    result = box.run([_sandbox.python_executable(), "-I", "-S", "-B", str(_runner_path())], payload)
    verdict.isolation = box.level

    # Read back: the first well-formed record of each step counts.
    started, reported, done, cell_errors = -1, {}, False, {}
    for obj in _parse_lines(result.stdout):
        t = obj.get("t")
        if t == "step" and type(obj.get("i")) is int:
            started = max(started, obj["i"])
        elif t == "cell" and isinstance(obj.get("gid"), str) and isinstance(obj.get("errors"), list):
            cell_errors.setdefault(obj["gid"], bool(obj["errors"]))
        elif t == "done":
            done = True
        elif t == "check" and type(obj.get("i")) is int and 0 <= obj["i"] < len(steps):
            step = steps[obj["i"]]
            if step["kind"] == "check" and obj.get("gid") == step["gid"] and step["gid"] not in reported \
                    and isinstance(obj.get("records"), list):
                reported[step["gid"]] = obj["records"]
    verdict.complete = all(gid in reported for gid in lay.tests)
    verdict.runner = result.describe() if not (done and result.returncode == 0) else "finished"
    died = ""
    if not verdict.complete:
        where = _step_name(steps[started]) if 0 <= started < len(steps) else "start-up"
        died = f"not checked: the grader's runner stopped early ({result.describe()}) during {where}"
        if result.stderr and started < 0:
            died += ": " + result.stderr.decode("utf-8", "replace").strip().splitlines()[-1][:200]

    answered: dict = {}   # grade id -> the learner's answers per case (for the steps built on it)
    failed_before, failing = {}, False    # test grade id -> an answer cell since the previous test raised
    for step in lay.steps:
        if step[0] == "answer":
            failing = failing or cell_errors.get(step[1], False)
        else:
            failed_before[step[1]], failing = failing, False
    for t in verdict.tests:
        if t.grade_id not in reported:
            t.feedback = f"✗ {t.grade_id}: {died}."
            continue
        cases, hidden_from = cases_of[t.grade_id]
        ex = exercises[t.grade_id]
        judged, answered[t.grade_id] = _judge_exercise(ex, t.grade_id, t.max_points, cases, hidden_from,
                                                       reported[t.grade_id], answered.get(ex.builds_on),
                                                       failed_before.get(t.grade_id, False))
        t.points, t.passed, t.feedback = judged.points, judged.passed, judged.feedback
        t.cases, t.cases_passed = judged.cases, judged.cases_passed
        t.slips, t.attempted, t.failures = judged.slips, judged.attempted, judged.failures
    missing = [gid for gid in lay.answer_ids if not sources[gid]]
    notes = []
    if died:
        notes.append(died)
    if missing:
        notes.append("no answer cell for " + ", ".join(missing))
    verdict.status, verdict.reason = "graded", "; ".join(notes)
    verdict.wall_s = time.monotonic() - start
    return verdict


def main(argv=None) -> int:
    """``python -m autograder.verdict NOTEBOOK [ASSIGNMENT]``: print the verdict as JSON."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(main.__doc__)
        return 2
    v = grade(Path(args[0]), args[1] if len(args) > 1 else "ch01_kv_formula")
    print(json.dumps(v.as_dict(), indent=1))
    return 0 if v.status == "graded" else 1


if __name__ == "__main__":
    sys.exit(main())
