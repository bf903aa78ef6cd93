"""The instant check, inside the learner's process: run the learner's function on the cases, then judge.

Grading is split in two steps so that a grader running outside the learner's kernel can reuse the
second one:

1. ``run_cases(exercise, fn, cases)`` calls the learner's function on each
   case, inside the learner's process, and returns one JSON-safe *record* per
   case (``answers.encode``: the result's exact type and value, the exception
   it raised, or the kvlib functions it tried to call).
2. ``judge(exercise, case, record)`` turns a record into a ``CaseVerdict``
   (pass/fail and the message); ``summarise`` turns an exercise's verdicts into
   the one message a learner sees, naming the slip consistent with every
   failing visible case. Both need only cases and records, so they run on
   records read back from JSON.

``check(exercise, fn)`` does both and raises ``AssertionError`` with the
message, or prints one ✓ line.

Guards, and their limits:

* The exact type is checked (``answers``): an always-equal object, an ``int``
  subclass, a ``bool``, a numpy scalar is rejected with its own message; the
  value is looked at first, so an ``int(...)``-wrapped GB answer is named as GB.
* kvlib tripwires (``autograder.checks.tripwires``) while the function runs.
* Hidden cases: the learner's printing is swallowed while they run, and a
  failure names the slip in general words (``kvcoach.slips.general``), never the
  case's inputs, the expected value or the learner's answer.

These are guard rails for an honest learner, not a sandbox: code in the same
process can read this module. Grading that must resist a determined student
runs ``judge`` outside the student's process (``autograder.verdict``).
"""

from __future__ import annotations

import contextlib
import io

from kvcoach.learner import NO_STUDENT, current_student

from . import answers, registry, tripwires
from .diagnosis import summarise
from .failure import CheckFailed, learner_frames
from .judge import _decoded, _number, passed_line, verdicts
from .schema import DEFAULT_HIDDEN_SEED, Earlier, Exercise
from .tripwires import kvlib_tripwires

describe_result = answers.encode


def _describe_error(exc: BaseException) -> dict:
    return {"error": type(exc).__name__, "error_message": str(exc)[:300]}


def run_cases(exercise, student_fn, cases, *, quiet: bool = False, where: list | None = None) -> list:
    """Call ``student_fn`` on each case under the tripwires; one JSON-safe record per case.

    ``exercise`` needs only ``grade_id`` and ``call_args`` (the verdict's runner passes a shim).
    ``where``, when given, receives the learner's frames (text) of the first exception their code raised.
    """
    records = []
    sink = io.StringIO()
    with kvlib_tripwires(exercise.grade_id):
        for case in cases:
            tripwires.reset()
            try:
                args = exercise.call_args(case)
                if quiet:
                    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), tripwires.watching():
                        result = student_fn(*args)
                else:
                    with tripwires.watching():
                        result = student_fn(*args)
                record = answers.encode(result)
            except Exception as exc:  # noqa: BLE001 -- the learner's error becomes the verdict
                record = _describe_error(exc)
                if where is not None and not where and not isinstance(exc, NotImplementedError):
                    where += learner_frames(exc)
            if tripwires.calls():
                record["kvlib_calls"] = tripwires.calls()
            records.append(record)
        tripwires.reset()
    return records


def learner_answers(exercise: Exercise, records) -> list:
    """The learner's answer per record, an ``Earlier`` whatever its type (for the steps built on it).

    A number of another type is still the learner's number (a float, a numpy scalar's value, a bool as
    0 or 1): a later step is judged on it, and the type is charged once, in its own step. A record that
    raised, or holds no number, gives ``Earlier(None, ...)``.
    """
    out = []
    for record in records:
        kind = record.get("type", "?") if isinstance(record, dict) else "?"
        if not isinstance(record, dict) or "error" in record:
            out.append(Earlier(None, record.get("error", "an error") if isinstance(record, dict) else "?",
                               raised=True, right_type=False))
            continue
        value = _decoded(record)
        right = value is not None and exercise.answer.fits(value)
        if kind == "builtins.bool" and record.get("repr") in ("True", "False"):
            number = int(record["repr"] == "True")
        elif type(value) in (int, float):
            number = value
        elif right:
            number = value          # an answer of another kind (a choice, a tuple): kept as it is
        else:
            number = _number(record, value)
            number = number if type(number) in (int, float) else None
        out.append(Earlier(number, kind, right_type=right))
    return out


