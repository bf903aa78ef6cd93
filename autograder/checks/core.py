"""Exercises as data, and the one generic check that grades a learner's function.

An ``Exercise`` is data: its function's name and parameters, its cases (plain
JSON-safe dicts from case builders), the expected value of each (computed by
kvlib), the answer type (``autograder.checks.answers``) and, for numbers, the
``kvlib.slips`` quantity that names a wrong answer. Points are not here: they
are stated once, on the test cell of the source notebook. Grading is split in
two steps so that a grader running outside the learner's kernel can reuse the
second one:

1. ``run_cases(exercise, fn, cases)`` calls the learner's function on each
   case, inside the learner's process, and returns one JSON-safe *record* per
   case (``answers.encode``: the result's exact type and value, the exception
   it raised, or the kvlib functions it tried to call).
2. ``judge(exercise, case, record)`` turns a record into a ``Verdict``
   (pass/fail and the message); ``summarise`` turns an exercise's verdicts into
   the one message a learner sees, naming the slip consistent with every
   failing visible case. Both need only cases and records, so they run on
   records read back from JSON.

``check(exercise, fn)`` does both and raises ``AssertionError`` with the
message, or prints one ✓ line.

Cases. A case is ``{"label": str, "kwargs": {...}, "context": {...}}``:
``kwargs`` are the learner's arguments (passed positionally in ``params``
order, so a renamed parameter still works), ``context`` what the messages and
the slip diagnosis need beyond them (``num_heads``, a ``hint``). Case builders:
``visible_cases`` is a tuple or a builder ``f(student=None)``; ``hidden_cases``
is ``f(seed)`` or ``f(seed, student=None)`` (a builder that takes ``student``
gets the learner's id, for per-learner variants). Multi-step problems:
an exercise with ``builds_on=<grade id>`` has cases that line up with that
exercise's (case k, visible then hidden, of each; a case of its own names the earlier case it builds on in
``context["earlier_case"]``), and its ``expected`` (and
``slip_inputs``) take ``earlier``: the number the learner's own earlier step
gave on case k, or None when there is nothing to build on (then kvlib's own
value). A case of a later step is right when it matches *either* kvlib's own
value or the value the learner's own earlier answer implies (their chain), so
one slip is charged once, in its own step, whether the later step reuses the
wrong earlier answer or recomputes it correctly by itself:

* the earlier answers come from the earlier step's own check of the same
  cases (``_ANSWERS``: visible, or hidden of the same seed); where it left
  none (it raised on a visible case, so the test cell stopped before its
  hidden check; it never ran; it ran another seed), the check works them out
  quietly by calling the learner's earlier function (the one of that name
  beside the later function, which is what the later step calls). The grader
  outside (``autograder.verdict``) has the earlier step's records of every
  case, visible and hidden, of the grading seed;
* the earlier answer is an ``Earlier`` (``learner_answers``), kept whatever its
  type: a float, a numpy scalar or a bool still gives its number (0 included);
  an earlier step that raised, or returned no number, gives none;
  ``NOT_BUILT_ON`` stands for a case with no earlier answer on record (no
  earlier function to ask): kvlib's value only;
* a case that cannot be built on (the earlier number leaves this step nothing
  to compute, such as a division by a 0 from ``kv_heads // tp``, or nothing to
  count: a count of 0 on an earlier answer too large for anything to fit,
  where kvlib's is not 0; or the earlier step gave no number and this one gives
  none either) is *excused*, unless it gave kvlib's own value (then it passes):
  neither passed nor failed, its verdict says why. An exercise whose every case
  is excused, or whose cases left besides are only those a constant 0 answers,
  is not passed: nothing of it was judged (so an earlier answer of 10**30 earns
  no step built on it);
* the right value in a wrong type that the earlier answer already had (a float
  or a numpy scalar carried through) passes: the type was charged there;
* a failing case is diagnosed on the learner's chain first (a slip of this
  step made on top of their own earlier answer), else on kvlib's value (a
  slip made while recomputing it); a visible message gives both values it
  would have accepted (``Verdict.built_on``: the earlier answer a verdict was
  judged on).

Value exercises (``value=True``): the learner binds a name to a number
(``answer_pool = 451342``) and the test cell passes that number, not a
function: ``check("ch09_q4_pool", answer_pool)``. ``function_name`` is then the
name, ``params`` is empty and the one visible case is the learner's own
problem (its ``context`` holds the student id, from ``current_student()`` in
the kernel and from the grader's student in ``autograder.verdict``). A wrong
value is named by its slip and the tolerance, never by the expected value.

The student id (``current_student``), first found wins:

1. ``KV_COURSE_GRADING_STUDENT``: set only by the grader (the submission's
   student: ``submitted/<id>/``, ``--student``, or nbgrader's own student via
   the course preprocessor ``autograder.nbgrader_setup.GradingStudentExecute``);
2. the id the notebook claimed with ``claim_student(name)`` (its ``STUDENT_ID`` cell);
3. ``JUPYTERHUB_USER`` (a hub login), except on Binder (``BINDER_LAUNCH_HOST``
   set): Binder's hub user is made up for the session, never a learner's id;
4. ``KV_COURSE_STUDENT`` (set by the tools that run a chapter headless);
5. ``STUDENT_ID`` in the environment.

So in grading, an id the notebook claims never replaces the submission's, and
on Binder a learner's questions are those of the id they typed, the one their
class grades them by.

Guards, and their limits:

* The exact type is checked (``answers``): an always-equal object, an ``int``
  subclass, a ``bool``, a numpy scalar is rejected with its own message; the
  value is looked at first, so an ``int(...)``-wrapped GB answer is named as GB.
* kvlib tripwires (``autograder.checks.tripwires``) while the function runs.
* Hidden cases: the learner's printing is swallowed while they run, and a
  failure names the slip in general words (``kvlib.slips.general``), never the
  case's inputs, the expected value or the learner's answer.

These are guard rails for an honest learner, not a sandbox: code in the same
process can read this module. Grading that must resist a determined student
runs ``judge`` outside the student's process (``autograder.verdict``).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import io
import math
import os
import random
from dataclasses import dataclass, field, replace
from typing import Callable

from kvcoach import slips

from . import answers, tripwires
from .answers import INT
from .failure import CheckFailed, learner_frames
from .tripwires import ALLOWED_FUNCTIONS, ALLOWED_MODULES, KvlibCalled, kvlib_tripwires, tripped  # noqa: F401

DEFAULT_HIDDEN_SEED = 20261130

#: Slip wording lives in kvlib's catalogue; this name stays for older callers.
GENERIC_SLIPS = slips.GENERAL

class _NotBuiltOn:
    """``earlier`` for a case with no earlier answer on record: judged against kvlib's own value."""

    def __repr__(self) -> str:
        return "NOT_BUILT_ON"

    def __bool__(self) -> bool:
        return False


