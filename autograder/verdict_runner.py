"""The verdict's runner: runs a submission's answer cells and calls each function on its cases.

Executed inside the sandbox as ``python -I -S -B verdict_runner.py`` by
``autograder.verdict`` (standard library only at start-up; the payload, JSON
on stdin, says where kvlib and autograder are). It executes the prelude (the
setup cell's imports), then the answer cells and checks in the reference's
order, and writes one JSON line per event to the original fd 1: ``step``
(started), ``prelude``/``cell`` (errors), ``check`` (one record per case,
``autograder.checks.answers``; for a value exercise, ``"value": true``, the
record of the number the answer cells bound to the name, with ``kvlib_calls``
when the answer of the graded student's own problem was read from kvlib's
drill object: ``tripwires.drill_reads``; the graded student is read once, before
any answer cell runs: ``graded_student``), ``done``. Cells the student added
(``added``) run like answer cells, just before the answer or test cell below
them. The learner's own fds 0-2 go to /dev/null; every step runs under a
SIGALRM limit. Nothing it prints is trusted: the verdict re-reads every record.
"""

import builtins
import copy
import json
import os
import signal
import sys

_write, _dumps, _type, _exit = os.write, json.dumps, type, os._exit


class StepTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise StepTimeout()


def arm(seconds):
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def disarm():
    signal.setitimer(signal.ITIMER_REAL, 0)


class Shim:
    """What ``runner.run_cases`` needs of an exercise: its grade id and how to call the function."""

    def __init__(self, grade_id, params):
        self.grade_id, self.params = grade_id, params

    def call_args(self, case):
        kwargs = case["kwargs"]
        return [copy.deepcopy(kwargs[n]) for n in self.params if n in kwargs]


def compile_cell(source, name):
    try:
        return compile(source, name, "exec")
    except SyntaxError:   # IPython magics and shell escapes: drop those lines and retry
        lines = []
        for line in source.splitlines():
            s = line.lstrip()
            lines.append(line[:len(line) - len(s)] + "pass" if s[:1] in ("%", "!") else line)
        return compile("\n".join(lines), name, "exec")


#: The environment variable that names the graded student (``autograder.sandbox.GRADING_STUDENT_ENV``; the
#: runner imports nothing of the course's before it reads it).
GRADING_STUDENT_ENV = "KV_COURSE_GRADING_STUDENT"


def graded_student(payload):
    """The graded student, read once at start-up, before any of the learner's code runs: the payload's
    ``student`` (``autograder.verdict.grade`` passes it), else the grader's variable, else None.

    An answer cell that rewrites the id afterwards (``os.environ[...] = ...``, ``claim_student(...)``) changes
    what the notebook's own calls see, never whose problem the verdict looks for reads of."""
    if "student" in payload:
        student = payload["student"]
        return student.strip() or None if isinstance(student, str) else None
    return os.environ.get(GRADING_STUDENT_ENV, "").strip() or None


def _drill_reads(reads, name, student):
    """``reads(topic, student)`` (``runner.tripwires.drill_reads``, bound at start-up) for the value
    ``answer_<topic>`` of the graded ``student`` ([] without the runner)."""
    if reads is None or not name.startswith("answer_"):
        return []
    try:
        return list(reads(name[len("answer_"):], student))
    except Exception:
        return []


def main():
    payload = json.loads(sys.stdin.buffer.read())
    student = graded_student(payload)   # before the learner's code: nothing it does can change whose problem it is
    for p in reversed(payload["sys_path"]):
        sys.path.insert(0, p)
    res = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a file too big is an OSError, not a kill
    step_s = float(payload["step_s"])

    def emit(obj):
        try:
            data = (_dumps(obj) + "\n").encode()
        except (ValueError, TypeError, RecursionError):
            data = (_dumps({"t": obj.get("t"), "i": obj.get("i"), "unserialisable": True}) + "\n").encode()
        while data:
            data = data[_write(res, data):]

    try:
        from autograder.checks import runner
    except BaseException:   # no tripwires; records are made here instead
        runner = None
    drill_reads = getattr(getattr(runner, "tripwires", None), "drill_reads", None)   # bound before any answer cell
    try:
        from autograder.checks.answers import encode
    except BaseException:
        def encode(value, depth=0):
            t = _type(value)
            record = {"type": t.__module__ + "." + t.__qualname__}
            if t is int:
                record["value"] = value
            return record

    def run_cases(step, fn):
        shim = Shim(step["gid"], step["params"])
        if runner is not None:
            return runner.run_cases(shim, fn, step["cases"], quiet=True)
        records = []
        for case in step["cases"]:
            try:
                records.append(encode(fn(*shim.call_args(case))))
            except Exception as exc:
                records.append({"error": _type(exc).__name__, "error_message": str(exc)[:300]})
        return records

    ns = {"__name__": "__main__", "__builtins__": builtins}
    for i, step in enumerate(payload["steps"]):
        emit({"t": "step", "i": i})
        kind = step["kind"]
        if kind in ("prelude", "cell", "added"):
            errors = []
            for source in step["sources"]:
                try:
                    arm(step_s)
                    try:
                        exec(compile_cell(source, "<%s>" % step["gid"]), ns)
                    finally:
                        disarm()
                except StepTimeout:
                    errors.append("did not finish within %g s" % step_s)
                except BaseException as exc:
                    errors.append((_type(exc).__name__ + ": " + str(exc))[:300])
            emit({"t": kind, "i": i, "gid": step["gid"], "errors": errors})
        elif kind == "check":
            n = len(step["cases"])
            fn = ns.get(step["fn"])
            if step.get("value"):   # a value exercise: the number bound to the name, never called
                if step["fn"] not in ns:
                    records = [{"error": "NameError", "error_message": "name %r is not defined" % step["fn"]}] * n
                else:
                    try:
                        arm(step_s)
                        try:
                            records = [encode(fn)] * n
                            reads = _drill_reads(drill_reads, step["fn"], student)
                            if reads:   # the learner's own problem's answer, read from kvlib's drill object
                                records = [dict(r, kvlib_calls=reads) for r in records]
                        finally:
                            disarm()
                    except BaseException as exc:
                        records = [{"error": _type(exc).__name__, "error_message": str(exc)[:300]}] * n
            elif fn is None:
                records = [{"error": "NameError", "error_message": "name %r is not defined" % step["fn"]}] * n
            elif not callable(fn):
                records = [{"error": "TypeError", "error_message": "%s is not a function" % step["fn"]}] * n
            else:
                try:
                    arm(step_s)
                    try:
                        records = run_cases(step, fn)
                    finally:
                        disarm()
                except StepTimeout:
                    records = [{"error": "TimeoutError",
                                "error_message": "%s did not return within %g s" % (step["fn"], step_s)}] * n
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


if __name__ == "__main__":
    main()