# ---------------------------------------------------------------------------
# The instant check
# ---------------------------------------------------------------------------
#: What each exercise's last check left for the steps that build on it: ``(grade id, (hidden, seed))`` -> the
#: learner's answers to those cases, ``(grade id, "function")`` -> the function it was given (one dict, so that
#: clearing it forgets both).
_ANSWERS: dict = {}


def _failure_message(exercise: Exercise, student_fn, hidden: bool, seed, where=None) -> str | None:
    """Run and judge every case; the message to raise, or None when all pass.

    Kept apart from ``check`` so that no frame alive when the AssertionError is
    raised holds a hidden case (a verbose traceback would print its locals).
    ``where`` receives the learner's frames when their code raised on a visible case.
    """
    if exercise.value:
        return _value_failure(exercise, student_fn, hidden)
    if not callable(student_fn):
        return f"✗ {exercise.grade_id}: {exercise.function_name} must be a function, got {type(student_fn).__name__}."
    student = current_student()
    _ANSWERS[(exercise.grade_id, "function")] = student_fn
    cases = exercise.cases(hidden, seed, student)
    records = run_cases(exercise, student_fn, cases, quiet=hidden, where=None if hidden else where)
    key = (hidden, DEFAULT_HIDDEN_SEED if seed is None else seed)
    earlier = _earlier_answers(exercise, student_fn, hidden, seed, student) if exercise.builds_on else None
    results = verdicts(exercise, cases, records, hidden=hidden, earlier=earlier)
    _ANSWERS[(exercise.grade_id, key)] = learner_answers(exercise, records)
    message = summarise(exercise, cases, results, hidden=hidden, earlier=earlier, records=records)
    if message is None:
        print(passed_line(exercise, len(results), hidden))
        return None
    return f"✗ {exercise.grade_id}: " + message


def _earlier_answers(exercise: Exercise, student_fn, hidden: bool, seed, student) -> list | None:
    """The learner's answers to the step ``exercise`` builds on, for the cases this check judges (None: none).

    Those the earlier step's own check recorded for the same cases (``_ANSWERS``). Where it left none (it
    raised on a visible case, so its test cell stopped before the hidden check; it never ran; it ran another
    seed) they are worked out here, quietly, from the learner's earlier function on the earlier step's cases:
    the one last given to the earlier step's check (as the grader outside judges the function that step's
    check called), else, when that check never ran, the one of that name beside ``student_fn`` (what the
    later step calls).
    """
    key = (hidden, DEFAULT_HIDDEN_SEED if seed is None else seed)
    found = _ANSWERS.get((exercise.builds_on, key))
    if found is not None:
        return found
    try:
        step = registry.exercise(exercise.builds_on)
    except LookupError:
        return None
    fn = _ANSWERS.get((step.grade_id, "function"))
    if fn is None:
        names = getattr(student_fn, "__globals__", None)
        fn = names.get(step.function_name) if isinstance(names, dict) else None
    if not callable(fn) or step.value:
        return None
    return learner_answers(step, run_cases(step, fn, step.cases(hidden, seed, student), quiet=True))


def _value_failure(exercise: Exercise, value, hidden: bool) -> str | None:
    """A value exercise's check: the learner's number against their own problem (no hidden cases)."""
    if hidden:
        return None
    student = current_student()
    if student is None:
        return f"✗ {exercise.grade_id}: {NO_STUDENT}"
    cases = exercise.cases(False, None, student)
    record = answers.encode(value)
    reads = tripwires.drill_reads(cases[0]["context"].get("topic", ""), student) if cases else []
    if reads:   # the learner's own problem's answer was read from kvlib's drill object
        record["kvlib_calls"] = reads
    results = verdicts(exercise, cases, [record] * len(cases))
    message = summarise(exercise, cases, results)
    if message is None:
        print(passed_line(exercise, len(results)))
        return None
    return f"✗ {exercise.grade_id}: " + message


def check(exercise: Exercise, student_fn, hidden: bool = False, seed: int | None = None) -> None:
    """Grade ``student_fn`` on the exercise's visible (or hidden) cases (a value exercise: the number).

    Prints one ✓ line when every case is right; otherwise raises
    ``AssertionError`` (``failure.CheckFailed``) naming the slip (and, for visible
    cases only, the case): the notebook shows its message and the learner's own
    frames, never the checker's.
    """
    __tracebackhide__ = True  # pytest shows the message, not our frames (IPython: CheckFailed)
    where: list = []
    message = _failure_message(exercise, student_fn, hidden, seed, where)
    if message is not None:
        raise CheckFailed(message, where) from None