NOT_BUILT_ON = _NotBuiltOn()


@dataclass(frozen=True)
class Earlier:
    """The learner's answer to one case of a step that a later one builds on, whatever it was.

    ``number``: the plain ``int`` or ``float`` to build on (a numpy scalar's value, a ``bool`` as 0 or 1),
    None when it gave none (it raised, or returned None, text, a non-finite numpy value); ``type``: the
    type it returned (``module.qualname``) or the exception it raised; ``right_type``: it had its
    exercise's exact answer type.
    """

    number: int | float | None
    type: str = "builtins.int"
    raised: bool = False
    right_type: bool = True

    @classmethod
    def of(cls, value) -> "Earlier":
        """A bare value given as ``earlier`` (callers that hold plain numbers)."""
        if isinstance(value, Earlier):
            return value
        if type(value) in (int, float):
            return cls(value, f"builtins.{type(value).__name__}")
        return cls(None, type(value).__name__)

    def did(self) -> str:
        """What it did on the case, for a message: 'raised ValueError', 'returned None', 'returned 0'."""
        if self.raised:
            return f"raised {self.type}"
        if self.number is None:
            return f"returned {self.type.removeprefix('builtins.').replace('NoneType', 'None')}"
        return f"returned {self.number!r}"


def _build_number(earlier):
    """The number a step builds on (None: nothing to build on, judge against kvlib's value)."""
    if isinstance(earlier, Earlier):
        return earlier.number
    return earlier if type(earlier) in (int, float) else None


