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
2. A small runner (``RUNNER``, standard library only; ``python -I -S`` in
   the sandbox of ``autograder.sandbox``) executes the submission's answer
   cells and nothing else, in reference order, and at each test cell's place
   calls the student's function on the exercise's cases (visible and
   hidden, generated here and passed in as JSON). It prints one JSON record
   per case: the exact type, and the value only when ``type(x) is int``.
   The student's own printing goes to /dev/null.
3. Here, outside, every record is re-checked (a value counts only if it is
   exactly a JSON integer: no bool, no float, no look-alike), compared with
   kvlib's expected value and judged by ``autograder.checks.core.judge``
   (kvlib's slip catalogue names the mistake). An exercise passes when every
   case passes; it then earns its points.

A runner that dies (``os._exit``, a segfault, the memory, CPU or wall-time
limit, too much output) fails every exercise it had not reported, with the
reason. Patches made inside the sandbox never reach this process.

The grading pipeline combines this with nbgrader's result per test:
final score = min(nbgrader's score, the verdict's score).
"""

from __future__ import annotations

import ast
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib import import_module, util
from pathlib import Path

from . import sandbox as _sandbox

DEFAULT_STEP_S = 10.0     # one answer cell, or one exercise's cases (SIGALRM in the runner)
DEFAULT_WALL_S = 60.0     # the whole runner
MAX_INT_DIGITS = 4000     # longer integers are not read back (Python's own limit is 4300)
PRELUDE_MODULES = {"kvlib"}   # besides the standard library: what a reference setup cell may import

# ---------------------------------------------------------------------------
# The runner (executed inside the sandbox; standard library only)
# ---------------------------------------------------------------------------
RUNNER = r'''
import builtins, copy, json, os, signal, sys
_write, _dumps, _type, _int, _exit = os.write, json.dumps, type, int, os._exit

payload = json.loads(sys.stdin.buffer.read())
for p in reversed(payload["sys_path"]):
    sys.path.insert(0, p)
RES = os.dup(1)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a file too big is an OSError, not a kill
STEP_S = float(payload["step_s"])

def emit(obj):
    try:
        data = (_dumps(obj) + "\n").encode()
    except (ValueError, TypeError, RecursionError):
        data = (_dumps({"t": obj.get("t"), "i": obj.get("i"), "unserialisable": True}) + "\n").encode()
    while data:
        data = data[_write(RES, data):]

class StepTimeout(BaseException):
    pass

def _alarm(signum, frame):
    raise StepTimeout()

def arm(seconds):
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)

def disarm():
    signal.setitimer(signal.ITIMER_REAL, 0)

try:
    from autograder.checks import core as _core
except BaseException as exc:   # no tripwires; records are made here instead
    _core = None

def describe(value):
    t = _type(value)
    record = {"type": t.__module__ + "." + t.__qualname__}
    if t is _int:
        record["value"] = value
    return record

class Shim:
    def __init__(self, grade_id, params):
        self.grade_id, self.params = grade_id, params
    def call_args(self, case):
        kwargs = case["kwargs"]
        return [copy.deepcopy(kwargs[n]) for n in self.params if n in kwargs]

def run_cases(step, fn):
    shim = Shim(step["gid"], step["params"])
    if _core is not None:
        return _core.run_cases(shim, fn, step["cases"], quiet=True)
    records = []
    for case in step["cases"]:
        try:
            records.append(describe(fn(*shim.call_args(case))))
        except Exception as exc:
            records.append({"error": _type(exc).__name__, "error_message": str(exc)[:300]})
    return records

def compile_cell(source, name):
    try:
        return compile(source, name, "exec")
    except SyntaxError:   # IPython magics and shell escapes: drop those lines and retry
        lines = []
        for line in source.splitlines():
            s = line.lstrip()
            lines.append(line[:len(line) - len(s)] + "pass" if s[:1] in ("%", "!") else line)
        return compile("\n".join(lines), name, "exec")

ns = {"__name__": "__main__", "__builtins__": builtins}
for i, step in enumerate(payload["steps"]):
    emit({"t": "step", "i": i})
    kind = step["kind"]
    if kind in ("prelude", "cell"):
        errors = []
        for j, source in enumerate(step["sources"]):
            try:
                arm(STEP_S)
                try:
                    exec(compile_cell(source, "<%s>" % step["gid"]), ns)
                finally:
                    disarm()
            except StepTimeout:
                errors.append("did not finish within %g s" % STEP_S)
            except BaseException as exc:
                errors.append((_type(exc).__name__ + ": " + str(exc))[:300])
        emit({"t": kind, "i": i, "gid": step["gid"], "errors": errors})
    elif kind == "check":
        n = len(step["cases"])
        fn = ns.get(step["fn"])
        if fn is None:
            records = [{"error": "NameError", "error_message": "name %r is not defined" % step["fn"]}] * n
        elif not callable(fn):
            records = [{"error": "TypeError", "error_message": "%s is not a function" % step["fn"]}] * n
        else:
            try:
                arm(STEP_S)
                try:
                    records = run_cases(step, fn)
                finally:
                    disarm()
            except StepTimeout:
                records = [{"error": "TimeoutError",
                            "error_message": "%s did not return within %g s" % (step["fn"], STEP_S)}] * n
            except BaseException as exc:
                records = [{"error": _type(exc).__name__, "error_message": str(exc)[:300]}] * n
        safe = []
        for r in records:
            try:
                _dumps(r)
                safe.append(r)
            except BaseException:
                safe.append({"error": "ValueError",
                             "error_message": "the result could not be written out (an int of over 4300 digits?)"})
        emit({"t": "check", "i": i, "gid": step["gid"], "records": safe})
emit({"t": "done"})
_exit(0)
'''


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

    def as_test(self) -> dict:
        """The shape of one entry of the grading JSON's ``tests``."""
        return {"grade_id": self.grade_id, "points": self.points, "max_points": self.max_points,
                "passed": self.passed, "feedback": self.feedback}


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


class SubmissionError(ValueError):
    """The submission is not a readable nbformat-4 notebook."""


# ---------------------------------------------------------------------------
# Reading notebooks (no nbformat: nothing here may be lenient by accident)
# ---------------------------------------------------------------------------
def read_notebook(data) -> dict:
    """A notebook dict from bytes, text, a path or a dict; SubmissionError says what is wrong."""
    if isinstance(data, dict):
        nb = data
    else:
        if isinstance(data, (str, os.PathLike)) and not (isinstance(data, str) and data.lstrip().startswith("{")):
            try:
                data = Path(data).read_bytes()
            except OSError as exc:
                raise SubmissionError(f"cannot read the submission: {exc.strerror}") from None
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        if not data.strip():
            raise SubmissionError("the submission is an empty file")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SubmissionError(f"the submission is not UTF-8 text (byte {exc.start})") from None
        try:
            nb = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise SubmissionError(f"the submission is not valid JSON (truncated?): {str(exc)[:120]}") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise SubmissionError("the submission is not a notebook (no list of cells)")
    if nb.get("nbformat") != 4:
        raise SubmissionError(f"nbformat {nb.get('nbformat')!r} is not supported (expected 4)")
    for cell in nb["cells"]:
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise SubmissionError("a cell of the submission is malformed")
        if cell.get("metadata") is not None and not isinstance(cell["metadata"], dict):
            raise SubmissionError("a cell's metadata is malformed")
        _source(cell)
    return nb


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    if isinstance(src, list) and all(isinstance(s, str) for s in src):
        return "".join(src)
    if isinstance(src, str):
        return src
    raise SubmissionError("a cell's source is malformed")


def _nbgrader(cell: dict) -> dict:
    meta = (cell.get("metadata") or {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


@dataclass
class Layout:
    """What the reference notebook says: answer and test cells, in order, and the setup imports."""

    steps: list            # [("answer", grade_id) | ("test", grade_id, points)]
    prelude: str           # the reference's top-level stdlib/kvlib imports, one per line

    @property
    def answer_ids(self) -> list:
        return [s[1] for s in self.steps if s[0] == "answer"]

    @property
    def tests(self) -> dict:
        return {s[1]: s[2] for s in self.steps if s[0] == "test"}


def layout(reference: dict) -> Layout:
    """Answer cells (code, solution) and test cells (grade, points) of the reference notebook."""
    steps, imports = [], []
    stdlib = set(getattr(sys, "stdlib_module_names", ())) | PRELUDE_MODULES
    for cell in reference["cells"]:
        meta = _nbgrader(cell)
        gid = meta.get("grade_id")
        if cell.get("cell_type") != "code":
            continue
        if meta.get("solution") and gid:
            steps.append(("answer", gid))
        elif meta.get("grade") and gid:
            steps.append(("test", gid, float(meta.get("points", 0) or 0)))
        elif not meta.get("solution") and not meta.get("grade"):
            imports += _imports(_source(cell), stdlib)
    return Layout(steps, "\n".join(dict.fromkeys(imports)))


def _imports(source: str, allowed: set) -> list:
    """Top-level ``import``/``from ... import`` lines of allowed modules (setup cells)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []
    for node in tree.body:
        if isinstance(node, ast.Import) and all(a.name.split(".")[0] in allowed for a in node.names):
            out.append(ast.unparse(node))
        elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
              and node.module.split(".")[0] in allowed):
            out.append(ast.unparse(node))
    return out


def answer_sources(submission: dict, answer_ids) -> dict:
    """``{grade_id: [source, ...]}``: the submission's code cells that claim a reference answer id."""
    wanted = set(answer_ids)
    found: dict = {gid: [] for gid in answer_ids}
    for cell in submission["cells"]:
        meta = _nbgrader(cell)
        gid = meta.get("grade_id")
        if cell.get("cell_type") == "code" and meta.get("solution") and gid in wanted:
            found[gid].append(_source(cell))
    return found


# ---------------------------------------------------------------------------
# Exercises, references, and the sandbox the runner needs
# ---------------------------------------------------------------------------
def load_exercises(assignment: str) -> dict:
    """``{grade_id: Exercise}`` from ``autograder.checks.<chNN>`` (``EXERCISES``)."""
    module = import_module(f"autograder.checks.{assignment.split('_')[0]}")
    return {ex.grade_id: ex for ex in getattr(module, "EXERCISES").values()}


def reference_notebook(assignment: str, course_dir=None) -> Path:
    """The instructor's source notebook of ``assignment`` (the grader's trusted copy)."""
    from .course import find_course_dir, source_notebook
    return source_notebook(find_course_dir(course_dir), assignment)


def _package_dir(name: str) -> str:
    spec = util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"package {name} not found")
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def runner_paths() -> tuple[list, list]:
    """(read-only binds, sys.path for the runner): the interpreter, site-packages, kvlib and autograder."""
    code = [_package_dir("kvlib"), _package_dir("autograder")]
    binds = _sandbox.python_binds(site_packages=True) + code
    import sysconfig
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


# ---------------------------------------------------------------------------
# Judging
# ---------------------------------------------------------------------------
def _clean_record(record) -> dict:
    """Keep only well-formed fields of a record the runner (or the student) printed."""
    bad = {"error": "ValueError", "error_message": "the result could not be read back "
                                                  "(an integer too large, or a malformed record)"}
    if not isinstance(record, dict):
        return bad
    out = {}
    if isinstance(record.get("error"), str):
        out["error"] = record["error"][:100]
        out["error_message"] = str(record.get("error_message", ""))[:300]
    elif isinstance(record.get("type"), str):
        out["type"] = record["type"][:200]
        if out["type"] == "builtins.int":
            value = record.get("value")
            if type(value) is not int:
                return bad
            out["value"] = value
        number = record.get("number")
        if type(number) in (int, float) and math.isfinite(number):
            out["number"] = number
        if isinstance(record.get("repr"), str):
            out["repr"] = record["repr"][:60]
    else:
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


def _judge_exercise(exercise, gid: str, points: float, cases, hidden_from: int, records) -> ExerciseVerdict:
    from .checks import core
    failures, passed = [], 0
    for k, case in enumerate(cases):
        record = _clean_record(records[k]) if k < len(records) else {
            "error": "RuntimeError", "error_message": "no result for this case"}
        hidden = k >= hidden_from
        try:
            v = core.judge(exercise, case, record, hidden=hidden)
            ok, message = v.ok, v.message
        except Exception as exc:  # noqa: BLE001 -- a record nobody foresaw is a failure, not a crash
            ok, message = False, f"the result could not be judged ({type(exc).__name__})"
        if ok:
            passed += 1
        else:
            failures.append((hidden, message))
    if not failures:
        text = f"✓ {exercise.function_name}: all {len(cases)} cases right ({gid})"
        return ExerciseVerdict(gid, points, points, True, text, len(cases), passed)
    hidden, message = failures[0]
    more = len(failures) - 1
    tail = f"\n({more} more case{'s' if more > 1 else ''} fail{'' if more > 1 else 's'}.)" if more else ""
    return ExerciseVerdict(gid, 0.0, points, False, f"✗ {gid}: {message}{tail}", len(cases), passed)


def _step_name(step: dict) -> str:
    if step["kind"] == "prelude":
        return "the setup imports"
    if step["kind"] == "cell":
        return f"answer cell {step['gid']}"
    return f"the check of {step['gid']}"


def grade(submission, assignment: str = "ch01_kv_formula", *, reference=None, course_dir=None,
          exercises: dict | None = None, seed: int | None = None, sandbox=None,
          step_s: float = DEFAULT_STEP_S, wall_s: float = DEFAULT_WALL_S) -> Verdict:
    """The verdict on one submission (bytes, text, path or dict). Never raises for a bad submission.

    ``reference``: the trusted notebook (path or dict; default: the course's
    source notebook of ``assignment``). ``exercises``: ``{grade_id: Exercise}``
    (default: ``autograder.checks.<chNN>.EXERCISES``). ``seed``: hidden cases
    (default: the checks' ``DEFAULT_HIDDEN_SEED``, as the hidden test cells).
    ``sandbox``: an ``autograder.sandbox.Sandbox`` (default: ``make_sandbox``).
    """
    start = time.monotonic()
    from .checks import core
    seed = core.DEFAULT_HIDDEN_SEED if seed is None else seed
    verdict = Verdict(assignment, "error", seed=seed)
    try:
        ref = read_notebook(reference if reference is not None else reference_notebook(assignment, course_dir))
        lay = layout(ref)
        exercises = load_exercises(assignment) if exercises is None else exercises
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

    # The plan: the reference's order; the student's sources only for answer cells.
    sources = answer_sources(sub, lay.answer_ids)
    steps, cases_of = [], {}
    if lay.prelude:
        steps.append({"kind": "prelude", "gid": "setup", "sources": [lay.prelude]})
    for step in lay.steps:
        if step[0] == "answer":
            steps.append({"kind": "cell", "gid": step[1], "sources": sources[step[1]]})
        else:
            ex = exercises[step[1]]
            visible, hidden = list(ex.visible_cases), list(ex.hidden_cases(seed))
            cases_of[step[1]] = (visible + hidden, len(visible))
            steps.append({"kind": "check", "gid": step[1], "fn": ex.function_name, "params": list(ex.params),
                          "cases": [{"kwargs": c["kwargs"]} for c in visible + hidden]})

    try:
        box = sandbox if sandbox is not None else make_sandbox(wall_s=wall_s)
    except _sandbox.IsolationError as exc:
        return fail_all("error", str(exc))
    _, sys_path = runner_paths()
    payload = json.dumps({"sys_path": sys_path, "step_s": step_s, "steps": steps}).encode()
    result = box.run([_sandbox.python_executable(), "-I", "-S", "-B", "-c", RUNNER], payload)
    verdict.isolation = box.level

    # Read back: the first well-formed record of each step counts.
    started, reported, done = -1, {}, False
    for obj in _parse_lines(result.stdout):
        t = obj.get("t")
        if t == "step" and type(obj.get("i")) is int:
            started = max(started, obj["i"])
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

    for t in verdict.tests:
        if t.grade_id not in reported:
            t.feedback = f"✗ {t.grade_id}: {died}."
            continue
        cases, hidden_from = cases_of[t.grade_id]
        judged = _judge_exercise(exercises[t.grade_id], t.grade_id, t.max_points, cases, hidden_from,
                                 reported[t.grade_id])
        t.points, t.passed, t.feedback = judged.points, judged.passed, judged.feedback
        t.cases, t.cases_passed = judged.cases, judged.cases_passed
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
