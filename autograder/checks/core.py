"""Exercises and the check that grades a learner's function against kvlib.

An ``Exercise`` is data: its cases (plain JSON-safe dicts), the expected
value of each (computed by kvlib), and the inputs ``kvlib.slips.diagnose``
needs to name a wrong answer. Grading is split in two steps so that a grader
running outside the learner's kernel can reuse the second one:

1. ``run_cases(exercise, fn, cases)`` calls the learner's function on each
   case, inside the learner's process, and returns one JSON-safe *record* per
   case (``describe_result``): the result's exact type and value, the
   exception it raised, or the kvlib functions it tried to call.
2. ``judge(exercise, case, record)`` turns a record into a ``Verdict``
   (pass/fail and the message). It needs only the case and the record, so
   it can run on records read back from JSON.

``check(exercise, fn)`` does both and raises ``AssertionError`` with the
message of the first failing case, or prints one ✓ line.

Guards, and their limits:

* ``type(result) is int`` -- an always-equal object, an ``int`` subclass, a
  ``bool``, a float or a numpy integer is rejected with its own message.
* While the learner's function runs, every kvlib function (module functions,
  ``load_model``/``parse_config``, ``ModelSpec`` methods and properties) has its
  code swapped for a tripwire that raises "build this by hand: exercise X must
  not call kvlib.<name>". The code object is swapped, not the module
  attribute, so ``from kvlib import kv_bytes_per_token`` done earlier is
  caught too; a call that the learner catches is still recorded and fails.
  Everything is restored in a ``finally``. Reading a bundled config, byte
  units, dtype sizes and the GPU table stay allowed.
* Hidden cases: the learner's printing is swallowed while they run, and a
  failure names the slip in general words, never the case's inputs, the
  expected value or the learner's answer.

These are guard rails for an honest learner, not a sandbox: code in the same
process can read this module. Grading that must resist a determined student
runs ``judge`` outside the student's process.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import sys
import types
from dataclasses import dataclass
from typing import Callable

import kvlib
from kvlib import slips

DEFAULT_HIDDEN_SEED = 20261130

# kvlib modules and functions a learner may use inside a graded function:
# reading a bundled config, byte units, dtype sizes, the GPU table.
ALLOWED_MODULES = ("kvlib.units", "kvlib.dtypes", "kvlib.gpus")
ALLOWED_FUNCTIONS = ("kvlib.config.bundled_config", "kvlib.config.bundled_models",
                     "kvlib.config.resolve_model_id", "kvlib.config._data_dir", "kvlib.config._read_json")


class KvlibCalled(Exception):
    """Raised by a tripwire: the learner's function called kvlib."""


# ---------------------------------------------------------------------------
# Exercises
# ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Exercise:
    """One graded exercise.

    A case is a dict ``{"label": str, "kwargs": {...}, "context": {...}}``:
    ``kwargs`` are the learner's arguments (passed positionally in ``params``
    order, so a renamed parameter still works), ``context`` holds what the
    slip diagnosis needs beyond them (``num_heads``, ``hidden_size``, a hint).
    Everything in a case is JSON-safe.
    """

    grade_id: str
    function_name: str
    quantity: str                                 # a kvlib.slips quantity
    points: int
    params: tuple                                 # the learner's parameter names, in order
    visible_cases: tuple                          # of case dicts
    hidden_cases: Callable[[int], tuple]          # seed -> tuple of case dicts
    expected: Callable[[dict], int]               # case -> the right answer, from kvlib
    slip_inputs: Callable[[dict], dict]           # case -> kwargs for kvlib.slips.diagnose
    unit: str = "bytes"
    hidden_note: str = ""                         # what hidden cases vary, in general words

    def cases(self, hidden: bool = False, seed: int | None = None) -> tuple:
        if not hidden:
            return self.visible_cases
        return self.hidden_cases(DEFAULT_HIDDEN_SEED if seed is None else seed)

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
                parts.append(f"{name}=<{case['context'].get('config_name', 'config')}>")
            else:
                parts.append(f"{name}={value!r}")
        return f"{self.function_name}({', '.join(parts)})"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str
    slips: tuple = ()       # the kvlib slip keys that reproduce the answer, or a failure kind

    @property
    def slip(self) -> str | None:
        return self.slips[0] if self.slips else None