def _accepts(fn, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------------------
# Exercises
# ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Exercise:
    """One graded exercise (see the module doc for cases and builders)."""

    grade_id: str                                 # chNN_qN_<name>: the test cell's nbgrader grade id
    function_name: str
    params: tuple                                 # the learner's parameter names, in order
    visible_cases: tuple | Callable               # cases, or a builder f(student=None)
    hidden_cases: Callable                        # builder f(seed[, student=None])
    expected: Callable                            # f(case[, earlier]) -> the right answer, from kvlib
    answer: object = INT                          # an answers type: INT, Float(...), Choice(...), ...
    quantity: str | None = None                   # a kvlib.slips quantity (numbers only)
    slip_inputs: Callable | None = None           # case -> kwargs for kvlib.slips
    unit: str = "bytes"
    hidden_note: str = ""                         # what hidden cases vary, in general words
    modules: tuple = ()                           # modules an answer may import besides the stdlib and kvlib
    builds_on: str | None = None                  # grade id of the earlier step (multi-step problems)
    value: bool = False                           # a value exercise: function_name names a number, not a function

    def cases(self, hidden: bool = False, seed: int | None = None, student: str | None = None) -> tuple:
        if not hidden:
            build = self.visible_cases
            if not callable(build):
                return tuple(build)
            return tuple(build(student=student) if _accepts(build, "student") else build())
        seed = DEFAULT_HIDDEN_SEED if seed is None else seed
        build = self.hidden_cases
        return tuple(build(seed, student=student) if _accepts(build, "student") else build(seed))

    def expected_for(self, case: dict, earlier=NOT_BUILT_ON):
        """The right answer to ``case``; against the learner's ``earlier`` step when it builds on one.

        ``earlier``: an ``Earlier``, a plain number, or None / ``NOT_BUILT_ON``; the chapter's function
        gets its number, or None when there is none (then it uses kvlib's own value).
        """
        if self.builds_on and _accepts(self.expected, "earlier"):
            return self.expected(case, earlier=_build_number(earlier))
        return self.expected(case)

    def call_args(self, case: dict) -> list:
        """Positional arguments for the learner's function (a deep copy of the case's)."""
        kwargs = case["kwargs"]
        return [copy.deepcopy(kwargs[name]) for name in self.params if name in kwargs]

    def call_text(self, case: dict) -> str:
        """``name(arg=value, ...)`` for messages; a config dict is shown by its label."""
        parts = []
        for name in self.params:
            if name not in case["kwargs"]:
                continue
            value = case["kwargs"][name]
            if isinstance(value, dict):
                parts.append(f"{name}=<{case.get('context', {}).get('config_name', 'config')}>")
            else:
                parts.append(f"{name}={value!r}")
        return f"{self.function_name}({', '.join(parts)})"


def with_sides(build: Callable, side: Callable, names, make: Callable) -> Callable:
    """A hidden-case builder that shows every side of an edge (issue 38 §6): ``build(seed)``'s cases, then for
    each side in ``names`` that none of them sits on (``side(case)``), ``make(rng, name)``'s case, drawn from
    the seed (real configs; ``make`` returns None where it cannot draw that side)."""
    def hidden(seed: int) -> tuple:
        cases = list(build(seed))
        rng = random.Random(f"{seed}-sides")
        for name in names:
            if not any(_side_of(side, case) == name for case in cases):
                made = make(rng, name)
                if made is not None:
                    cases.append(made)
        return tuple(cases)
    hidden.__doc__ = build.__doc__
    return hidden


def _side_of(side: Callable, case: dict):
    try:
        return side(case)
    except (KeyError, TypeError, ValueError, ArithmeticError):
        return None


def exercises(*items: Exercise) -> dict:
    """``{grade_id: Exercise}`` in notebook order: a chapter module's ``EXERCISES``."""
    out = {}
    for ex in items:
        if ex.grade_id in out:
            raise ValueError(f"grade id {ex.grade_id} declared twice")
        out[ex.grade_id] = ex
    return out


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str
    slips: tuple = ()       # the kvlib slip keys that reproduce the answer, or a failure kind
    kind: str = ""          # "value" (judged on its value), "type", "error", "kvlib"
    head: str = ""          # the case's line, before the diagnosis
    tail: str = ""          # after it (a hint, a note on the type)
    variants: tuple = ()    # the slip variants (kvlib.slips.matching_variants) that reproduce the answer
    built_on: object = NOT_BUILT_ON     # the learner's earlier answer it was judged on (NOT_BUILT_ON: kvlib's value)

    @property
    def slip(self) -> str | None:
        return self.slips[0] if self.slips else None


# ---------------------------------------------------------------------------
# Records and the learner's function (inside the learner's process)
# ---------------------------------------------------------------------------
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
# Judging a record (anywhere: needs only the case and the record)
# ---------------------------------------------------------------------------
def matching_slips(quantity: str, answer, inputs: dict, rel_tol: float = 1e-6, unit: str = "") -> tuple:
    """Every slip of the kvlib catalogue that reproduces ``answer`` (in catalogue order), the generic ones last."""
    return slips.matching(quantity, answer, rel_tol=rel_tol, unit=unit, **inputs)


def slip_inputs_for(exercise: Exercise, case: dict, earlier=NOT_BUILT_ON) -> dict:
    """kvlib.slips' keywords for ``case``; a step that builds on another gets the learner's earlier number."""
    if exercise.slip_inputs is None:
        return {}
    if exercise.builds_on and _accepts(exercise.slip_inputs, "earlier"):
        return exercise.slip_inputs(case, earlier=_build_number(earlier))
    return exercise.slip_inputs(case)


def _rel_tol(exercise: Exercise) -> float:
    return getattr(exercise.answer, "rel_tol", 1e-6)


def _number(record: dict, value):
    """A scalar number to diagnose: the decoded value, or what a numpy scalar held (a choice: its text)."""
    if type(value) in (int, float, str):
        return value
    if type(value) is tuple and value and all(type(v) in (int, float) for v in value):
        return value        # a range such as (fewest, most): kvlib.slips compares it element by element
    number = record.get("number")
    return number if type(number) in (int, float) else None


def judge(exercise: Exercise, case: dict, record: dict, *, hidden: bool = False, earlier=NOT_BUILT_ON,
          lead: str | None = None, allowed=None) -> Verdict:
    """The verdict on one case from the record of what the learner's function did.

    Visible verdicts name the case, the call, the answer and the expected
    value; hidden verdicts name only the slip, in general words. The value is
    judged before the type. ``lead``: the slip to name first when it matches;
    ``allowed``: the only slips that may be named (``fitting_slips``: the
    others are ruled out by other cases), in that order. A step built on an
    earlier one is right on kvlib's value or on its ``earlier`` answer's
    (``_accepted``); the verdict's ``built_on`` says which it was judged on.
    """
    if exercise.value:
        return _judge_value(exercise, case, record)
    fn = exercise.function_name
    if record.get("kvlib_calls"):
        names = ", ".join(record["kvlib_calls"])
        return Verdict(False, f"build this by hand: exercise {exercise.grade_id} must not call {names}.",
                       ("kvlib_called",), "kvlib")
    excused = _not_built(exercise, case, record, earlier)
    if excused is not None and not _right_alone(exercise, case, record):
        return excused
    head = "on a hidden case: " if hidden else f"on case \"{case['label']}\":\n"
    hint = case.get("context", {}).get("hint")
    if record.get("error") == "NotImplementedError":
        return Verdict(False, f"{fn} is not written yet (it raises NotImplementedError): replace the stub "
                              "with your code.", ("error",), "error")
    if "error" in record:
        if hidden:
            return Verdict(False, f"{fn} raised {record['error']} on a hidden case. {exercise.hidden_note}".rstrip(),
                           ("error",), "error")
        text = f"{exercise.call_text(case)} raised {record['error']}: {record.get('error_message', '')}"
        return Verdict(False, head + text + (f"\nHint: {hint}" if hint else ""), ("error",), "error")
    try:
        value = answers.decode(record)
    except answers.RecordError:
        value = None
    accepted = _accepted(exercise, case, earlier)
    kind = exercise.answer
    type_ok = value is not None and kind.fits(value)
    for basis, expected in accepted:
        if type_ok and kind.equal(value, expected):
            return Verdict(True, "correct.", built_on=basis)
    number = _number(record, value)
    for basis, expected in accepted if not type_ok else ():
        if _type_carried(exercise, record, number, expected, earlier):
            # the right value in the wrong type that the earlier step's answer had: charged there, not again
            return Verdict(True, f"right; its type ({record.get('type', '?')}) comes from your {exercise.builds_on} "
                                 "answer (see that check).", ("type_from_earlier",), built_on=basis)
    basis, expected, found = _diagnosed(exercise, case, number, accepted, lead, allowed)
    keys = tuple(dict.fromkeys(slips.base_key(k) for k in found))
    named = keys if allowed is None else tuple(k for k in allowed if k in keys)
    type_note = "" if type_ok else kind.wrong_type(fn, record.get("type", "?"))
    if type(value) is str and type(expected) is bytes and value.strip().lower() == expected.hex():
        return Verdict(False, head + f"{fn} {slips.message('hex_not_bytes')}", ("wrong_type", "hex_not_bytes"),
                       "type")
    if value is None and record.get("type") == "builtins.NoneType":
        type_note = f"{fn} returned None: did you forget the return statement?"
    if not type_ok and not keys:
        # the right value in the wrong type, or a wrong type that no slip explains
        right = (not hidden and type(number) in (int, float) and type(expected) in (int, float)
                 and answers.Float().equal(number, expected))
        problem = getattr(kind, "element_problem", None)
        if problem and type(value) is tuple and len(value) == len(kind.items):
            type_note += f" ({problem(value)}.)"
        return Verdict(False, head + type_note + (" (The value itself is right.)" if right else ""),
                       ("wrong_type", "float_not_int") if right and type(number) is float else ("wrong_type",),
                       "type", built_on=basis)
    if hidden:
        if lead in named:
            named = (lead,) + tuple(k for k in named if k != lead)
        texts = [slips.general(k) for k in named[:2]]
        text = " Or: ".join(texts) if texts else "the answer matches no known slip: recheck each part."
        note = f" {type_note}" if type_note else ""
        return Verdict(False, f"{fn} is wrong {head}{text}{note} {exercise.hidden_note}".rstrip(), keys, "value",
                       variants=found, built_on=basis)
    shown = kind.show(value) if type_ok else (f"{number:,}" if type(number) in (int, float)
                                              else repr(number) if number is not None else record.get("type", "?"))
    line = (f"{exercise.call_text(case)} returned {shown}; expected {kind.show(expected)} {exercise.unit}".rstrip()
            + _other_accepted(exercise, accepted, basis, expected))
    diagnosis = _diagnosis(exercise, case, number, lead, allowed, basis)
    # a case's hint helps only where no slip is named: a named slip's words are its advice
    tail = (f"\n{type_note}" if type_note else "") + (f"\nHint: {hint}" if hint and not named else "")
    return Verdict(False, head + line + ".\n" + diagnosis + tail, keys, "value", head + line + ".\n", tail,
                   variants=found, built_on=basis)


def _accepted(exercise: Exercise, case: dict, earlier) -> list:
    """``[(basis, expected)]``: the answers a case accepts, the learner's own chain first.

    A step built on an earlier one is right on the value the learner's earlier answer implies (``basis``:
    that answer) and on kvlib's own value (``basis`` ``NOT_BUILT_ON``, last): one slip is charged in its own
    step whether this step reuses the earlier answer or recomputes it by itself. An earlier answer that is a
    float is also taken one ulp either side (``math.nextafter``): a float such as 536870.912 (a size in KB)
    is not exact in binary, so a count floored from it may land on either side of a whole number, as the
    learner's ``pool // s`` and kvlib's ``floor(pool / s)`` do. One entry when there is no chain (no earlier
    number, or one that leaves nothing to compute: ``_not_built``), or when both give the same value from the
    same slip inputs.
    """
    own = exercise.expected_for(case)
    number = _build_number(earlier)
    if not exercise.builds_on or number is None:
        return [(NOT_BUILT_ON, own)]
    chains = [earlier]
    if type(number) is float and math.isfinite(number):
        chains += [_with_number(earlier, math.nextafter(number, direction)) for direction in (-math.inf, math.inf)]
    out: list = []
    for basis in chains:
        try:
            chain = exercise.expected_for(case, basis)
        except (ArithmeticError, ValueError, TypeError):
            continue
        if chain is None or (type(chain) is float and not math.isfinite(chain)):
            continue
        if not out or all(chain != e for _, e in out):
            out.append((basis, chain))
    if not out or out[0][0] is not earlier:
        return [(NOT_BUILT_ON, own)]
    if len(out) == 1 and out[0][1] == own and slip_inputs_for(exercise, case, earlier) == slip_inputs_for(
            exercise, case):
        return out
    return out + [(NOT_BUILT_ON, own)]


def _with_number(earlier, number):
    """``earlier`` (an ``Earlier`` or a plain number) with another number."""
    return replace(earlier, number=number) if isinstance(earlier, Earlier) else number


def _diagnosed(exercise: Exercise, case: dict, number, accepted, lead=None, allowed=None) -> tuple:
    """``(basis, expected, slip variants)`` of a wrong answer: the value its message compares it with, and the
    slip variants that reproduce it on any accepted value (a later step: on the learner's chain, a slip of this
    step made on top of their own earlier answer, or on kvlib's, one made while recomputing the earlier step).

    The basis is the first accepted value (the chain first) on which ``lead``, else one of ``allowed``, else
    any slip reproduces the answer; the chain's when none does.
    """
    tried = []
    for basis, expected in accepted if exercise.quantity and number is not None else ():
        found = slips.matching_variants(exercise.quantity, number, rel_tol=_rel_tol(exercise), unit=exercise.unit,
                                        **slip_inputs_for(exercise, case, basis))
        tried.append((basis, expected, found))
    every = tuple(dict.fromkeys(v for _, _, found in tried for v in found))
    for wanted in ({lead} - {None}, set(allowed or ()), None):
        for basis, expected, found in tried:
            keys = {slips.base_key(k) for k in found}
            if keys and (wanted is None or keys & wanted):
                return basis, expected, every
    return accepted[0] + (every,)


def _other_accepted(exercise: Exercise, accepted, basis, expected) -> str:
    """A visible message's words for the other value the case accepts: kvlib's beside the learner's chain, or
    the chain beside kvlib's ('' when they agree)."""
    if len(accepted) < 2:
        return ""
    (mine, chain), (_, own) = accepted[0], accepted[-1]
    number = _build_number(mine)
    step, unit = _earlier_step(exercise)
    given = (f"{number:,} {unit}".rstrip() if type(number) in (int, float) else repr(number))
    show = exercise.answer.show
    if basis is NOT_BUILT_ON:
        return "" if exercise.answer.equal(chain, expected) else \
            f", or {show(chain)} on what your {step} gives here ({given})"
    return "" if exercise.answer.equal(own, expected) else \
        f" on what your {step} gives here ({given}), or {show(own)} on the right {step}"


def _earlier_step(exercise: Exercise) -> tuple:
    """(function name, unit) of the step ``exercise`` builds on (its grade id and no unit when the registry has
    none)."""
    try:
        from . import exercise as registered
        step = registered(exercise.builds_on)
    except LookupError:
        return exercise.builds_on, ""
    return step.function_name, step.unit


def _right_alone(exercise: Exercise, case: dict, record: dict) -> bool:
    """The record holds kvlib's own value in the exact answer type (right without building on anything)."""
    value = _decoded(record)
    if value is None or not exercise.answer.fits(value):
        return False
    try:
        return exercise.answer.equal(value, exercise.expected_for(case))
    except (ArithmeticError, ValueError, TypeError):
        return False


def _not_built(exercise: Exercise, case: dict, record: dict, earlier) -> Verdict | None:
    """The excused verdict of a case that cannot be judged on the learner's earlier step, else None.

    Either the earlier number leaves this step nothing to compute (kvlib's function raises on it or gives
    no finite number: a division by the 0 of a missing ``max(1, ...)``), or the earlier step gave no
    number and this one gives none either (it raised, perhaps on the earlier step's answer). Its slip was
    charged in its own step; a stub (NotImplementedError) is never excused, and a case that gave kvlib's own
    value passes instead (``judge``: ``_right_alone``).
    """
    if not exercise.builds_on or earlier is None or earlier is NOT_BUILT_ON \
            or record.get("error") == "NotImplementedError":
        return None
    prior = Earlier.of(earlier)
    step = exercise.builds_on
    if prior.number is None:
        if "error" in record or _number(record, _decoded(record)) is None:
            return Verdict(True, f"not judged: it builds on your {step} answer, which {prior.did()} on this "
                                 "case (see that check).", ("builds_on_wrong_step",), "excused")
        return None     # this step gave a number of its own: judged against kvlib's value
    try:
        expected = exercise.expected_for(case, prior)
    except (ArithmeticError, ValueError, TypeError):
        expected = None
    if expected is None or (type(expected) is float and not math.isfinite(expected)):
        return Verdict(True, f"not judged: it builds on your {step} answer, which {prior.did()} on this case: "
                             "nothing to build on (see that check).", ("builds_on_wrong_step",), "excused")
    if type(expected) is int and expected == 0 and exercise.expected_for(case) != 0:
        # a count of 0 on the learner's answer (nothing fits one so large) shows none of this step's arithmetic:
        # a constant 0 would pass it (an earlier answer of 10**30 must not earn the steps built on it)
        return Verdict(True, f"not judged: it builds on your {step} answer, which {prior.did()} on this case: "
                             "on that, nothing fits (a count of 0), so there is nothing to count (see that check).",
                       ("builds_on_wrong_step",), "excused")
    return None


def _type_carried(exercise: Exercise, record: dict, number, expected, earlier) -> bool:
    """The right value in the very type the earlier step's answer had wrongly (a float, a numpy scalar)."""
    if not exercise.builds_on or not isinstance(earlier, Earlier) or earlier.right_type or earlier.raised:
        return False
    mine, theirs = record.get("type", ""), earlier.type
    same = mine == theirs or (mine.startswith("numpy.") and theirs.startswith("numpy."))
    if not same or type(number) not in (int, float) or type(expected) not in (int, float):
        return False
    if not math.isfinite(number):
        return False
    return number == expected if type(expected) is int else answers.Float(
        rel_tol=_rel_tol(exercise)).equal(number, expected)


NO_STUDENT = ("there is no student id, so there is no question of yours to check against: set STUDENT_ID = "
              "\"<your id>\" in the cell near the top of the notebook and run it (the id your class grades you "
              "by; on a course hub an empty STUDENT_ID uses your login, on Binder it never does).")


def tolerance_text(exercise: Exercise) -> str:
    """'exact' or 'within 0.5%': how close a value exercise's answer must be."""
    tol = getattr(exercise.answer, "rel_tol", 0.0)
    return f"within {tol * 100:g}%" if tol else "exact"


def _judge_value(exercise: Exercise, case: dict, record: dict) -> Verdict:
    """The verdict on a value exercise: right, or the slip and the tolerance (never the expected value)."""
    name = exercise.function_name
    if not case.get("context", {}).get("student"):
        return Verdict(False, NO_STUDENT, ("no_student",), "error")
    if "error" in record:
        if record["error"] == "NameError":
            text = f"{name} is not set: its answer cell assigns {name} = <your number>; run that cell first."
        else:
            text = f"{name} could not be read: {record['error']}: {record.get('error_message', '')}".rstrip(": ")
        return Verdict(False, text, ("error",), "error")
    try:
        value = answers.decode(record)
    except answers.RecordError:
        value = None
    kind = exercise.answer
    if hasattr(kind, "read"):       # an answer kind that reads text as the drills do ('16.6 GB': ch09's DrillNumber)
        value = kind.read(value)
    if value is None or not kind.fits(value):
        return Verdict(False, kind.wrong_type(name, record.get("type", "?")), ("wrong_type",), "type")
    if kind.equal(value, exercise.expected_for(case)):
        if record.get("kvlib_calls"):   # the right number, read from the drill object (tripwires.drill_reads)
            return Verdict(False, f"{name} is the answer read from kvlib's drill object "
                                  f"({', '.join(record['kvlib_calls'])}), not worked out: a graded answer must be "
                                  "your own arithmetic on the figures your question states.", ("kvlib_called",),
                           "kvlib")
        return Verdict(True, "correct.")
    inputs = exercise.slip_inputs(case) if exercise.slip_inputs else {}
    keys = ()
    if exercise.quantity:
        keys = matching_slips(exercise.quantity, value, inputs, getattr(kind, "rel_tol", 0.0) or 1e-9, exercise.unit)
    head = (f"{name} = {kind.show(value)} {exercise.unit} is not the answer to your question "
            f"({tolerance_text(exercise)}; student {case['context']['student']!r})")
    if keys:
        text = f"{head} [{keys[0]}]: {slips.message(keys[0], **inputs)}"
        if len(keys) > 1:
            text += f" Or [{keys[1]}]: {slips.message(keys[1], **inputs)}"
    else:
        text = f"{head}, and it matches no known slip: recheck each step."
    return Verdict(False, text, keys, "value")


def passed_line(exercise: Exercise, count: int, hidden: bool = False) -> str:
    """The one ✓ line of an exercise whose cases all passed."""
    if exercise.value:
        return f"✓ {exercise.function_name}: right for your question ({exercise.grade_id})"
    return f"✓ {exercise.function_name}: all {count} {'hidden' if hidden else 'visible'} cases right ({exercise.grade_id})"


def _diagnosis(exercise: Exercise, case: dict, number, lead, allowed=None, earlier=NOT_BUILT_ON) -> str:
    if exercise.quantity and number is not None:
        return slips.diagnose(exercise.quantity, number, rel_tol=_rel_tol(exercise), lead=lead, only=allowed,
                              unit=exercise.unit, **slip_inputs_for(exercise, case, earlier)).message
    return "recheck it step by step."


def verdicts(exercise: Exercise, cases, records, *, hidden: bool = False, earlier=None) -> list:
    """One ``Verdict`` per case; ``earlier``: the learner's answers to the step this one builds on."""
    out = []
    for k, (case, record) in enumerate(zip(cases, records)):
        out.append(judge(exercise, case, record, hidden=hidden, earlier=_prior(earlier, k, case)))
    return out


def common_slip(results) -> str | None:
    """The one slip consistent with every failing case judged on its value, or None.

    Every such failure must be explained by it: a slip that fits some failing
    cases and not others is never named as the cause.
    """
    judged = [v for v in results if not v.ok and v.kind == "value"]
    if not judged or any(not v.slips for v in judged):
        return None
    shared = [k for k in judged[0].slips if all(k in v.slips for v in judged[1:])]
    return shared[0] if shared else None


def _prior(earlier, k, case=None):
    """The earlier step's answer that case ``k`` builds on: that step's case k, or the one the case names
    (``context["earlier_case"]``: a case of this step only, such as an edge of its own, built on an earlier case)."""
    if case is not None:
        k = case.get("context", {}).get("earlier_case", k)
    return earlier[k] if earlier is not None and 0 <= k < len(earlier) else NOT_BUILT_ON


def fitting_slips(exercise: Exercise, cases, results, records, earlier=None, *, failing_only: bool = False,
                  some: bool = False) -> tuple:
    """The slips that fit every case: each reproduces every failing case's value and every passing one's.

    A slip variant (``kvlib.slips.matching_variants``) must give the learner's
    answer on every case that failed on its value, and no passing case may
    rule it out (``kvlib.slips.ruled_out``: applied there, it gives another
    number than the learner's right one). Catalogue keys, in the first failing
    case's order; () when none fits or nothing failed on its value.
    ``failing_only``: the slips that fit every failing case, whatever the passing ones say (for analysis:
    never named). ``some``: the slips that give at least one failing case's value and that no passing case
    rules out, those that explain the most failing cases first (a failure no one slip explains: the part
    that one slip explains, and no passing case contradicts it).
    """
    if not exercise.quantity or records is None:
        return ()
    judged = [v for v in results if not v.ok and v.kind == "value"]
    if not judged or (not some and any(not v.variants for v in judged)):
        return ()
    # a slip may be made one way on one case and another way on the next (the element size read from each
    # config): every failing case must show the slip, in some way
    ways: dict = {}
    for v in judged:
        for t in v.variants:
            ways.setdefault(slips.base_key(t), set()).add(t)
    if some:
        counts = {key: sum(key in v.slips for v in judged) for key in ways}
        shared = sorted(ways, key=lambda key: -counts[key])       # stable: the catalogue's order among equals
    else:
        shared = [key for key in dict.fromkeys(slips.base_key(t) for t in judged[0].variants)
                  if all(key in v.slips for v in judged[1:])]
    for k, v in enumerate([] if failing_only else results):
        if not shared:
            break
        if not v.ok or v.kind == "excused" or k >= len(records):
            continue
        number = _number(records[k], _decoded(records[k]))
        if number is None:
            continue
        out = slips.ruled_out(exercise.quantity, number, rel_tol=_rel_tol(exercise), unit=exercise.unit,
                              **slip_inputs_for(exercise, cases[k], v.built_on))
        # a passing case rules a slip out when every way it was made elsewhere gives another number here
        shared = [key for key in shared if not ways[key] <= out]
    return tuple(shared)


@dataclass(frozen=True)
class Summary:
    """An exercise's outcome as data: the message a learner sees and the slips it names.

    ``slips``: the catalogue keys the message names, the lead first (a key
    ``a+b`` is two slips made at once: ``combined``); ``fitting``: every slip
    that fits every case (``fitting_slips``); ``kind``: the first failure's
    kind ("value", "type", "error", "kvlib"), "" when every case passed.
    """

    message: str | None
    slips: tuple = ()
    combined: bool = False
    fitting: tuple = ()
    kind: str = ""


def summary(exercise: Exercise, cases, results, *, hidden: bool = False, earlier=None, records=None) -> Summary:
    """The one message for an exercise's verdicts, and the slips it names (message None when all passed).

    Visible: the first failing case, naming only slips that fit every case
    (``fitting_slips``: the lead, and an alternative only when it fits every
    case too); a slip that fits every failing case but that a passing case
    rules out is named alone; when none fits every failing case, that is said
    instead of naming one. Hidden: the same, in general words.
    """
    failures = [(k, v) for k, v in enumerate(results) if not v.ok]
    excused = [v for v in results if v.kind == "excused"]
    if excused and all(v.kind == "excused" or (v.ok and _zero(exercise, cases[k])) for k, v in enumerate(results)):
        # nothing was judged, or only cases whose right answer is 0 (a constant 0 passes them): not a pass (the
        # earlier step's slip is named in its own check)
        where = "hidden case" if hidden else "case"
        more = "" if len(excused) == len(results) else " that has something to count"
        return Summary(f"{excused[0].message} The same holds on every {where}{more}, so nothing of this step could "
                       f"be judged: fix {exercise.builds_on} first, run its check, then this one.", (), (), "excused")
    if not failures:
        return Summary(None)
    if exercise.value:
        # one case, the learner's own problem: its verdict already names the slips its number matches
        first = failures[0][1]
        return _summary(first.message, first.slips[:2] if first.kind == "value" else (), (), first.kind)
    # a slip is named only when it fits every case, failing and passing; when none does, none is named (one
    # that fits the failing cases only is a wrong lead: the passing ones show the learner does not make it)
    fitting = fitting_slips(exercise, cases, results, records, earlier)
    value_failures = [v for _, v in failures if v.kind == "value"]
    k, first = failures[0]
    if hidden:
        if fitting:
            k, first = next((j, v) for j, v in failures if v.kind == "value")
            message = judge(exercise, cases[k], records[k], hidden=True, earlier=_prior(earlier, k, cases[k]),
                            lead=fitting[0], allowed=fitting).message
            return _summary(message, fitting[:2], fitting, "value")
        # no slip fits them all: a slip that explains some failing cases, named alone, where no passing case
        # rules it out (never one the passing cases contradict)
        partial = fitting_slips(exercise, cases, results, records, earlier, some=True)[:1]
        if partial:
            k = next(j for j, v in failures if v.kind == "value" and partial[0] in v.slips)
            message = judge(exercise, cases[k], records[k], hidden=True, earlier=_prior(earlier, k, cases[k]),
                            allowed=partial).message
            return _summary(message, partial, (), "value")
        chosen = next((v for _, v in failures if v.kind != "value" or not exercise.quantity), None)
        if chosen is not None:      # an error, a wrong type, a wrong choice with no catalogue: as judged
            return _summary(chosen.message, (), (), chosen.kind)
        return _summary(f"{exercise.function_name} is wrong on hidden cases, and no one known slip explains them "
                        "together with the hidden cases it gets right: recheck each part. "
                        f"{exercise.hidden_note}".rstrip(), (), (), "value")
    message, named = first.message, ()
    if first.kind == "value":
        prior = _prior(earlier, k, cases[k])
        if fitting:
            message = judge(exercise, cases[k], records[k], earlier=prior, lead=fitting[0], allowed=fitting).message
            named = fitting[:2]
            if len(value_failures) > 1:
                message += f"\n(The same slip explains all {len(value_failures)} failing cases.)"
        elif exercise.quantity and first.slips:
            message = _unexplained(exercise, cases, results, records, k, first, first.built_on)
        else:       # the first failing case matches no slip at all: its verdict says so
            message = first.message + _edges_line(exercise, cases, results)
    more = len(failures) - 1
    tail = f"\n({more} more visible case{'s' if more > 1 else ''} fail{'' if more > 1 else 's'}.)" if more else ""
    return _summary(message + tail, named, fitting, first.kind)


def _zero(exercise: Exercise, case: dict) -> bool:
    """kvlib's answer to ``case`` is a count of 0 (an answer that is always 0 gets it right)."""
    try:
        expected = exercise.expected_for(case)
    except (ArithmeticError, ValueError, TypeError):
        return False
    return type(expected) is int and expected == 0


def edge_rules(exercise: Exercise, failing_cases) -> list:
    """``[(rule, labels)]``: each edge of the chapter's ``EDGES`` that names failing visible cases, with their
    labels (a checks module without EDGES: [])."""
    from . import chapter_module
    try:
        listed = getattr(chapter_module(exercise.grade_id), "EDGES", {}).get(exercise.grade_id, ())
    except LookupError:
        return []
    out = []
    for edge in listed:
        on = [case["label"] for case in failing_cases if case["label"] in edge.get("visible", ())]
        if on:
            out.append((edge["rule"], on))
    return out


def _unexplained(exercise: Exercise, cases, results, records, k, first, prior) -> str:
    """A visible failure that no one slip explains together with every passing case: the first failing
    case's line and how far off it is, the failing cases by label, the rule of any edge they sit on; no slip."""
    number = _number(records[k], _decoded(records[k])) if records is not None else None
    try:
        expected = exercise.expected_for(cases[k], prior)
        ratio = slips.ratio_text(number, expected, exercise.unit) if number is not None else "wrong"
    except (ArithmeticError, TypeError, ValueError):
        ratio = "wrong"
    text = (first.head + f"{ratio}, and no one known slip explains every case (those that fail and those that "
            "pass): recheck each factor." + _edges_line(exercise, cases, results))
    hint = cases[k].get("context", {}).get("hint")
    return text + first.tail + (f"\nHint: {hint}" if hint and "Hint:" not in first.tail else "")


def _edges_line(exercise: Exercise, cases, results) -> str:
    """The failing visible cases by label (two or more), and the rule of any edge they sit on ('' if none)."""
    failing = [cases[j] for j, v in enumerate(results) if not v.ok and v.kind == "value"]
    text = ""
    if len(failing) > 1:
        labels = [f'"{c["label"]}"' for c in failing[:4]] + ([f"{len(failing) - 4} more"] if len(failing) > 4
                                                            else [])
        text += f"\nFailing cases: {', '.join(labels)}."
    for rule, labels in edge_rules(exercise, failing):
        text += (f"\n{', '.join(chr(34) + label + chr(34) for label in labels)} "
                 f"{'sit' if len(labels) > 1 else 'sits'} on an edge the text decides: {rule}.")
    return text


def _summary(message, named, fitting, kind) -> Summary:
    named = tuple(named)
    return Summary(message, named, bool(named) and slips.COMBINED in named[0], tuple(fitting), kind)


def summarise(exercise: Exercise, cases, results, *, hidden: bool = False, earlier=None,
              records=None) -> str | None:
    """The message of ``summary`` (None when every case passed)."""
    return summary(exercise, cases, results, hidden=hidden, earlier=earlier, records=records).message


def _decoded(record):
    try:
        return answers.decode(record)
    except answers.RecordError:
        return None


# ---------------------------------------------------------------------------
# The instant check
# ---------------------------------------------------------------------------
#: What each exercise's last check left for the steps that build on it: ``(grade id, (hidden, seed))`` -> the
#: learner's answers to those cases, ``(grade id, "function")`` -> the function it was given (one dict, so that
#: clearing it forgets both).
_ANSWERS: dict = {}


GRADING_STUDENT_ENV = "KV_COURSE_GRADING_STUDENT"   # set by the grader only (the submission's student)
HUB_USER_ENV = "JUPYTERHUB_USER"                     # a hub login: after a claimed id
BINDER_ENV = "BINDER_LAUNCH_HOST"                    # set by Binder, whose hub user is never a learner's id
STUDENT_ENVS = ("KV_COURSE_STUDENT",)                # after the hub login
STUDENT_ID_ENV = "STUDENT_ID"                        # last

_claimed: str | None = None


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


def hub_user() -> str | None:
    """The hub login that names the learner: ``JUPYTERHUB_USER``, unless the hub is Binder's."""
    if _env(BINDER_ENV):
        return None
    return _env(HUB_USER_ENV) or None


def current_student() -> str | None:
    """The learner's id, or None when nothing names one (the order is in the module doc)."""
    found = _env(GRADING_STUDENT_ENV) or _claimed or hub_user()
    if found:
        return found
    for var in (*STUDENT_ENVS, STUDENT_ID_ENV):
        if _env(var):
            return _env(var)
    return None


def claim_student(name) -> str | None:
    """Record the id the learner states in the notebook (``STUDENT_ID = "ada"``); returns ``current_student()``.

    A claim comes after the grader's id only (so in grading it changes nothing) and before a hub login
    (Binder's generated one is never used); ``None`` or ``""`` withdraws it.
    """
    global _claimed
    if name is not None and not isinstance(name, str):
        raise TypeError(f"STUDENT_ID must be text, such as \"ada\", not {type(name).__name__} {name!r}")
    _claimed = (name or "").strip() or None
    return current_student()


def my_question(topic: str):
    """The learner's own question on ``topic`` (a ``kvlib.drills.Question``: no answer in it).

    Raises ``LookupError`` with the STUDENT_ID message when no id is known.
    """
    from kvcoach.drills import student_problem

    student = current_student()
    if student is None:
        raise LookupError(NO_STUDENT)
    return student_problem(student, topic).public()


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
        from . import exercise as registered
        step = registered(exercise.builds_on)
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


def legacy_checks(exercise_map: dict):
    """A chapter module's ``__getattr__`` answering ``check_qN`` (the check of its exercise ``chNN_qN_*``)."""
    by_q = {gid.split("_")[1]: ex for gid, ex in exercise_map.items()}
    made: dict = {}

    def __getattr__(name: str):
        ex = by_q.get(name.removeprefix("check_")) if name.startswith("check_q") else None
        if ex is None:
            raise AttributeError(name)
        if name in made:
            return made[name]

        def check_q(fn, hidden: bool = False, seed: int | None = None) -> None:
            __tracebackhide__ = True
            check(ex, fn, hidden=hidden, seed=seed)
        check_q.__name__ = name
        made[name] = check_q
        return check_q
    return __getattr__
