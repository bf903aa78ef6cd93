"""An exercise as data: what the learner's function is called, its cases, and the right answer of each.

An ``Exercise`` is data: its function's name and parameters, its cases (plain
JSON-safe dicts from case builders), the expected value of each (computed by
kvlib), the answer type (``autograder.checks.answers``) and, for numbers, the
``kvcoach.slips`` quantity that names a wrong answer. Points are not here: they
are stated once, on the test cell of the source notebook.

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
  would have accepted (``CaseVerdict.built_on``: the earlier answer a verdict was
  judged on).

Value exercises (``value=True``): the learner binds a name to a number
(``answer_pool = 451342``) and the test cell passes that number, not a
function: ``check("ch09_q4_pool", answer_pool)``. ``function_name`` is then the
name, ``params`` is empty and the one visible case is the learner's own
problem (its ``context`` holds the student id, from ``current_student()`` in
the kernel and from the grader's student in ``autograder.verdict``). A wrong
value is named by its slip and the tolerance, never by the expected value.
"""

from __future__ import annotations

import copy
import inspect
import random
from dataclasses import dataclass
from typing import Callable

from .answers import INT

DEFAULT_HIDDEN_SEED = 20261130


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
            elif isinstance(value, (list, tuple)) and len(value) > 8:
                # a long list (token ids, requests): its first and last items and its length, not a wrapped screen
                ends = ", ".join(repr(v) for v in value[:3]) + ", …, " + ", ".join(repr(v) for v in value[-2:])
                parts.append(f"{name}={'[' if isinstance(value, list) else '('}{ends}"
                             f"{']' if isinstance(value, list) else ')'} ({len(value)} items)")
            else:
                parts.append(f"{name}={value!r}")
        return f"{self.function_name}({', '.join(parts)})"


def with_sides(build: Callable, side: Callable, names, make: Callable) -> Callable:
    """A hidden-case builder that shows every side of an edge ([diagnosis §6]): ``build(seed)``'s cases, then for
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


class Edge:
    """A boundary the exercise text decides (a tie, a rounding direction, a tolerance, an "other"), named on
    the visible cases that sit on it: ``case = EDGE.on(some_case(...))`` where the case is built, so its
    label is written once. A chapter module lists each exercise's edges in ``EDGES`` with ``edges``.
    """

    def __init__(self, rule: str):
        self.rule = rule
        self.cases: list = []

    def on(self, case: dict) -> dict:
        """``case``, listed as sitting on this edge (returned as it is)."""
        self.cases.append(case)
        return case

    def on_each(self, cases) -> tuple:
        """Every case of ``cases``, listed as sitting on this edge."""
        return tuple(self.on(case) for case in cases)

    def on_counterparts(self, edge: "Edge", cases, counterparts) -> None:
        """List the case of ``counterparts`` that stands where each of ``edge``'s cases stands in ``cases`` (a
        later exercise whose visible cases are built one for one from an earlier one's)."""
        for case, counterpart in zip(cases, counterparts):
            if any(case is on for on in edge.cases):
                self.on(counterpart)

    def listing(self, side: Callable | None = None) -> dict:
        """The entry of ``EDGES``: the rule, the labels of the cases on it and, where given, ``side(case)``
        (which side of the edge a case sits on, None off it: tests/test_case_variants.py)."""
        entry = {"rule": self.rule, "visible": tuple(case["label"] for case in self.cases)}
        return entry if side is None else dict(entry, side=side)

    def __repr__(self) -> str:
        return f"Edge({self.rule!r}, {len(self.cases)} cases)"