# ---------------------------------------------------------------------------
# Records: what the learner's function did, JSON-safe
# ---------------------------------------------------------------------------
def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def describe_result(value) -> dict:
    """A JSON-safe record of a returned value: its exact type and, where safe, its value."""
    t = type(value)
    record = {"type": _type_name(t)}
    if t is int:
        record["value"] = value
    elif t is float:
        record["number"] = value if math.isfinite(value) else repr(value)
    elif t.__module__ == "numpy" and hasattr(value, "item"):
        try:
            number = value.item()
        except Exception:  # noqa: BLE001 -- anything odd is simply not reported
            number = None
        if type(number) in (int, float):
            record["number"] = number
    elif t is bool or t is str:
        record["repr"] = repr(value)[:60]
    return record


def _describe_error(exc: BaseException) -> dict:
    return {"error": type(exc).__name__, "error_message": str(exc)[:300]}


# ---------------------------------------------------------------------------
# Tripwires
# ---------------------------------------------------------------------------
_TRIPS: list = []


def tripped(name: str, grade_id: str):
    """Called by a tripwire in place of a kvlib function: record it and raise."""
    _TRIPS.append(name)
    raise KvlibCalled(f"build this by hand: exercise {grade_id} must not call {name}")


def _public_name(module_name: str, qualname: str, obj) -> str:
    top = qualname.split(".")[0]
    if getattr(kvlib, top, None) is obj:
        return f"kvlib.{qualname}"
    return f"{module_name}.{qualname}"


def _kvlib_functions():
    """(display name, function) for every function kvlib defines, bar the allowed ones."""
    found, seen = [], set()

    def add(name, fn, module_name):
        if not isinstance(fn, types.FunctionType) or id(fn) in seen:
            return
        if fn.__module__ != module_name or fn.__closure__:
            return
        if f"{module_name}.{fn.__qualname__}" in ALLOWED_FUNCTIONS:
            return
        seen.add(id(fn))
        found.append((name, fn))

    for module_name, module in sorted(sys.modules.items()):
        if module is None or not (module_name == "kvlib" or module_name.startswith("kvlib.")):
            continue
        if module_name in ALLOWED_MODULES:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType):
                add(_public_name(module_name, value.__qualname__, value), value, module_name)
            elif isinstance(value, type) and value.__module__ == module_name:
                for meth_name, member in vars(value).items():
                    if meth_name.startswith("__"):
                        continue
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    elif isinstance(member, property):
                        member = member.fget
                    if isinstance(member, types.FunctionType):
                        label = _public_name(module_name, f"{value.__name__}.{meth_name}", value)
                        add(label, member, module_name)
    return found


def _tripwire_code(fn: types.FunctionType, name: str, grade_id: str) -> types.CodeType:
    source = (f"def {fn.__name__}(*args, **kwargs):\n"
              f"    __import__({__name__!r}, fromlist=['tripped']).tripped({name!r}, {grade_id!r})\n")
    namespace: dict = {}
    exec(compile(source, "<kvlib tripwire>", "exec"), namespace)
    return namespace[fn.__name__].__code__.replace(co_qualname=fn.__qualname__)


@contextlib.contextmanager
def kvlib_tripwires(grade_id: str):
    """Swap every kvlib function's code for a tripwire; restore it on the way out."""
    saved = []
    try:
        for name, fn in _kvlib_functions():
            saved.append((fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__))
            fn.__defaults__, fn.__kwdefaults__ = None, None
            fn.__code__ = _tripwire_code(fn, name, grade_id)
        yield
    finally:
        for fn, code, defaults, kwdefaults in reversed(saved):
            fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults


