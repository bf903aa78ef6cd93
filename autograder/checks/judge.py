"""Judging one case from its record (anywhere: needs only the case and the record).

``judge(exercise, case, record)`` turns what the learner's function did on one case (a JSON-safe record,
``answers.encode``) into a ``CaseVerdict``: pass or fail, and the message. Visible verdicts name the case,
the call, the answer and the expected value; hidden ones name only the slip, in general words
(``kvcoach.slips.general``). A step built on an earlier one is judged on the learner's own chain as well as
on kvlib's value (``autograder.checks.schema``). What one message says across an exercise's cases is
``autograder.checks.diagnosis``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kvcoach import slips
from kvcoach.learner import NO_STUDENT

from . import answers, registry
from .schema import NOT_BUILT_ON, Earlier, Exercise, _accepts, _build_number

#: Slip wording lives in the coach's catalogue; this name stays for older callers.
GENERIC_SLIPS = slips.GENERAL


@dataclass(frozen=True)
class CaseVerdict:
    """The verdict on one case: passed or not, the message, and the slips that reproduce the answer."""

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
    if type(value) is bytes:
        return value.hex()      # a key (ch05): its slips are recomputed and matched as hex text
    if type(value) is tuple and value and all(type(v) in (int, float) for v in value):
        return value        # a range such as (fewest, most): kvlib.slips compares it element by element
    number = record.get("number")
    return number if type(number) in (int, float) else None


def judge(exercise: Exercise, case: dict, record: dict, *, hidden: bool = False, earlier=NOT_BUILT_ON,
          lead: str | None = None, allowed=None) -> CaseVerdict:
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
        return CaseVerdict(False, f"build this by hand: exercise {exercise.grade_id} must not call {names}.",
                       ("kvlib_called",), "kvlib")
    excused = _not_built(exercise, case, record, earlier)
    if excused is not None and not _right_alone(exercise, case, record):
        return excused
    head = "on a hidden case: " if hidden else f"on case \"{case['label']}\":\n"
    hint = case.get("context", {}).get("hint")
    if record.get("error") == "NotImplementedError":
        return CaseVerdict(False, f"{fn} is not written yet (it raises NotImplementedError): replace the stub "
                              "with your code.", ("error",), "error")
    if "error" in record:
        if hidden:
            return CaseVerdict(False, f"{fn} raised {record['error']} on a hidden case. {exercise.hidden_note}".rstrip(),
                           ("error",), "error")
        text = f"{exercise.call_text(case)} raised {record['error']}: {record.get('error_message', '')}"
        return CaseVerdict(False, head + text + (f"\nHint: {hint}" if hint else ""), ("error",), "error")
    try:
        value = answers.decode(record)
    except answers.RecordError:
        value = None
    accepted = _accepted(exercise, case, earlier)
    kind = exercise.answer
    type_ok = value is not None and kind.fits(value)
    for basis, expected in accepted:
        if type_ok and kind.equal(value, expected):
            return CaseVerdict(True, "correct.", built_on=basis)
    number = _number(record, value)
    for basis, expected in accepted if not type_ok else ():
        if _type_carried(exercise, record, number, expected, earlier):
            # the right value in the wrong type that the earlier step's answer had: charged there, not again
            return CaseVerdict(True, f"right; its type ({record.get('type', '?')}) comes from your {exercise.builds_on} "
                                 "answer (see that check).", ("type_from_earlier",), built_on=basis)
    basis, expected, found = _diagnosed(exercise, case, number, accepted, lead, allowed)
    keys = tuple(dict.fromkeys(slips.base_key(k) for k in found))
    named = keys if allowed is None else tuple(k for k in allowed if k in keys)
    type_note = "" if type_ok else kind.wrong_type(fn, record.get("type", "?"))
    if type(value) is str and type(expected) is bytes and value.strip().lower() == expected.hex():
        return CaseVerdict(False, head + f"{fn} {slips.message('hex_not_bytes')}", ("wrong_type", "hex_not_bytes"),
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
        return CaseVerdict(False, head + type_note + (" (The value itself is right.)" if right else ""),
                       ("wrong_type", "float_not_int") if right and type(number) is float else ("wrong_type",),
                       "type", built_on=basis)
    if hidden:
        if lead in named:
            named = (lead,) + tuple(k for k in named if k != lead)
        texts = [slips.general(k) for k in named[:2]]
        text = (" Or: ".join(texts) if texts else _parts(exercise, value, expected)
                or "the answer matches no known slip: recheck each part.")
        note = f" {type_note}" if type_note else ""
        return CaseVerdict(False, f"{fn} is wrong {head}{text}{note} {exercise.hidden_note}".rstrip(), keys, "value",
                       variants=found, built_on=basis)
    shown = kind.show(value) if type_ok else (f"{number:,}" if type(number) in (int, float)
                                              else repr(number) if number is not None else record.get("type", "?"))
    line = (f"{exercise.call_text(case)} returned {shown}; expected {kind.show(expected)} {exercise.unit}".rstrip()
            + _other_accepted(exercise, accepted, basis, expected))
    diagnosis = _diagnosis(exercise, case, number, lead, allowed, basis, expected, value)
    # a case's hint helps only where no slip is named: a named slip's words are its advice
    tail = (f"\n{type_note}" if type_note else "") + (f"\nHint: {hint}" if hint and not named else "")
    return CaseVerdict(False, head + line + ".\n" + diagnosis + tail, keys, "value", head + line + ".\n", tail,
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
        step = registry.exercise(exercise.builds_on)
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


def _not_built(exercise: Exercise, case: dict, record: dict, earlier) -> CaseVerdict | None:
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
            return CaseVerdict(True, f"not judged: it builds on your {step} answer, which {prior.did()} on this "
                                 "case (see that check).", ("builds_on_wrong_step",), "excused")
        return None     # this step gave a number of its own: judged against kvlib's value
    try:
        expected = exercise.expected_for(case, prior)
    except (ArithmeticError, ValueError, TypeError):
        expected = None
    if expected is None or (type(expected) is float and not math.isfinite(expected)):
        return CaseVerdict(True, f"not judged: it builds on your {step} answer, which {prior.did()} on this case: "
                             "nothing to build on (see that check).", ("builds_on_wrong_step",), "excused")
    if type(expected) is int and expected == 0 and exercise.expected_for(case) != 0:
        # a count of 0 on the learner's answer (nothing fits one so large) shows none of this step's arithmetic:
        # a constant 0 would pass it (an earlier answer of 10**30 must not earn the steps built on it)
        return CaseVerdict(True, f"not judged: it builds on your {step} answer, which {prior.did()} on this case: "
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


def tolerance_text(exercise: Exercise) -> str:
    """'exact' or 'within 0.5%': how close a value exercise's answer must be."""
    tol = getattr(exercise.answer, "rel_tol", 0.0)
    return f"within {tol * 100:g}%" if tol else "exact"