# ---------------------------------------------------------------------------
# Running the learner's function (inside the learner's process)
# ---------------------------------------------------------------------------
def run_cases(exercise: Exercise, student_fn, cases, *, quiet: bool = False) -> list:
    """Call ``student_fn`` on each case under the tripwires; one JSON-safe record per case."""
    records = []
    sink = io.StringIO()
    with kvlib_tripwires(exercise.grade_id):
        for case in cases:
            del _TRIPS[:]
            try:
                args = exercise.call_args(case)
                if quiet:
                    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                        result = student_fn(*args)
                else:
                    result = student_fn(*args)
                record = describe_result(result)
            except Exception as exc:  # noqa: BLE001 -- the learner's error becomes the verdict
                record = _describe_error(exc)
            if _TRIPS:
                record["kvlib_calls"] = sorted(set(_TRIPS))
            records.append(record)
        del _TRIPS[:]
    return records


# ---------------------------------------------------------------------------
# Judging a record (anywhere: needs only the case and the record)
# ---------------------------------------------------------------------------
GENERIC_SLIPS = {
    "query_heads": "you multiplied by the query heads (num_attention_heads) instead of the KV heads.",
    "missing_kv_factor": "the factor 2 for K and V is missing.",
    "bits_not_bytes": "you used bits per element instead of bytes.",
    "fp32_bytes": "you used 4 bytes per element instead of dtype_bytes.",
    "wrong_16bit_vs_fp8": "the element size is off: use dtype_bytes as given.",
    "hidden_over_heads": "you derived head_dim as hidden_size / num_attention_heads where the config "
                         "gives head_dim explicitly.",
    "missing_layers": "the number of layers is missing.",
    "answer_in_kib": "the answer looks like KiB; return bytes.",
    "answer_in_kb": "the answer looks like KB; return bytes.",
    "gb_for_gib": "you mixed GB (10^9) and GiB (2^30).",
    "ceil_not_floor": "take the floor, not the ceiling (or a rounding): a fraction of a sequence "
                      "cannot be admitted.",
    "missing_seq_len": "the sequence length is missing.",
    "missing_batch": "the batch size is missing.",
}


def _type_message(exercise: Exercise, record: dict) -> str:
    type_name = record["type"]
    short = type_name.removeprefix("builtins.")
    if type_name == "builtins.float":
        return (f"{exercise.function_name} returned a float; return a plain int "
                f"(bytes and counts are whole numbers: use // or int(...)).")
    if type_name.startswith("numpy."):
        return f"{exercise.function_name} returned {short}; convert it with int(...) and return a plain int."
    if type_name == "builtins.bool":
        return f"{exercise.function_name} returned a bool; return a plain int."
    if type_name == "builtins.NoneType":
        return f"{exercise.function_name} returned None: did you forget the return statement?"
    return (f"{exercise.function_name} returned an object of type {short}, not int; "
            f"return a plain int (type(result) is int), not a subclass or a look-alike.")


def matching_slips(quantity: str, answer, inputs: dict) -> tuple:
    """Every slip of the kvlib catalogue that reproduces ``answer`` (in catalogue order)."""
    expected, candidates = slips.QUANTITIES[quantity](dict(inputs))
    keys = []
    for key, wrong in candidates:
        if wrong is None or key in keys or _close(wrong, expected):
            continue
        if _close(answer, wrong):
            keys.append(key)
    return tuple(keys)


def _close(a, b) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


def _case_line(exercise: Exercise, case: dict) -> str:
    return f"case \"{case['label']}\""