def _judge_value(exercise: Exercise, case: dict, record: dict) -> CaseVerdict:
    """The verdict on a value exercise: right, or the slip and the tolerance (never the expected value)."""
    name = exercise.function_name
    if not case.get("context", {}).get("student"):
        return CaseVerdict(False, NO_STUDENT, ("no_student",), "error")
    if "error" in record:
        if record["error"] == "NameError":
            text = f"{name} is not set: its answer cell assigns {name} = <your number>; run that cell first."
        else:
            text = f"{name} could not be read: {record['error']}: {record.get('error_message', '')}".rstrip(": ")
        return CaseVerdict(False, text, ("error",), "error")
    try:
        value = answers.decode(record)
    except answers.RecordError:
        value = None
    kind = exercise.answer
    if hasattr(kind, "read"):       # an answer kind that reads text as the drills do ('16.6 GB': ch09's DrillNumber)
        value = kind.read(value)
    if value is None or not kind.fits(value):
        return CaseVerdict(False, kind.wrong_type(name, record.get("type", "?")), ("wrong_type",), "type")
    if kind.equal(value, exercise.expected_for(case)):
        if record.get("kvlib_calls"):   # the right number, read from the drill object (tripwires.drill_reads)
            return CaseVerdict(False, f"{name} is the answer read from kvlib's drill object "
                                  f"({', '.join(record['kvlib_calls'])}), not worked out: a graded answer must be "
                                  "your own arithmetic on the figures your question states.", ("kvlib_called",),
                           "kvlib")
        return CaseVerdict(True, "correct.")
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
    return CaseVerdict(False, text, keys, "value")


def passed_line(exercise: Exercise, count: int, hidden: bool = False) -> str:
    """The one ✓ line of an exercise whose cases all passed."""
    if exercise.value:
        return f"✓ {exercise.function_name}: right for your question ({exercise.grade_id})"
    return f"✓ {exercise.function_name}: all {count} {'hidden' if hidden else 'visible'} cases right ({exercise.grade_id})"


def _diagnosis(exercise: Exercise, case: dict, number, lead, allowed=None, earlier=NOT_BUILT_ON,
               expected=None, value=None) -> str:
    if exercise.quantity and number is not None:
        return slips.diagnose(exercise.quantity, number, rel_tol=_rel_tol(exercise), lead=lead, only=allowed,
                              unit=exercise.unit, **slip_inputs_for(exercise, case, earlier)).message
    return _parts(exercise, value, expected) or "recheck it step by step."


def _parts(exercise: Exercise, value, expected) -> str | None:
    """Which parts of a tuple answer are right and which wrong, where the exercise labels them (None: not told)."""
    parts = getattr(exercise.answer, "parts_text", None)
    if parts is None or type(value) is not tuple or not exercise.answer.fits(value):
        return None
    return parts(value, expected)


def verdicts(exercise: Exercise, cases, records, *, hidden: bool = False, earlier=None) -> list:
    """One ``CaseVerdict`` per case; ``earlier``: the learner's answers to the step this one builds on."""
    out = []
    for k, (case, record) in enumerate(zip(cases, records)):
        out.append(judge(exercise, case, record, hidden=hidden, earlier=_prior(earlier, k, case)))
    return out


def _prior(earlier, k, case=None):
    """The earlier step's answer that case ``k`` builds on: that step's case k, or the one the case names
    (``context["earlier_case"]``: a case of this step only, such as an edge of its own, built on an earlier case)."""
    if case is not None:
        k = case.get("context", {}).get("earlier_case", k)
    return earlier[k] if earlier is not None and 0 <= k < len(earlier) else NOT_BUILT_ON


def _decoded(record):
    try:
        return answers.decode(record)
    except answers.RecordError:
        return None