def judge(exercise: Exercise, case: dict, record: dict, *, hidden: bool = False) -> Verdict:
    """The verdict on one case from the record of what the learner's function did.

    Visible verdicts name the case, the call, the answer and the expected
    value; hidden verdicts name only the slip, in general words.
    """
    fn = exercise.function_name
    if record.get("kvlib_calls"):
        names = ", ".join(record["kvlib_calls"])
        return Verdict(False, f"build this by hand: exercise {exercise.grade_id} must not call {names}.",
                       ("kvlib_called",))
    head = "on a hidden case: " if hidden else f"on {_case_line(exercise, case)}:\n"
    if record.get("error") == "NotImplementedError":
        return Verdict(False, f"{fn} is not written yet (it raises NotImplementedError): replace the stub "
                              "with your code.", ("error",))
    if "error" in record:
        if hidden:
            return Verdict(False, f"{fn} raised {record['error']} on a hidden case. {exercise.hidden_note}",
                           ("error",))
        text = f"{exercise.call_text(case)} raised {record['error']}: {record['error_message']}"
        hint = case["context"].get("hint")
        return Verdict(False, head + text + (f"\nHint: {hint}" if hint else ""), ("error",))
    if record["type"] != "builtins.int":
        message = _type_message(exercise, record)
        number = record.get("number")
        if not hidden and isinstance(number, (int, float)) and number == exercise.expected(case):
            message += " (The value itself is right.)"
        return Verdict(False, head + message, ("not_int",))
    answer, expected = record["value"], exercise.expected(case)
    if answer == expected:
        return Verdict(True, "correct.")
    inputs = exercise.slip_inputs(case)
    keys = matching_slips(exercise.quantity, answer, inputs)
    if hidden:
        texts = [GENERIC_SLIPS.get(k, "a known slip.") for k in keys[:2]]
        text = " Or: ".join(texts) if texts else "the answer matches no known slip: recheck each factor."
        return Verdict(False, f"{fn} is wrong {head}{text} {exercise.hidden_note}".rstrip(), keys)
    diagnosis = slips.diagnose(exercise.quantity, answer, **inputs)
    text = (f"{exercise.call_text(case)} returned {answer:,}; expected {expected:,} {exercise.unit}.\n"
            f"{diagnosis.message}")
    hint = case["context"].get("hint")
    if hint and not keys:
        text += f"\nHint: {hint}"
    return Verdict(False, head + text, keys)


def verdicts(exercise: Exercise, cases, records, *, hidden: bool = False) -> list:
    return [judge(exercise, case, record, hidden=hidden) for case, record in zip(cases, records)]


# ---------------------------------------------------------------------------
# The instant check
# ---------------------------------------------------------------------------
def _failure_message(exercise: Exercise, student_fn, hidden: bool, seed) -> str | None:
    """Run and judge every case; the message to raise, or None when all pass.

    Kept apart from ``check`` so that no frame alive when the AssertionError is
    raised holds a hidden case (a verbose traceback would print its locals).
    """
    if not callable(student_fn):
        return f"✗ {exercise.grade_id}: {exercise.function_name} must be a function, got {type(student_fn).__name__}."
    cases = exercise.cases(hidden, seed)
    records = run_cases(exercise, student_fn, cases, quiet=hidden)
    results = verdicts(exercise, cases, records, hidden=hidden)
    failures = [v for v in results if not v.ok]
    if not failures:
        print(f"✓ {exercise.function_name}: all {len(results)} {'hidden' if hidden else 'visible'} "
              f"cases right ({exercise.grade_id})")
        return None
    head = f"✗ {exercise.grade_id}: "
    if hidden:
        # Prefer a failure that one slip explains: small counts can match several.
        unique = [v for v in failures if len(v.slips) == 1]
        return head + (unique or failures)[0].message
    more = len(failures) - 1
    tail = f"\n({more} more visible case{'s' if more > 1 else ''} fail{'' if more > 1 else 's'}.)" if more else ""
    return head + failures[0].message + tail


def check(exercise: Exercise, student_fn, hidden: bool = False, seed: int | None = None) -> None:
    """Grade ``student_fn`` on the exercise's visible (or hidden) cases.

    Prints one ✓ line when every case is right; otherwise raises
    ``AssertionError`` naming the slip (and, for visible cases only, the case).
    """
    __tracebackhide__ = True  # IPython and pytest show the learner the message, not our frames
    message = _failure_message(exercise, student_fn, hidden, seed)
    if message is not None:
        raise AssertionError(message) from None
